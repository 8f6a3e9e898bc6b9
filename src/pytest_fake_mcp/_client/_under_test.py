"""What the contract and race suites need of a client under test, in the forms frameworks hand it over.

Two forms (docs/contract.md#client-forms):

- :class:`ContractClient`, from ``make_client(url)``: a client that connects when first called and offers
  ``await call_tool(name, arguments)`` and ``await aclose()``, which may be awaited from any task;
- from ``open_client(url)``: an async context manager (or a sync one, for a client that runs in threads) that
  yields an object with ``call_tool(name, arguments)`` (:class:`ContractCaller`), async or sync. The suite enters
  and exits it on the scenario's own task, as ``async with`` does, so a client built on anyio cancel scopes
  (the SDK's, FastMCP's, most frameworks') is never exited from another task.

:class:`Subject` drives either form; a sync step runs in a worker thread of its own under the suite's bound
(:func:`in_thread`), so a client that blocks can fail a scenario but never hang pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sysconfig
import threading
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._compat import thread_frame

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from types import FrameType

__all__ = [
    "ClientOpener",
    "ContractCaller",
    "ContractClient",
    "Opened",
    "Subject",
    "ThreadBlocked",
    "WorksInThreads",
    "in_thread",
    "is_async",
    "mark_known_failure",
]

T = TypeVar("T")


class ContractClient(Protocol):
    """What ``make_client`` returns: call a tool, and close (from any task)."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...

    async def aclose(self) -> None: ...


class ContractCaller(Protocol):
    """What ``open_client``'s context manager yields: ``call_tool(name, arguments)``, async or sync."""

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


class ClientOpener(Protocol):
    """The ``open_client`` fixture's value: the fake's URL in, a context manager (async or sync) out."""

    def __call__(self, url: str) -> Any: ...


class ThreadBlocked(Exception):
    """A sync step of the client was still running in its worker thread when the suite's bound was reached."""

    def __init__(self, what: str, thread: threading.Thread, where: list[str]) -> None:
        self.what = what
        self.thread_name = thread.name
        self.where = where
        at = f", at {where[0]}" if where else ""
        super().__init__(f"{what}: the client's thread {thread.name!r} was still blocked{at}")


_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _stack(frame: FrameType | None, limit: int = 3) -> list[str]:
    """Innermost first, ``path:line in function``: the standard library's frames (``Event.wait``) left out unless
    nothing else is on the stack."""
    lines: list[str] = []
    stdlib: list[str] = []
    while frame is not None and len(lines) < limit:
        line = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_qualname}"
        (stdlib if frame.f_code.co_filename.startswith(_STDLIB) else lines).append(line)
        frame = frame.f_back
    return lines or stdlib[:limit]


