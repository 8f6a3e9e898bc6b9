"""run_controlled: one run of a coroutine on a fresh `ControlledLoop`, torn down deterministically, as a `RunResult`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from ._choosers import FifoChooser
from ._loop import (
    DEFAULT_FAIRNESS,
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_VIRTUAL_TIME,
    THREADS_FIX,
    ControlledLoop,
    Deadlock,
    Livelock,
    NondeterminismError,
    never_started,
)
from ._wallclock import WallClockGuard

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ._choosers import Chooser
    from ._lanes import Deviation

__all__ = [
    "RunResult",
    "cancel_in_order",
    "collect_unretrieved",
    "explain_livelock",
    "is_skip",
    "run_controlled",
    "wall_clock_guard",
]

T = TypeVar("T")


@dataclass(slots=True, kw_only=True)
class RunResult:
    """What one controlled run did, for oracles and failure reports."""

    value: Any = None
    error: BaseException | None = None
    steps: int = 0
    decisions: int = 0
    deviation_count: int = 0
    virtual_time: float = 0.0
    deviations: list[Deviation] = field(default_factory=list)
    loop_errors: list[dict[str, Any]] = field(default_factory=list)
    leftover_tasks: list[str] = field(default_factory=list)
    violations: list[NondeterminismError] = field(default_factory=list)
    trace: list[int] = field(default_factory=list)
    """The lane run at each step of the scenario (task creation number, -1 for callbacks)."""
    task_names: dict[int, str] = field(default_factory=dict)
    """Creation number -> name of every task of the run."""

    def describe_errors(self) -> list[str]:
        """One line per error the loop reported (exception never retrieved, callback raised, ...)."""
        lines = []
        for context in self.loop_errors:
            exc = context.get("exception")
            lines.append(f"{context.get('message', 'error')}: {exc!r}" if exc is not None else str(context["message"]))
        return lines


def run_controlled(
    main: Callable[[], Coroutine[Any, Any, T]],
    chooser: Chooser | None = None,
    *,
    fairness: int = DEFAULT_FAIRNESS,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_virtual_time: float = DEFAULT_MAX_VIRTUAL_TIME,
    cleanup: Callable[[], Coroutine[Any, Any, Any]] | None = None,
    drain: float = 60.0,
    describe: bool = True,
) -> RunResult:
    """Run ``main()`` on a fresh `ControlledLoop` and tear it down deterministically; never raises for ``main``.

    Its result or exception goes in `RunResult`. ``cleanup()`` (if given) runs after ``main`` on the same
    loop in FIFO order; then the loop runs ``drain`` more virtual seconds (held requests and timeouts
    end). Tasks still pending then are listed in
    ``leftover_tasks`` and cancelled in creation order. `NondeterminismError` is re-raised. ``describe=False``
    skips describing the out-of-order steps (``deviations`` stays empty, ``deviation_count`` still counts):
    a search describes only the run it reports.

    Example::

        result = run_controlled(lambda: asyncio.sleep(3600, "done"))
        assert result.value == "done" and result.virtual_time == 3600
    """
    started_threads: list[str] = []
    runner = threading.current_thread()
    thread_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if threading.current_thread() is runner:
            started_threads.append(thread.name)
        thread_start(thread)

    loop = ControlledLoop(
        chooser, fairness=fairness, max_steps=max_steps, max_virtual_time=max_virtual_time, describe=describe
    )
    threading.Thread.start = start  # type: ignore[method-assign,assignment]
    clock = wall_clock_guard(loop)
    result = RunResult()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        main_task = loop.create_task(main(), name="main")
        try:
            with clock:
                result.value = loop.run_until_complete(main_task)
        except (Deadlock, Livelock) as exc:
            result.error = explain_livelock(exc, clock)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            result.error = exc
        result.steps, result.decisions, result.virtual_time = loop.steps, loop.decisions, loop._vt
        result.deviation_count, result.deviations = loop.deviation_count, list(loop.deviations)
        result.trace = list(loop.trace)
        loop.chooser = FifoChooser()
        loop.max_steps = loop.steps + DEFAULT_MAX_STEPS  # teardown gets its own budget
        loop.max_virtual_time = loop._vt + DEFAULT_MAX_VIRTUAL_TIME
        result.task_names = loop.names
        if cleanup is not None and not loop.violations:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.create_task(cleanup(), name="cleanup"))
        with contextlib.suppress(Exception):  # let what is bounded finish: held requests, timeouts
            loop.run_until_complete(loop.create_task(asyncio.sleep(drain), name="drain"))
        pending = [t for t in loop.tasks() if not t.done()]
        result.leftover_tasks = [loop._describe_waiting(t) for t in pending]
        cancel_in_order(loop, pending)
        collect_unretrieved(loop)
        result.loop_errors = list(loop.errors)
        result.violations = list(loop.violations)
        if started_threads and not result.violations and not is_skip(result.error):
            result.violations.append(
                NondeterminismError(
                    f"a thread started during the run ({', '.join(started_threads)})", THREADS_FIX, thread=True
                )
            )
        with contextlib.suppress(Exception):  # the async generators left open are closed (those done: a no-op)
            loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        threading.Thread.start = thread_start  # type: ignore[method-assign]
        loop.close()
        if gc_was_enabled:
            gc.enable()
    if result.violations:
        raise result.violations[0]
    return result


def is_skip(error: BaseException | None) -> bool:
    """Whether ``error`` says "skip this test" (``unittest.SkipTest``, ``pytest.skip``): a scenario that skips is
    passed on as a skip, not judged (Hypothesis re-raises the same two at once)."""
    if error is None:
        return False
    unittest, pytest = sys.modules.get("unittest"), sys.modules.get("pytest")  # an error of neither: not loaded
    return (unittest is not None and isinstance(error, unittest.SkipTest)) or (
        pytest is not None and isinstance(error, pytest.skip.Exception)
    )


def wall_clock_guard(loop: ControlledLoop) -> WallClockGuard:
    """The guard of ``loop``'s run: a blocking ``time.sleep`` is refused as a `NondeterminismError`."""

    def refuse(source: str, fix: str) -> NoReturn:
        loop._refuse(NondeterminismError(source, fix))

    return WallClockGuard(loop.is_running, refuse)


