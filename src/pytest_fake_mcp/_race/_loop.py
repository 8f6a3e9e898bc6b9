"""ControlledLoop: an asyncio loop that runs one ready callback per step, chosen by a `Chooser`, on virtual time.

Ready callbacks are grouped in *lanes*: one per task (the task's steps and wake-ups) plus one shared
lane for every other callback. Lanes are ordered canonically by (the step in which their head became
ready, the task's creation number), never by object address or set order, so a run is a pure function
of the chooser's answers: anyio delivers cancellation by iterating a ``set``, and ordering by enqueue
order made replays diverge. For the same reason the callbacks one step makes ready are reordered when
that step wakes several tasks: each future's done callbacks stay together (a plain callback such as
``asyncio.shield``'s with the wake-up beside it), in the creation order of the task they wake. The
chooser is asked only when more than one lane can run; a lane starved for more than ``fairness`` steps
runs next (a chooser that keeps demoting a self-rescheduling callback would otherwise livelock).

Time is virtual: ``time()`` moves only when nothing can run, straight to the next timer, so sleeps,
timeouts and backoff cost nothing. Nothing runnable and no timer while the main task is pending is a
`Deadlock`; a run past its step or virtual-time budget is a `Livelock`.

What the loop cannot control fails the run at once with `NondeterminismError`: a real socket, an
executor (``asyncio.to_thread``, DNS lookups), a foreign task factory (the eager task factory), a thread
started during the run. GC is off during a run (a collection at an arbitrary step would run finalizers
at an arbitrary step), and unhandled errors the loop reports (an exception never retrieved, a callback
that raised) are collected in `ControlledLoop.errors` instead of logged.

Relies on asyncio's internals (``BaseEventLoop._run_once`` with ``_ready``, ``_scheduled`` and ``_stopping``,
``_call_soon``, ``_timer_handle_cancelled``, the selector loop's self-pipe and ``_add_reader``/``_add_writer``,
``Handle``'s slots and ``_run``, ``Future._log_traceback``, the type of a task's step callback): each is an
entry of ``_compat.ASYNCIO_ENTRIES``, checked once per process when a loop is first made, so a Python
whose asyncio changed fails there with a `CompatError` naming what changed.

This module is the mechanism; the policy lives beside it: which lane runs (`_choosers`), which FIFO group a
task joins (`_fifo_groups`), the canonical order of the lanes (`_lanes`), and a whole run with its teardown
(`_run`). Over 400 lines on purpose: the loop is one class whose steps (stamping each callback, closing a
batch, picking a lane) share its queue and its counters; each step calls its helpers plainly (inlining them
bought 1.7% of the race row, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._compat import ASYNCIO_ENTRIES, require, task_step_type
from .._wire._errors import FakeMCPError
from ._choosers import FifoChooser
from ._fifo_groups import USER, group_of_coro
from ._lanes import Deviation, Lane, canonical, canonical_batch

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from ._choosers import Chooser, Ranking
    from ._lanes import ReadyLane

__all__ = [
    "DEFAULT_FAIRNESS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_VIRTUAL_TIME",
    "THREADS_FIX",
    "ControlledLoop",
    "Deadlock",
    "Livelock",
    "NondeterminismError",
    "never_started",
    "where_task_stands",
]

DEFAULT_FAIRNESS = 64
DEFAULT_MAX_STEPS = 200_000
DEFAULT_MAX_VIRTUAL_TIME = 1_000_000.0
_DESCRIBED_DEVIATIONS = 40
_LIBRARY_MARKERS = ("/asyncio/", "/anyio/", "/httpx/", "/httpx2/", "/httpcore/", "/mcp/", "/starlette/", "/_loop.py")


class Deadlock(FakeMCPError, RuntimeError):
    """Nothing can run, no timer is pending, and the main task has not finished."""

    def __init__(self, step: int, waiting: Sequence[str]) -> None:
        self.step = step
        self.waiting = tuple(waiting)
        listing = "\n".join(f"  - {w}" for w in waiting) or "  (no task is pending: a future nobody completes)"
        super().__init__(
            f"Deadlock at step {step}: nothing can run and no timer is pending, but the run has not finished. "
            f"Waiting:\n{listing}\nHint: a task awaits an event or future that nothing will set (a lock held "
            "across the await that would release it?)."
        )


class Livelock(FakeMCPError, RuntimeError):
    """The run kept going past its step or virtual-time budget."""

    def __init__(self, step: int, virtual_time: float, why: str) -> None:
        self.step = step
        self.virtual_time = virtual_time
        self.why = why
        super().__init__(
            f"Livelock: {why} (step {step}, virtual time {virtual_time:g}s). Tasks kept running without the "
            "run finishing: a retry loop with no bound, or tasks waking each other for ever."
        )


THREADS_FIX: Final = (
    "Threads run outside the scheduler: keep them out of the code a race test runs (or move blocking work behind "
    "an async fake). A client that works in threads cannot be explored: SessionReuseSuite runs it with its calls "
    "bounded in worker threads (docs/races.md#what-racesuite-cannot-explore)."
)
"""The fix every refusal of a thread names (an executor, a DNS lookup, a thread started during the run)."""


class NondeterminismError(FakeMCPError, RuntimeError):
    """The code under test used something the controlled loop cannot replay (a socket, a thread, ...).

    ``thread`` is True when that something is a thread (an executor, a DNS lookup, a thread started during the
    run): `RaceSuite` then skips the scenario, saying what it cannot explore.
    """

    def __init__(self, source: str, fix: str, *, thread: bool = False) -> None:
        self.source = source
        self.thread = thread
        super().__init__(
            f"Race test met a source of nondeterminism it cannot control: {source}. Its timing is decided by "
            f"the OS, so a found failure could not be replayed. {fix}"
        )


class ControlledLoop(asyncio.SelectorEventLoop):
    """A selector loop whose scheduling is chosen step by step, on virtual time; see the module docstring.

    Example::

        loop = ControlledLoop(PriorityChooser([0, 1]))
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ControlledLoop:
        # What the loop relies on of asyncio's internals, checked once per process: a changed asyncio fails
        # here, naming what changed, before a half-made loop exists (its __del__ would fail too).
        for entry in ASYNCIO_ENTRIES:
            require(entry)
        return super().__new__(cls)

    def __init__(
        self,
        chooser: Chooser | None = None,
        *,
        fairness: int = DEFAULT_FAIRNESS,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_virtual_time: float = DEFAULT_MAX_VIRTUAL_TIME,
        describe: bool = True,
    ) -> None:
        super().__init__(_NoSelector())  # type: ignore[arg-type]
        self.chooser = chooser or FifoChooser()
        self.fairness = fairness
        self.max_steps = max_steps
        self.max_virtual_time = max_virtual_time
        self.describe = describe
        """Record a `Deviation` (task names, where each stood) for the first out-of-order steps; off, only count."""
        self.steps = 0
        self.decisions = 0
        self.deviation_count = 0
        self.deviations: list[Deviation] = []
        self.errors: list[dict[str, Any]] = []
        self.violations: list[NondeterminismError] = []
        self._vt = 0.0
        self._ready_cancelled = False
        """A callback of the ready queue may have been cancelled (set by its handle): drop such before choosing."""
        self._ready_lanes: deque[ReadyLane] = deque()
        """(step it became ready, lane, is a task wake-up) of each callback in ``_ready``, in the same order."""
        self._batch_start = 0
        """Where the callbacks made ready since the last step (the batch) start in ``_ready``."""
        self._batch_wakeups = 0
        """How many of them wake a task (two or more: the batch is put in canonical order)."""
        self._unnumbered = False
        """One of them belongs to a task met for the first time outside the task factory (numbered with the batch)."""
        self._building = False
        """Inside the task factory: the task whose first step is made ready takes the next creation number."""
        self._seqs: dict[int, int] = {}
        """``id(task)`` -> creation number; trusted only if ``_tasks[seq]`` still is that task (ids are reused)."""
        self._tasks: list[weakref.ref[asyncio.Task[Any]]] = []
        """By creation number."""
        self._next_seq = 0
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._groups: dict[int, int] = {}
        self.trace: list[int] = []
        """The lane (task creation number, -1 for callbacks) run at each step."""
        self._names: dict[int, str] = {}
        self._parents: dict[int, int] = {}
        """Creation number -> the creation number of the task that built it (tasks built by another task only)."""
        self.on_task: Callable[[int, int | None], None] | None = None
        """Called as each task is numbered: (its creation number, its creator's, if a task of this loop built it)."""
        super().set_task_factory(self._stamping_factory)
        super().set_exception_handler(self._collect_error)

    @property
    def chooser(self) -> Chooser:
        """Answers the choice points; replaceable between runs (a teardown runs in FIFO order)."""
        return self._chooser

    @chooser.setter
    def chooser(self, chooser: Chooser) -> None:
        self._chooser = chooser
        self._fifo_at: Callable[[int], bool] | None = getattr(chooser, "fifo_at", None)
        offered: Callable[[], Ranking | None] | None = getattr(chooser, "ranking", None)
        ranking = offered() if offered is not None else None
        if ranking is not None and not ranking.even:
            self._fifo_at = None  # uneven priorities: its fifo_at never answers True, no need to ask at each pick
        # A ranked chooser's answer away from its change points is worked out by the pick itself, in the pass
        # that filters the lanes (its table is read live: a demotion updates it in place).
        self._priority_of: Callable[[int, int], int] | None = ranking.priority_of if ranking is not None else None
        self._change_points: frozenset[int] = ranking.change_points if ranking is not None else frozenset()

    # --- the hot path of every callback ------------------------------------------------------------

    def _call_soon(self, callback: Any, args: Any, context: Any) -> asyncio.Handle:
        # Stock's call_soon and call_soon_threadsafe come here: a handle that flags its cancellation, stamped.
        handle = _Handle(callback, args, self, context)
        if handle._source_traceback:  # type: ignore[attr-defined]
            del handle._source_traceback[-1]  # type: ignore[attr-defined]
        self._ready.append(handle)  # type: ignore[attr-defined]
        self._stamp(callback)
        return handle

    def _stamp(self, callback: Any) -> None:
        """Stamp the callback just made ready with (step, lane, is a task wake-up)."""
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, _Task):
            wake = type(callback) is not _STEP_TYPE
            self._batch_wakeups += wake
            seq = self._seqs.get(id(owner))
            if seq is None or self._tasks[seq]() is not owner:
                seq = self._first_seen(owner)
            self._ready_lanes.append((self.steps, seq, wake))
        else:
            self._ready_lanes.append((self.steps, -1, False))

    def _first_seen(self, task: asyncio.Task[Any]) -> int:
        """The lane of a task not numbered yet: the next number if the task factory is building it, else later.

        A task built directly with ``asyncio.Task(...)`` is numbered with the batch its first callback came in,
        in queue order (after the tasks the factory built in that step).
        """
        if self._building:
            self._building = False
            return self._next_seq  # the factory numbers it so once built
        self._unnumbered = True
        return _UNNUMBERED

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        if not handle._scheduled:  # type: ignore[attr-defined]  # moved to the ready queue (or already run)
            self._ready_cancelled = True
        super()._timer_handle_cancelled(handle)  # type: ignore[misc]

    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        # Every future and handle asks get_debug() when made (hundreds per example): a builtin answers
        # without a Python frame.
        self.get_debug = bool(enabled).__bool__  # type: ignore[method-assign]

    # --- time -------------------------------------------------------------------------------------

    def time(self) -> float:
        return self._vt

    async def wait_idle(self) -> None:
        """Return once nothing else can run without time moving (every other task is blocked)."""
        waiter: asyncio.Future[None] = self.create_future()
        self._idle_waiters.append(waiter)
        await waiter

    def settle(self) -> None:
        """Run (not inside a run) until nothing can run without time moving."""
        waiter: asyncio.Future[None] = self.create_future()
        self._idle_waiters.append(waiter)
        self.run_until_complete(waiter)

    # --- task numbering ---------------------------------------------------------------------------

    def _stamping_factory(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        # The task takes the next creation number as its first step is made ready inside asyncio.Task(...) (see
        # _first_seen); on 3.11 create_task names it afterwards, so it is numbered under its default name.
        self._building = True
        try:
            task: asyncio.Task[Any] = _Task(coro, loop=loop, **kwargs)
        finally:
            self._building = False
        self._number(task)
        return task

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = super().create_task(coro, **kwargs)
        seq = self._seqs.get(id(task))
        if seq is None:
            return task
        if kwargs.get("name") is not None:  # named once built (3.11): the name given is its name everywhere
            self._names[seq] = self._name(task, seq)
        elif task.get_name() == "None":  # 3.13.0 names a task its factory built "None" when given no name
            task.set_name(f"Task-{seq}")
        return task

    @property
    def names(self) -> dict[int, str]:
        """Creation number -> name of every task of the run, as `task_name` names it now (a task named after it was
        numbered, as ``create_task(..., name=...)`` does on 3.11, goes by that name: one name per task in a report).
        """
        for seq, ref in enumerate(self._tasks):
            task = ref()
            if task is not None:
                self._names[seq] = self._name(task, seq)
        return self._names

    def _seq_of(self, task: asyncio.Task[Any]) -> int:
        seq = self._seqs.get(id(task))
        if seq is None or self._tasks[seq]() is not task:
            seq = self._number(task)  # a task built directly with asyncio.Task(...): numbered when first seen
        return seq

    def _number(self, task: asyncio.Task[Any]) -> int:
        seq = self._seqs[id(task)] = self._next_seq
        self._next_seq += 1
        self._tasks.append(weakref.ref(task))
        self._names[seq] = self._name(task, seq)
        group = group_of_coro(task.get_coro())
        if group != USER:
            self._groups[seq] = group
        running = asyncio.current_task(self)
        parent = None if running is None or running is task else self._seqs.get(id(running))
        if parent is not None:
            self._parents[seq] = parent
        if self.on_task is not None:
            self.on_task(seq, parent)
        return seq

    def caller_of(self, seq: int) -> int:
        """The caller task ``seq`` works for: its topmost ancestor below the run's first task (itself if none)."""
        parents = self._parents
        while (parent := parents.get(seq)) is not None and parent != 0:
            seq = parent
        return seq

    def tasks(self) -> list[asyncio.Task[Any]]:
        """Every task of this run still alive, in creation order."""
        return [t for ref in self._tasks if (t := ref()) is not None]

    def close(self) -> None:
        """Close the loop; a task that never took its first step has its coroutine closed with it.

        Tearing a run down cancels what is pending, and a task group's child created meanwhile may never run:
        its coroutine would be reported "never awaited" whenever the garbage collector meets it, in some
        later test. It never ran, so closing it loses nothing.
        """
        if not self.is_running():
            for task in self.tasks():
                if not task.done():
                    for coro in never_started(task.get_coro()):
                        coro.close()
        super().close()

    def set_task_factory(self, factory: Any) -> None:
        if factory is None:
            return
        self._refuse(
            NondeterminismError(
                f"a task factory ({getattr(factory, '__qualname__', factory)!r}) installed with set_task_factory",
                "An eager task factory runs a task's first step inside create_task, outside the scheduler; "
                "leave the loop's task factory alone in code run by a race test.",
            )
        )

    def set_exception_handler(self, handler: Any) -> None:
        pass  # errors must reach the run's report, not a handler installed by the code under test

    def _collect_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.errors.append(context)

    # --- guardrails -------------------------------------------------------------------------------

    def _refuse(self, error: NondeterminismError) -> NoReturn:
        self.violations.append(error)
        raise error

    def _make_self_pipe(self) -> None:
        # No self-pipe: it only wakes a selector for call_soon_threadsafe, and a run has no other thread to
        # call it and never waits on a selector (`_run_once` is ours). Saves a socketpair per run.
        self._ssock = self._csock = None

    def _close_self_pipe(self) -> None:
        pass

    def _add_reader(self, fd: Any, callback: Any, *args: Any) -> Any:
        self._refuse(
            NondeterminismError(
                f"a real socket or pipe (fd {fd}) read by {getattr(callback, '__qualname__', callback)!r}",
                "Point the client at the in-process fake's URL (requests for other origins open sockets).",
            )
        )

    def _add_writer(self, fd: Any, callback: Any, *args: Any) -> Any:
        self._refuse(
            NondeterminismError(
                f"a real socket (fd {fd}) written by {getattr(callback, '__qualname__', callback)!r}",
                "Point the client at the in-process fake's URL (requests for other origins open sockets).",
            )
        )

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        self._refuse(
            NondeterminismError(
                f"a thread: run_in_executor({getattr(func, '__qualname__', func)!r}) (asyncio.to_thread, "
                "anyio.to_thread, getaddrinfo for a host name)",
                THREADS_FIX,
                thread=True,
            )
        )

    async def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        self._refuse(
            NondeterminismError(
                f"a DNS lookup of {host!r} (runs in a thread)",
                "Use the in-process fake's URL as given (an address, no lookup); requests for other origins would "
                f"go to the network. {THREADS_FIX}",
                thread=True,
            )
        )

    # --- the scheduler ----------------------------------------------------------------------------

    def _run_once(self) -> None:
        # One step, as stock's: run_forever calls it until the loop is asked to stop.
        ready: deque[asyncio.Handle] = self._ready  # type: ignore[attr-defined]
        lanes = self._ready_lanes
        if len(lanes) < len(ready):  # a callback put in the queue by hand, not through call_soon
            self._note_ready(ready, lanes)
        if self._batch_wakeups > 1 or self._unnumbered:
            self._close_batch(ready, lanes)
        self._batch_wakeups = 0
        if self._ready_cancelled:  # a ready callback was cancelled since the last look: drop what was
            self._ready_cancelled = False
            self._drop_cancelled(ready, lanes)
        self._batch_start = len(lanes)
        if not ready:
            if self._stopping:  # type: ignore[attr-defined]
                return
            idle = self._idle_waiters
            if idle:  # quiescent: wake whoever waits for it before time moves
                self._idle_waiters = []
                for waiter in idle:
                    if not waiter.done():
                        waiter.set_result(None)
                return
            self._advance_time()
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if scheduled and (scheduled[0]._when <= self._vt or scheduled[0]._cancelled):
            self._move_due_timers()
            if self._batch_wakeups > 1 or self._unnumbered:
                self._close_batch(ready, lanes)
            self._batch_wakeups = 0
        if not ready:
            return
        if len(ready) == 1:
            index, seq = 0, lanes[0][1]
        else:
            index, seq = self._pick(ready, lanes)
        self.trace.append(seq)
        if index:
            handle = ready[index]
            del ready[index]
            del lanes[index]
        else:
            handle = ready.popleft()
            lanes.popleft()
        self._batch_start = len(lanes)
        self.steps += 1
        if self.steps > self.max_steps:
            raise Livelock(self.steps, self._vt, f"more than {self.max_steps} steps")
        handle._run()

    def _close_batch(self, ready: deque[asyncio.Handle], lanes: deque[ReadyLane]) -> None:
        """Number the batch's tasks met outside the factory; put a batch waking several tasks in canonical order."""
        start = self._batch_start
        if self._ready_cancelled:
            # A callback cancelled before its batch closes is no task's (its callback is gone), as when the
            # batch was stamped at the next step: it neither counts as a wake-up nor gets its task numbered.
            wakeups = 0
            for i in range(start, len(lanes)):
                if ready[i]._cancelled:
                    lanes[i] = (lanes[i][0], -1, False)
                else:
                    wakeups += lanes[i][2]
            self._batch_wakeups = wakeups
        if self._unnumbered:
            self._unnumbered = False
            for i in range(start, len(lanes)):
                step, seq, wake = lanes[i]
                if seq == _UNNUMBERED:
                    lanes[i] = (step, self._seq_of(ready[i]._callback.__self__), wake)  # type: ignore[attr-defined]
        if self._batch_wakeups > 1:  # one wake-up alone keeps its place: stock asyncio's order
            canonical_batch(ready, lanes, start)

    def _note_ready(self, ready: deque[asyncio.Handle], lanes: deque[ReadyLane]) -> None:
        """Stamp callbacks put in the ready queue without call_soon (by hand), at the next step, once each."""
        step = self.steps
        start = len(lanes)
        wakeups = 0
        for i in range(start, len(ready)):
            callback = ready[i]._callback  # type: ignore[attr-defined]
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, asyncio.Task):
                wake = type(callback) is not _STEP_TYPE
                wakeups += wake
                lanes.append((step, self._seq_of(owner), wake))
            else:
                lanes.append((step, -1, False))
        if wakeups > 1:  # one wake-up alone keeps its place: stock asyncio's order
            canonical_batch(ready, lanes, start)

    def _drop_cancelled(self, ready: deque[asyncio.Handle], lanes: deque[ReadyLane]) -> None:
        if not any(h._cancelled for h in ready):
            return
        kept = [(h, lane) for h, lane in zip(ready, lanes, strict=True) if not h._cancelled]
        ready.clear()
        lanes.clear()
        for h, lane in kept:
            ready.append(h)
            lanes.append(lane)

    def _advance_time(self) -> None:
        scheduled = self._scheduled  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
            heapq.heappop(scheduled)._scheduled = False
        if not scheduled:
            raise Deadlock(self.steps, [self._describe_waiting(t) for t in self.tasks() if not t.done()])
        when = scheduled[0]._when
        if when > self.max_virtual_time:
            raise Livelock(self.steps, self._vt, f"virtual time would pass {self.max_virtual_time:g}s")
        self._vt = max(self._vt, when)

    def _move_due_timers(self) -> None:
        scheduled = self._scheduled  # type: ignore[attr-defined]
        ready = self._ready  # type: ignore[attr-defined]
        while scheduled:
            head = scheduled[0]
            if head._cancelled:
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                heapq.heappop(scheduled)._scheduled = False
            elif head._when <= self._vt:
                heapq.heappop(scheduled)._scheduled = False
                ready.append(head)
                self._stamp(head._callback)
            else:
                break

    def _pick(self, ready: deque[asyncio.Handle], ready_lanes: deque[ReadyLane]) -> tuple[int, int]:
        fifo_at = self._fifo_at
        if fifo_at is not None and fifo_at(self.decisions):
            return self._pick_first(ready_lanes)
        priority_of = self._priority_of
        if priority_of is None or self.decisions in self._change_points:
            return self._pick_asking(ready, ready_lanes)
        groups = self._groups
        if len(ready_lanes) == 2:  # a third of the picks: the same answer as the pass below, worked out directly
            first, second = ready_lanes
            seq0 = first[1]
            seq1 = second[1]
            if seq0 == seq1:
                return 0, seq0
            if first[2] and second[2] and first[0] == second[0] and seq1 < seq0:
                return self._pick_asking(ready, ready_lanes)  # wake-ups made ready together run in creation order
            if self.steps - first[0] > self.fairness:
                return 0, seq0
            if seq0 in groups and seq1 in groups and groups[seq0] == groups[seq1]:
                return 0, seq0
            self.decisions += 1
            if priority_of(seq1, 0) > priority_of(seq0, 0):
                self.deviation_count += 1
                if self.describe and len(self.deviations) < _DESCRIBED_DEVIATIONS:
                    self._describe_deviation(ready, [0, 1], [seq0, seq1], 1)
                return 1, seq1
            return 0, seq0
        # The ranked chooser's answer, found in one pass over the queue: the lanes in queue order (the order of
        # their heads, their first callbacks), the first of each FIFO group only (library tasks keep their
        # order among themselves), and the first of the highest priority among those.
        seqs: list[int] = []
        taken: list[int] | None = None
        count = best_seq = best_priority = k = 0
        wake_stamp = wake_seq = -1
        for stamp, seq, wake in ready_lanes:
            if seq in seqs:
                continue
            seqs.append(seq)
            if wake:
                # Wake-ups made ready in one step run in creation order (`_canonical`): the queue's order is
                # that order unless a wake-up follows one of a later-created task made ready in the same step.
                if stamp == wake_stamp and seq < wake_seq:
                    return self._pick_asking(ready, ready_lanes)
                wake_stamp, wake_seq = stamp, seq
            if seq in groups:
                group = groups[seq]
                if taken is None:
                    taken = [group]
                elif group in taken:
                    continue
                else:
                    taken.append(group)
            priority = priority_of(seq, 0)
            if not count or priority > best_priority:
                best_seq, best_priority, k = seq, priority, count
            count += 1
        if count == 1:  # one lane may run (the queue's first, never filtered): no choice
            return 0, best_seq
        first = ready_lanes[0]
        if self.steps - first[0] > self.fairness:
            return 0, first[1]
        self.decisions += 1
        if k:
            # the chosen lane's head: its first callback in the queue
            best = 0
            for lane in ready_lanes:
                if lane[1] == best_seq:
                    break
                best += 1
            self.deviation_count += 1
            if self.describe and len(self.deviations) < _DESCRIBED_DEVIATIONS:
                seen: list[int] = []
                heads = []
                for i, lane in enumerate(ready_lanes):
                    if lane[1] not in seen:
                        seen.append(lane[1])
                        heads.append(i)
                self._describe_deviation(ready, heads, seqs, seqs.index(best_seq))
            return best, best_seq
        return 0, best_seq

    def _pick_asking(self, ready: deque[asyncio.Handle], ready_lanes: deque[ReadyLane]) -> tuple[int, int]:
        """`_pick` that shows the chooser the lanes that may run, in canonical order, and asks it."""
        # The head of each lane (the index of its first callback) and its lane, in ready order, which is
        # (stamp, index) order: stamps never decrease along the queue. Lists, not sets: a queue holds 2-7.
        heads: list[int] = []
        seqs: list[int] = []
        wakeups = 0
        i = 0
        for _, seq, wake in ready_lanes:
            if seq not in seqs:
                seqs.append(seq)
                heads.append(i)
                wakeups += wake
            i += 1  # noqa: SIM113 - cheaper than enumerate's tuples
        if len(heads) == 1:
            return 0, seqs[0]
        if wakeups > 1:  # wake-ups made ready in one step run in creation order; one alone keeps its place
            heads, seqs = canonical(heads, ready_lanes)
        if self.steps - ready_lanes[heads[0]][0] > self.fairness:
            return heads[0], seqs[0]
        # Only the first lane of each FIFO group may run (library tasks keep their order among themselves):
        # the heads before the first one whose group is taken all may; from there on, filter.
        get = self._groups.get
        taken: list[int] = []
        for seq in seqs:
            group = get(seq)
            if group is not None:
                if group in taken:
                    j = seqs.index(seq)
                    eligible, kept = heads[:j], seqs[:j]
                    for i, seq_i in zip(heads[j:], seqs[j:], strict=True):
                        group = get(seq_i)
                        if group is None or group not in taken:
                            if group is not None:
                                taken.append(group)
                            eligible.append(i)
                            kept.append(seq_i)
                    if len(eligible) == 1:
                        return eligible[0], kept[0]
                    heads, seqs = eligible, kept
                    break
                taken.append(group)
        k = self._chooser(self.decisions, seqs)
        self.decisions += 1
        if k != 0:
            self.deviation_count += 1
            if self.describe and len(self.deviations) < _DESCRIBED_DEVIATIONS:
                self._describe_deviation(ready, heads, seqs, k)
        return heads[k], seqs[k]

    def _describe_deviation(self, ready: deque[asyncio.Handle], heads: list[int], seqs: list[int], k: int) -> None:
        """Record a `Deviation`: lane ``k`` of ``seqs`` ran ahead of the lanes before it that may run.

        ``heads``/``seqs``: the lanes at the step, in canonical order; those a FIFO group keeps from running
        are not named.
        """
        get = self._groups.get
        taken: list[int] = []
        eligible: list[int] = []
        for j, seq in enumerate(seqs):
            group = get(seq)
            if group is not None:
                if group in taken:
                    continue
                taken.append(group)
            eligible.append(j)
            if j == k:
                break
        ran = self._lane(seqs[k], ready[heads[k]])
        ahead_of = tuple(self._lane(seqs[j], ready[heads[j]]) for j in eligible[:-1])
        # The run's first task (the scenario, or the session-cache machine's driver) is nobody's caller.
        caller = self.caller_of(ran.seq) if ran.seq > 0 else 0
        between = caller != 0 and any(lane.seq > 0 and self.caller_of(lane.seq) not in (0, caller) for lane in ahead_of)
        self.deviations.append(Deviation(step=self.steps, ran=ran, ahead_of=ahead_of, between_callers=between))

    def _pick_first(self, ready_lanes: deque[ReadyLane]) -> tuple[int, int]:
        """`_pick` when the chooser answers 0 anyway: the canonical first lane runs, a decision counted as there.

        The canonical first lane is the queue's first callback, unless that wakes a task and other tasks
        woken in the same step come before it in creation order (`_canonical`). A decision is counted when
        that lane is not starved past ``fairness`` and another lane may run beside it (another lane of your
        code or the shared lane, or the first lane of another group).
        """
        first = ready_lanes[0]
        index, seq0, stamp = 0, first[1], first[0]
        if first[2]:  # a wake-up: the first in creation order of the wake-ups made ready with it
            seen = {seq0}
            for i, (stamp_i, seq, wake) in enumerate(ready_lanes):
                if stamp_i != stamp:
                    break
                if seq not in seen:
                    seen.add(seq)
                    if wake and seq < seq0:
                        index, seq0 = i, seq
        if self.steps - stamp <= self.fairness:
            groups = self._groups
            group0 = groups.get(seq0)
            for lane in ready_lanes:
                seq = lane[1]
                if seq != seq0:
                    group = groups.get(seq)
                    if group is None or group != group0:
                        self.decisions += 1
                        break
        return index, seq0

    def explore_freely(self, task: asyncio.Task[Any]) -> None:
        """Let ``task`` be interleaved freely even if its code lives in an installed package."""
        self._groups.pop(self._seq_of(task), None)

    # --- descriptions -----------------------------------------------------------------------------

    def _lane(self, seq: int, handle: asyncio.Handle) -> Lane:
        owner = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
        if not isinstance(owner, asyncio.Task):
            return Lane(seq=-1, name=f"callback {_callback_name(handle)}")
        return Lane(seq=seq, name=self.task_name(owner), where=where_task_stands(owner))

    def task_name(self, task: asyncio.Task[Any]) -> str:
        """``caller-1`` for a task named by the test, else ``task #3 get_or_create`` (creation number, coroutine)."""
        seq = self._seq_of(task)
        name = self._names[seq] = self._name(task, seq)  # its name now, in `names` too
        return name

    @staticmethod
    def _name(task: asyncio.Task[Any], seq: int) -> str:
        name = task.get_name()
        if not name.startswith("Task-"):
            return name
        coro = task.get_coro()
        return f"task #{seq} {getattr(coro, '__qualname__', type(coro).__name__)}"

    def _describe_waiting(self, task: asyncio.Task[Any]) -> str:
        return f"{self.task_name(task)} waiting at {where_task_stands(task) or 'an unknown place'}"


