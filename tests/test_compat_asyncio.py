"""The asyncio section of `_compat`: each entry holds on the installed Python, and a changed shape fails at once."""

from __future__ import annotations

import asyncio
import inspect
import platform
import re
import time
from asyncio import base_events, events, futures, selector_events, tasks
from typing import TYPE_CHECKING, Any

import pytest

from pytest_fake_mcp import _compat
from pytest_fake_mcp._compat import (
    ASYNCIO_ENTRIES,
    BASE_LOOP_CALL_SOON,
    BASE_LOOP_RUN_ONCE,
    BASE_LOOP_TIMER_CANCELLED,
    FUTURE_LOG_TRACEBACK,
    HANDLE_RUN,
    HANDLE_SLOTS,
    SELECTOR_LOOP_ADD_READER_WRITER,
    SELECTOR_LOOP_SELF_PIPE,
    TASK_STEP_TYPE,
    CompatError,
    Entry,
)
from pytest_fake_mcp._host._listener import running_listeners
from pytest_fake_mcp._race import ControlledLoop, NondeterminismError, run_controlled

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@pytest.fixture
def changed() -> Iterator[pytest.MonkeyPatch]:
    """A monkeypatch to change asyncio's shape with; the entries are checked afresh before and after.

    A changed shape reaches every loop of the process: the fake servers' listeners (the pool's idle ones, whose
    loops still run timers) are stopped first, and the pool starts new ones for later tests.
    """
    for listener in running_listeners():
        listener.stop()
    _compat.forget()
    with pytest.MonkeyPatch.context() as patch:
        yield patch
    _compat.forget()


@pytest.mark.parametrize("entry", ASYNCIO_ENTRIES, ids=lambda entry: entry.name.split(" ")[0])
def test_every_asyncio_entry_holds_on_the_installed_python(entry: Entry) -> None:
    assert entry.check() is None
    assert _compat.ENTRIES[f"python:{entry.name}"] is entry
    assert entry.library == "python"
    assert entry.what
    assert entry.checked
    assert entry.gain
    assert entry.fallback


def test_a_controlled_loop_requires_every_asyncio_entry() -> None:
    assert all(_compat.usable(entry) for entry in ASYNCIO_ENTRIES)
    result = run_controlled(lambda: asyncio.sleep(1, "done"))
    assert result.value == "done"


class _ChangedFuture(futures._PyFuture):  # type: ignore[name-defined,misc]
    """A future that never flags its exception as unretrieved."""

    @property
    def _log_traceback(self) -> bool:
        return False

    @_log_traceback.setter
    def _log_traceback(self, value: bool) -> None:
        pass


def _changed_create_future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
    return _ChangedFuture(loop=loop)


def _call_soon_without_context(self: Any, callback: Any, args: Any) -> Any:
    return None


_BASE: Any = base_events.BaseEventLoop
_SELECTOR: Any = selector_events.BaseSelectorEventLoop

CHANGES: dict[Entry, Callable[[pytest.MonkeyPatch], None]] = {
    BASE_LOOP_RUN_ONCE: lambda patch: patch.delattr(_BASE, "_run_once"),
    BASE_LOOP_CALL_SOON: lambda patch: patch.setattr(_BASE, "_call_soon", _call_soon_without_context),
    BASE_LOOP_TIMER_CANCELLED: lambda patch: patch.delattr(_BASE, "_timer_handle_cancelled"),
    HANDLE_SLOTS: lambda patch: patch.delattr(events.Handle, "_cancelled"),
    HANDLE_RUN: lambda patch: patch.delattr(events.Handle, "_run"),
    SELECTOR_LOOP_SELF_PIPE: lambda patch: patch.delattr(_SELECTOR, "_make_self_pipe"),
    SELECTOR_LOOP_ADD_READER_WRITER: lambda patch: patch.delattr(_SELECTOR, "_add_writer"),
    FUTURE_LOG_TRACEBACK: lambda patch: patch.setattr(_BASE, "create_future", _changed_create_future),
    TASK_STEP_TYPE: lambda patch: patch.setattr(tasks, "Task", tasks._PyTask),  # type: ignore[attr-defined]
}


def test_every_asyncio_entry_has_a_changed_shape_faked() -> None:
    assert set(CHANGES) == set(ASYNCIO_ENTRIES)


@pytest.mark.parametrize("entry", ASYNCIO_ENTRIES, ids=lambda entry: entry.name.split(" ")[0])
def test_a_changed_asyncio_shape_fails_the_loop_at_once_naming_python_and_its_version(
    entry: Entry, changed: pytest.MonkeyPatch
) -> None:
    CHANGES[entry](changed)
    assert entry.check() is not None
    with pytest.raises(CompatError) as raised:
        ControlledLoop()
    assert raised.value.entry is entry
    message = str(raised.value)
    assert f"python {platform.python_version()}" in message
    assert entry.name in message
    with pytest.raises(CompatError, match=re.escape(entry.name)):
        run_controlled(lambda: asyncio.sleep(0))


def test_a_changed_shape_is_seen_only_once_checked_afresh(changed: pytest.MonkeyPatch) -> None:
    ControlledLoop().close()  # checked (and cached) as installed
    CHANGES[HANDLE_RUN](changed)
    ControlledLoop().close()  # the cached answer stands until forgotten: never a check per loop
    _compat.forget()
    with pytest.raises(CompatError):
        ControlledLoop()


def test_the_wall_clock_guard_finds_its_caller_through_the_public_frame_api_and_copes_without_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # inspect.currentframe() (not sys._getframe) is the public way; on a Python without frames it answers None:
    # a blocking sleep is still refused, at an unknown place, and clock reads are not counted.
    monkeypatch.setattr(inspect, "currentframe", lambda: None)

    async def main() -> None:
        time.monotonic()
        time.sleep(0.01)  # noqa: ASYNC251 - the blocking sleep under test

    with pytest.raises(NondeterminismError, match=r"time\.sleep\(0\.01\) at an unknown place"):
        run_controlled(main)


def test_without_thread_frames_a_blocked_client_thread_is_named_without_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """THREAD_FRAMES (sys._current_frames) gone: the contract suite's report names the blocked worker thread and
    says its line cannot be read, instead of failing."""
    import sys
    import threading

    from pytest_fake_mcp._client import ThreadBlocked, in_thread

    _compat.forget()
    assert _compat.thread_frame(threading.get_ident()) is not None
    monkeypatch.delattr(sys, "_current_frames")
    _compat.forget()
    assert not _compat.usable(_compat.THREAD_FRAMES)
    assert _compat.thread_frame(threading.get_ident()) is None

    release = threading.Event()

    async def main() -> ThreadBlocked:
        try:
            await in_thread(lambda: release.wait(10), bound=0.05, what="a blocked step")
        except ThreadBlocked as blocked:
            return blocked
        raise AssertionError("the bound did not end the step")

    try:
        blocked = asyncio.run(main())
    finally:
        release.set()
        _compat.forget()
    assert blocked.where == []
    assert str(blocked) == "a blocked step: the client's thread 'fake-mcp client: a blocked step' was still blocked"