async def in_thread(step: Callable[[], T], *, bound: float, what: str, busy: set[threading.Thread] | None = None) -> T:
    """Run the sync ``step`` in a daemon thread of its own; raise :class:`ThreadBlocked` if it is still running
    after ``bound`` seconds (the thread is left to finish: a thread cannot be stopped, but a daemon one does not
    hold pytest at exit, as the loop's default executor would at its shutdown). ``busy`` holds the thread while
    its step runs, for a caller whose own bound ends first (:meth:`Subject.blocked`)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return  # the bound was reached first: the late answer goes nowhere
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = step(), None
        except BaseException as exc:  # handed to the awaiting task, as a call's outcome
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits this step any more
            loop.call_soon_threadsafe(settle, result, error)

    thread = threading.Thread(target=run, name=f"fake-mcp client: {what}"[:80], daemon=True)
    if busy is not None:
        busy.add(thread)
        done.add_done_callback(lambda _: busy.discard(thread))
    thread.start()
    try:
        async with asyncio.timeout(bound):
            return await asyncio.shield(done)
    except TimeoutError:
        if done.done():
            raise  # the step itself raised TimeoutError: an outcome
        raise ThreadBlocked(what, thread, _stack(thread_frame(thread.ident))) from None


class Subject:
    """The client under test in either form: opened, called and closed by a scenario.

    ``make_client``'s client is used as it is; ``open_client``'s context manager is entered by :meth:`open` and
    exited by :meth:`aclose`, both on the scenario's task (an async one awaited there, a sync one in a worker
    thread under ``timeout``).
    """

    def __init__(self, *, client: Any = None, opener: ClientOpener | None = None, timeout: float) -> None:
        self.client = client
        self.opener = opener
        self.timeout = timeout
        self.closed = False
        self.opened_on: asyncio.Task[Any] | None = None
        self.opened_at_seq = 0
        """The journal's last exchange when the client was open: what came before is its opening's."""
        self._context: Any = None
        self._busy: set[threading.Thread] = set()

    def blocked(self, what: str) -> ThreadBlocked | None:
        """The first worker thread still running a sync step (the bound of ``what`` ended first), if any."""
        for thread in self._busy:
            if thread.is_alive():
                return ThreadBlocked(what, thread, _stack(thread_frame(thread.ident)))
        return None

    @property
    def in_context(self) -> bool:
        """Handed over by ``open_client`` (entered and exited on one task)."""
        return self.opener is not None

    @property
    def threaded(self) -> bool:
        """Its ``call_tool`` is sync: each call runs in a worker thread (it cannot be cancelled by its caller)."""
        call = getattr(self.client, "call_tool", None)
        return call is not None and not _is_async(call)

    async def open(self, url: str, bounded: Callable[[Awaitable[Any], str], Awaitable[Any]]) -> None:
        """Enter ``open_client(url)`` (on this task), or nothing for ``make_client``'s client."""
        if self.opener is None:
            return
        context = self.opener(url)
        self.opened_on = asyncio.current_task()
        if hasattr(context, "__aenter__") and hasattr(context, "__aexit__"):
            self._context = context
            self.client = await bounded(context.__aenter__(), "entering the client's `async with` (open_client)")
        elif hasattr(context, "__enter__") and hasattr(context, "__exit__"):
            self._context = context
            self.client = await in_thread(
                context.__enter__, bound=self.timeout, busy=self._busy, what="entering the client's `with`"
            )
        else:
            raise TypeError(
                f"open_client returned {context!r}, which is no context manager: return an async context manager "
                "(an `@contextlib.asynccontextmanager` function's call, or the framework's client itself if it "
                "supports `async with`) or a sync one, that yields an object with call_tool(name, arguments)"
            )
        if not callable(getattr(self.client, "call_tool", None)):
            raise TypeError(
                f"open_client's context yielded {self.client!r}, which has no call_tool(): yield an object with "
                "call_tool(name, arguments) (async or sync), e.g. a small adapter mapping it to the framework's "
                "own call"
            )

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """One call, awaited on this task (async) or run in a worker thread under the bound (sync)."""
        call = self.client.call_tool
        if _is_async(call):
            return await call(name, arguments)
        result = await in_thread(
            lambda: call(name, arguments), bound=self.timeout, busy=self._busy, what=f"call_tool({name!r})"
        )
        return await result if inspect.isawaitable(result) else result

    async def aclose(self) -> None:
        """``aclose()`` for ``make_client``'s client; for ``open_client``'s, leave its context (on this task)."""
        self.closed = True
        if self._context is None:
            if self.opener is None:
                await self.client.aclose()
            return
        context, self._context = self._context, None
        if hasattr(context, "__aexit__"):
            await context.__aexit__(None, None, None)
        else:
            await in_thread(
                lambda: context.__exit__(None, None, None),
                bound=self.timeout,
                busy=self._busy,
                what="leaving the `with`",
            )


def _is_async(function: Any) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    call = type(function).__call__ if callable(function) else None  # an object whose __call__ is async
    return inspect.iscoroutinefunction(call)


def is_async(function: Any) -> bool:
    """Whether calling ``function`` gives an awaitable to await (a coroutine function, or an object whose
    ``__call__`` is one), as opposed to a sync step that would run in a worker thread."""
    return _is_async(function)


class Opened:
    """``make_client``'s value when a suite's subclass gave ``open_client`` instead: the scenario opens the context."""

    def __init__(self, opener: ClientOpener) -> None:
        self.opener = opener


class WorksInThreads(TypeError):
    """The client under test works in threads (a sync context manager, a sync ``call_tool``): a suite that runs
    everything on one event loop it controls cannot run it."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)


def mark_known_failure(suite: object, request: Any) -> None:
    """Mark the running scenario a strict ``xfail`` if ``suite.known_failures`` names it (every case of a scenario by
    its method's name, one case as pytest names it: ``test_x[param]``); a name that is no scenario of the suite is
    refused, as a typo would otherwise leave the failure it meant to declare failing.

    Shared by the contract and race suites' ``known_failures`` (the body of their autouse fixture).
    """
    import pytest  # the suites' fixture calls it: pytest is loaded

    known: Mapping[str, str] = getattr(suite, "known_failures", {})
    if not known:
        return
    scenarios = {name for name in dir(type(suite)) if name.startswith("test_")}
    unknown = [name for name in known if name.partition("[")[0] not in scenarios]
    if unknown:
        raise ValueError(
            f"{type(suite).__name__}.known_failures names no scenario of the suite: "
            f"{', '.join(map(repr, unknown))}; use a test method's name, or one case as pytest names it "
            "(test_x[param])"
        )
    node = request.node
    reason = known.get(node.name) or known.get(getattr(node, "originalname", ""))
    if reason:
        node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