class _Handle(asyncio.Handle):
    """A ready callback that tells its loop when it is cancelled, so the loop looks for such only then."""

    __slots__ = ()

    def cancel(self) -> None:
        if not self._cancelled:
            self._loop._ready_cancelled = True  # type: ignore[attr-defined]
        super().cancel()


class _NoSelector:
    """The loop's selector: a controlled run never waits for real I/O (every socket or pipe is refused)."""

    def get_key(self, fd: Any) -> NoReturn:
        raise KeyError(fd)

    def get_map(self) -> dict[Any, Any]:
        return {}

    def select(self, timeout: float | None = None) -> NoReturn:
        raise RuntimeError("a controlled loop never waits on a selector")

    def close(self) -> None:
        pass


_STEP_TYPE: Final = task_step_type()
_Task: Final = asyncio.Task
_UNNUMBERED: Final = -2
"""The lane of a callback whose task is numbered when its batch closes."""


def _callback_name(handle: asyncio.Handle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def where_task_stands(task: asyncio.Task[Any]) -> str:
    """The innermost frame of the task's await chain outside asyncio/anyio/httpx/mcp, as ``file:line in fn``."""
    coro: Any = task.get_coro()
    best = ""
    depth = 0
    while coro is not None and depth < 64:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            path = frame.f_code.co_filename
            if not any(marker in path for marker in _LIBRARY_MARKERS):
                best = f"{path.rsplit('/', 1)[-1]}:{frame.f_lineno} in {frame.f_code.co_name}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)
        depth += 1
    return best


def never_started(coro: object) -> list[Coroutine[Any, Any, Any]]:
    """``coro`` if it never started, with the never-started coroutines its arguments hold: a wrapper's inner
    coroutine (anyio runs a task group's child as ``handle._run_coro()`` around the function's coroutine)."""
    if not inspect.iscoroutine(coro) or inspect.getcoroutinestate(coro) != "CORO_CREATED" or coro.cr_frame is None:
        return []
    found: list[Coroutine[Any, Any, Any]] = [coro]
    for argument in coro.cr_frame.f_locals.values():
        held = [argument, *_attributes(argument)]
        found += [c for c in held if inspect.iscoroutine(c) and inspect.getcoroutinestate(c) == "CORO_CREATED"]
    return list({id(c): c for c in found}.values())


def _attributes(value: object) -> list[object]:
    names = set(getattr(value, "__dict__", ()))
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
    return [getattr(value, name, None) for name in names]