def explain_livelock(exc: BaseException, clock: WallClockGuard) -> BaseException:
    """A `Livelock` naming the busiest wall-clock read of the code under test, if one was busy; else ``exc``."""
    if not isinstance(exc, Livelock):
        return exc
    hint = clock.livelock_hint()
    if not hint:
        return exc
    return Livelock(exc.step, exc.virtual_time, exc.why + hint)


def cancel_in_order(loop: ControlledLoop, pending: list[asyncio.Task[Any]]) -> None:
    # A task that has not taken its first step is left to take it first, as anyio's cancel scopes do: a
    # cancellation thrown into anyio's wrapper of a task group's child before it starts drops the child's own
    # coroutine unawaited ("coroutine ... was never awaited" when collected). The second round cancels it.
    for task in pending:
        if not never_started(task.get_coro()):
            task.cancel()
    if pending:
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.wait(pending, timeout=60.0))
        rest = [t for t in pending if not t.done()]
        for task in rest:  # a task that swallows cancellation: once more, then give up on it
            task.cancel()
        if rest:
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.wait(rest, timeout=60.0))


def collect_unretrieved(loop: ControlledLoop) -> None:
    """Report tasks that failed with nobody retrieving the error, without waiting for GC to log them."""
    for task in loop.tasks():
        if task.done() and not task.cancelled() and task._log_traceback:
            exc = task.exception()  # marks it retrieved, so it is not logged again when collected
            loop.errors.append(
                {"message": f"Task exception was never retrieved ({loop.task_name(task)})", "exception": exc}
            )
