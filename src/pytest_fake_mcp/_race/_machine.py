"""The session-cache machine: a Hypothesis rule-based state machine driving a cache on the controlled loop.

`explore_session_cache` (in ``_cache_under_test``) runs it. Each example is one program of rules Hypothesis writes and
shrinks: get-or-create, use, cleanup, expire, cancel and race on keys (server, run id), with several in-process
fakes as the servers. A rule starts its operation as a task on a `ControlledLoop` and lets the loop run a
few turns, so operations overlap, and the schedule drawn first decides which task runs at each step. Rules
are plain synchronous calls: the loop runs between them (``run_until_complete`` on a future a pacer task
completes), never across them, so Hypothesis's own runner drives the example and prints the failing program
as ``state.get_or_create(server=1, run_id='run-1', priority=0)`` lines.

The encoding is what finds cache races within Hypothesis's default budget. Cache races need a short program of
specific operations on *related* keys plus one overlap, so: a race issues three operations at once on a key and
its neighbours (the same key, the same server under the other run, the same run on the other server), a drawn
number of loop turns apart, optionally cancelling the last; it is three rules, ``race_cold``, ``race_cached`` and
``race_lost`` (the first key not cached yet, cached by a call, or cached and then lost), so races are a third of the
rules Hypothesis picks rather than one in seven; cleanups take their
run from a key already used; each operation draws its own priority, which every task it starts inherits (the
schedule's priorities by creation number reach only the first few tasks of a run), so an overlap is described
by the operations it involves and survives the shrinker deleting others; and ``settle`` is offered only once an
operation was issued since the last one. Measured on a held-out set of caches written apart from this encoding
(``tests/race_heldout.py``; docs/races.md, "How many examples it takes").

A run Hypothesis reports keeps its `Program` (the rule calls with their arguments, the schedule, each draw under
the operation it served), and `replay_cache_program` runs that program again outside Hypothesis with some steps
left out (``_program.shorten`` picks which). Every step has a number that a left-out step keeps, so a replay's
lines, operation names and draws line up with the whole run's.

Invariants are checked at quiescence (every operation done, nothing runnable): at most one live session per
key, no live session the cache cannot hold (one whose run was cleaned up after the last get of its key
started), ``initialize`` bounded by keys, cleanups, expiries and cancellations, no operation failing (or ending
cancelled when nothing cancelled it) without an excuse; then, after ``aclose()``, nothing open anywhere, no task
left, no error unretrieved.

Over 400 lines on purpose: the rules, the example's loop and fakes, the invariants and the report all read
the one machine's state, and splitting them would pass that state around instead.

Hypothesis is a dependency of the race engine only: this module is imported by ``_cache_under_test`` when a
cache is explored, never by the plugin. It takes the schedule strategy, the server-choices middleware and the
failure type from there as arguments, so the two modules import one way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import importlib.metadata
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from hypothesis import note, reproduce_failure
from hypothesis import seed as pin_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from .._compat import SET_RUNNING_LOOP, require, set_running_loop
from .._host._inprocess import InProcessFake
from .._record._counters import HTTPClientCounter
from .._record._report import diagram_legend
from .._wire._errors import LifecycleError
from .._wire._options import FakeMCPOptions
from ._choosers import FifoChooser, PriorityChooser
from ._draws import ExampleDraws, is_reporting
from ._lanes import describe_deviations
from ._loop import THREADS_FIX, ControlledLoop, Deadlock, Livelock, NondeterminismError, where_task_stands
from ._program import KeyedDraws, Outcome, Program, Step
from ._run import cancel_in_order, collect_unretrieved, explain_livelock, wall_clock_guard

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from hypothesis import settings as Settings

    from .._host._server import FakeMCPServer
    from ._wallclock import WallClockGuard

__all__ = ["CacheMachineParts", "cache_machine", "replay_cache_program", "run_cache_machine"]

SETTLE_SECONDS: Final = 0.05
"""Virtual seconds a settle lets pass once every operation is done: held answers land, nothing times out."""
OPERATION_BOUND: Final = 120.0
"""Virtual seconds a settle waits for the operations to end (a read timeout ends a stuck one first)."""
DRAIN_SECONDS: Final = 60.0
CANCEL_ROUNDS: Final = 3
MAX_PRIORITY: Final = 3
"""An operation's priority is drawn in 0..MAX_PRIORITY; the tasks it starts inherit it (0: stock order)."""
RACE_KINDS: Final = ("get", "use", "cleanup", "use")
"""What each of a race's three operations does (a use twice: most cache races have a call in flight)."""
RACE_BEFORE: Final = ("cold", "cached", "cached, its session lost")
"""The state of the race's key when its operations start."""
RACE_KEYS: Final = ("same key", "same server, other run", "same key", "same run, other server")
"""The key of a race's second and third operation, from the first one's (the same key twice as often)."""
RACE_INTERRUPTS: Final = ("none", "cancel the last")


def _cancel_ends_sessions() -> bool:
    """Whether the installed mcp is 1.x, whose ``ClientSession`` can end a whole session on one cancelled request."""
    try:
        return int(importlib.metadata.version("mcp").split(".")[0]) < 2
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False


_CANCEL_CAN_END_SESSION: Final = _cancel_ends_sessions()


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheMachineParts:
    """What the machine takes from ``_cache_under_test``: the schedule strategy, the gate and the failure type."""

    schedules: st.SearchStrategy[Any]
    """Draws a ``Schedule`` (with ``chooser()`` and ``describe(names)``)."""
    gate: Callable[[InProcessFake, HTTPClientCounter, Any], Any]
    """Wraps a fake's app in the server-choices middleware drawing from the given draws (``ExampleDraws``'s
    interface); returns an object with ``stop``."""
    failure: type[AssertionError]
    servers: int = 2
    run_ids: int = 2
    stagger: int = 3
    options: FakeMCPOptions | None = None
    budget: Any = None
    """Told when each example begins (``begin(data)``, before anything is built: it may stop the search) and when
    one fails (``failed()``): the search's shrinking bound; or None."""
    remarks: Callable[[], list[str]] | None = None
    """Notes the failure gets (replayed from the database as stored, shrinking cut short)."""
    logs: Callable[[], list[str]] | None = None
    """The log records the report shows before the diagrams (those no passing example logged)."""
    recorded: Callable[[Outcome, Program], None] | None = None
    """Told a reported run's failure and the `Program` that replays it (`replay_cache_program`)."""


@dataclass(slots=True, kw_only=True)
class _Op:
    """One operation the program started: its task, and when it began executing (not when it was issued)."""

    name: str
    kind: str
    server: int | None
    run_id: str | None
    task: asyncio.Task[Any] | None = None
    began: int | None = None
    cancelled: bool = False

    @property
    def key(self) -> tuple[int, str] | None:
        if self.server is None or self.run_id is None:
            return None
        return (self.server, self.run_id)


@dataclass(slots=True)
class _World:
    """The example's loop, fakes and bookkeeping (built by the machine's first rule)."""

    loop: ControlledLoop
    fakes: list[InProcessFake]
    gates: list[Any]
    counter: HTTPClientCounter
    schedule: Any
    cache: Any
    go: asyncio.Future[tuple[str, asyncio.Future[None], tuple[int, str] | None]]
    pacer: asyncio.Task[None] | None = None
    ops: list[_Op] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    """Operation names in the order they began executing (expiries: when the rule ran)."""
    program: list[tuple[int, str]] = field(default_factory=list)
    """The report's lines: (step number, the step in words)."""
    steps: int = 0
    """Steps begun so far (left-out ones too): the next step's number is one more."""
    numbered: int = 0
    """Operations, cancels and expiries begun so far (left-out ones too): the next one's number is one more."""
    left_out: list[str] = field(default_factory=list)
    """The steps a replay left out, as ``3 (use-2)``."""
    clients: dict[tuple[int, str], Any] = field(default_factory=dict)
    owners: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Session id -> the key it served (from the clients the cache returned and the tool calls' journal)."""
    expiries: dict[tuple[int, str], int] = field(default_factory=dict)
    turns: int = 0
    """Loop turns the driver lets pass before the next rule (the rule's gap, else ``stagger``)."""
    settled: int = 0
    """How many operations had been issued at the last settle."""


def cache_machine(make_cache: Callable[[], Any], parts: CacheMachineParts) -> type[_CacheMachineBase]:
    """The machine class of one exploration of ``make_cache``: its search runs it (`run_cache_machine`), and its
    failure's replays too (`replay_cache_program`). Hypothesis keeps every machine class it meets: one a search."""
    return _machine_class(make_cache, parts)


def run_cache_machine(
    machine: type[_CacheMachineBase],
    *,
    settings: Settings,
    seed: Hashable | None = None,
    reproduce: tuple[str, bytes] | None = None,
) -> None:
    """Run the machine under ``settings`` (their database keyed for this cache by the caller); the failure is
    ``parts.failure`` with the report. ``seed``, ``reproduce``: as ``@hypothesis.seed`` and
    ``@hypothesis.reproduce_failure`` on the machine (Hypothesis's runner takes both from it)."""
    __tracebackhide__ = True
    require(SET_RUNNING_LOOP)  # the cache is built with the machine's loop running
    runner: Any = machine
    if seed is not None:
        runner = pin_seed(seed)(runner)
    if reproduce is not None:
        runner = reproduce_failure(*reproduce)(runner)
    try:
        run_state_machine_as_test(runner, settings=settings)
    finally:
        gc.collect()  # GC is off during each example: collect what they left here


def replay_cache_program(
    machine_class: type[_CacheMachineBase], program: Program, left_out: frozenset[int]
) -> Outcome | None:
    """Run ``program`` again outside Hypothesis, without the steps numbered in ``left_out``; how it failed, or
    None if it passed or stopped otherwise (a thread, a real socket). The search is over: its budget and
    remarks are left alone."""
    __tracebackhide__ = True
    machine = machine_class()
    machine.replaying = (program, left_out)
    try:
        try:
            machine._start(program.schedule, None)  # the `start` rule, as Hypothesis would call it
            with contextlib.suppress(_ProgramEnd):
                for name, arguments in program.calls:
                    getattr(machine, name)(**arguments)
        finally:
            machine.teardown()
    except machine._parts.failure:
        return machine.outcome
    except Exception:  # a replay that stops otherwise does not fail the same way
        return None
    finally:
        gc.collect()
    return None


class _ProgramEnd(Exception):
    """A replay reached the step at which its recorded run failed (its rules end there)."""


def _machine_class(make_cache: Callable[[], Any], parts: CacheMachineParts) -> type[_CacheMachineBase]:
    servers = st.sampled_from(tuple(range(1, parts.servers + 1)))
    runs = st.sampled_from(tuple(f"run-{i}" for i in range(1, parts.run_ids + 1)))
    keys: Bundle[tuple[int, str]] = Bundle("keys")
    priorities = st.integers(0, MAX_PRIORITY)

    # The three race rules share one decorator (three rules, not one with a `before` argument: Hypothesis picks among
    # rules, so races make up a fair share of every program, and each starting state is one rule of its own).
    race_rule = rule(
        target=keys,
        key=st.one_of(keys, st.tuples(servers, runs)),
        kinds=st.tuples(*[st.sampled_from(RACE_KINDS)] * 3),
        others=st.tuples(*[st.sampled_from(RACE_KEYS)] * 2),
        gaps=st.tuples(*[st.integers(0, 2 * parts.stagger)] * 2),
        interrupt=st.sampled_from(RACE_INTERRUPTS),
        priority=st.tuples(*[priorities] * 3),
    )

    class SessionCacheMachine(_CacheMachineBase):
        """Rules on a session cache keyed by (server, run id); see the module docstring."""

        _make_cache = staticmethod(make_cache)
        _parts = parts

        @initialize(schedule=parts.schedules, data=st.data())
        def start(self, schedule: Any, data: Any) -> None:
            self._start(schedule, data)

        @rule(target=keys, server=servers, run_id=runs, priority=priorities)
        def get_or_create(self, server: int, run_id: str, priority: int) -> tuple[int, str]:
            self._called("get_or_create", server=server, run_id=run_id, priority=priority)
            self._issue("get", server, run_id, priority=priority)
            return (server, run_id)

        @rule(key=keys, priority=priorities)
        def use(self, key: tuple[int, str], priority: int) -> None:
            self._called("use", key=key, priority=priority)
            self._issue("use", *key, priority=priority)

        @rule(key=keys, priority=priorities)
        def cleanup(self, key: tuple[int, str], priority: int) -> None:
            self._called("cleanup", key=key, priority=priority)
            self._issue("cleanup", None, key[1], priority=priority)

        @rule(key=keys)
        def expire(self, key: tuple[int, str]) -> None:
            self._called("expire", key=key)
            self._expire(key)

        @race_rule
        def race_cold(self, **race: Any) -> tuple[int, str]:
            """Three operations on related keys, ``gaps`` loop turns apart, the first key not yet cached."""
            __tracebackhide__ = True
            self._called("race_cold", **race)
            return self._race(before="cold", **race)

        @race_rule
        def race_cached(self, **race: Any) -> tuple[int, str]:
            """The same, once a call on the first key has cached its session."""
            __tracebackhide__ = True
            self._called("race_cached", **race)
            return self._race(before="cached", **race)

        @race_rule
        def race_lost(self, **race: Any) -> tuple[int, str]:
            """The same, once the first key's cached session was lost (the server forgot it)."""
            __tracebackhide__ = True
            self._called("race_lost", **race)
            return self._race(before="cached, its session lost", **race)

        @precondition(lambda self: self._cancellable() is not None)
        @rule()
        def cancel(self) -> None:
            self._called("cancel")
            self._cancel()

        @precondition(lambda self: self._unsettled())
        @rule()
        def settle(self) -> None:
            __tracebackhide__ = True
            self._called("settle")
            self._settle()

    SessionCacheMachine.__module__ = getattr(make_cache, "__module__", __name__)
    return SessionCacheMachine


class _CacheMachineBase(RuleBasedStateMachine):
    """The machine's behaviour; `_machine_class` adds the rules with the strategies of one exploration."""

    _make_cache: Callable[[], Any]
    _parts: CacheMachineParts

    def __init__(self) -> None:
        super().__init__()
        self.world: _World | None = None
        self.failed = False
        self._saved_start: Any = None
        self._clock: WallClockGuard | None = None
        self._gc_was_enabled = gc.isenabled()
        self._threads: list[str] = []
        self._next_priority: int | None = None
        self._ranked: dict[int, int] = {}
        self._next_owner: str | None = None
        self._owners: dict[int, str] = {}
        """Task -> the operation it works for (its own, or its creator's), by creation number."""
        self.replaying: tuple[Program, frozenset[int]] | None = None
        """Set before the first rule: this run replays a recorded program without the steps numbered here."""
        self.record: Program | None = None
        """The program this run is, kept when Hypothesis reports it (its final replay)."""
        self.outcome: Outcome | None = None
        """How the run failed (`_fail`)."""
        self._call = -1
        self._finishing = False

    # --- the world ------------------------------------------------------------------------------------

    def _start(self, schedule: Any, data: Any) -> None:
        parts = self._parts
        if self.replaying is None and parts.budget is not None:
            parts.budget.begin(data)  # may stop the search (its shrinking bound): before anything is built
        draws = self._draws(schedule, data)
        loop = ControlledLoop(schedule.chooser())
        counter = HTTPClientCounter()
        fakes: list[InProcessFake] = []
        gates: list[Any] = []
        world = _World(
            loop=loop, fakes=fakes, gates=gates, counter=counter, schedule=schedule, cache=None, go=loop.create_future()
        )
        self.world = world  # from here on, teardown undoes whatever follows
        counter.install()
        self._patch_threads()
        gc.disable()
        self._clock = wall_clock_guard(loop)
        self._clock.__enter__()
        for _ in range(parts.servers):
            fake = InProcessFake(parts.options or FakeMCPOptions())
            fake.open()
            fakes.append(fake)
            gates.append(parts.gate(fake, counter, draws))
        loop.on_task = self._on_task
        world.pacer = loop.create_task(self._pace(world), name="driver")
        loop.explore_freely(world.pacer)
        world.cache = self._run_call(self._make_cache)

    def _draws(self, schedule: Any, data: Any) -> Any:
        """The example's draws; a reported run keeps each under the operation it served (its `Program`), and a
        replay takes them from there."""
        if self.replaying is not None:
            return KeyedDraws(self._owner, replay=self.replaying[0].draws)
        draws = ExampleDraws(data, is_reporting())
        if not draws.reporting:
            return draws
        keyed = KeyedDraws(self._owner, inner=draws)
        self.record = Program(schedule=schedule, draws=keyed.kept)
        return keyed

    def _owner(self) -> str:
        """The operation the running task works for (a draw's key in a `Program`)."""
        loop = self._world.loop
        task = asyncio.current_task(loop)
        return "-" if task is None else self._owners.get(loop._seq_of(task), "-")

    def _called(self, name: str, **arguments: Any) -> None:
        """A rule begins: its steps belong to this call; a reported run keeps the call for a replay."""
        self._call += 1
        if self.record is not None:
            self.record.calls.append((name, arguments))

    def _begin_step(self, label: str) -> tuple[int, bool]:
        """The next step's number, and whether it runs (a replay leaves some out)."""
        world = self._world
        world.steps += 1
        number = world.steps
        if self.replaying is not None:
            program, left_out = self.replaying
            if not self._finishing and number > len(program.steps):
                raise _ProgramEnd  # the recorded run failed before this step: so does the replay, at its end
            if number in left_out:
                world.left_out.append(f"{number} ({label})")
                return number, False
        return number, True

    def _begin_operation(self, kind: str) -> tuple[str, int, bool]:
        """An operation, cancel or expiry begins: its name (numbered as in the whole program), step number, and
        whether it runs."""
        world = self._world
        world.numbered += 1
        name = f"{kind}-{world.numbered}"
        return (name, *self._begin_step(name))

    def _write(self, number: int, label: str, text: str) -> None:
        """The step's line of the report; a reported run keeps the steps rules issued (a replay may leave them out)."""
        self._world.program.append((number, text))
        if self.record is not None and not self._finishing:
            self.record.steps.append(Step(number, self._call, label, text))

    def _run_call(self, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` with the loop set as running (a cache may build locks or read the loop in ``__init__``)."""
        loop = self._world.loop
        set_running_loop(loop)
        try:
            return fn()
        finally:
            set_running_loop(None)

    def _on_task(self, seq: int, parent: int | None) -> None:
        """An operation's task takes the priority its rule drew; a task it (or its tasks) starts inherits it, and
        works for it."""
        if self._next_owner is not None:
            self._owners[seq], self._next_owner = self._next_owner, None
        elif parent is not None and parent in self._owners:
            self._owners[seq] = self._owners[parent]
        if self._next_priority is not None:
            priority, self._next_priority = self._next_priority, None
        elif parent is not None and parent in self._ranked:
            priority = self._ranked[parent]
        else:
            return
        self._ranked[seq] = priority
        if priority and isinstance(chooser := self._world.loop.chooser, PriorityChooser):
            chooser.set_priority(seq, priority)

    @property
    def _world(self) -> _World:
        if self.world is None:  # pragma: no cover - Hypothesis runs the initialize rule first
            raise RuntimeError("the session-cache machine ran a rule before its first one")
        return self.world

    def _patch_threads(self) -> None:
        runner = threading.current_thread()
        original = threading.Thread.start
        threads = self._threads
        self._saved_start = original

        def start(thread: threading.Thread) -> None:
            if threading.current_thread() is runner:
                threads.append(thread.name)
            original(thread)

        threading.Thread.start = start  # type: ignore[method-assign,assignment]

    async def _pace(self, world: _World) -> None:
        """The driver: between two rules it lets the loop run ``stagger`` turns, waits for a key's session, or
        settles."""
        loop = world.loop
        while True:
            kind, done, key = await world.go
            world.go = loop.create_future()
            if kind == "turns":
                for _ in range(world.turns):
                    await asyncio.sleep(0)
            elif kind == "session" and key is not None:
                deadline = loop.time() + OPERATION_BOUND
                while self._session_of(key) is None and loop.time() < deadline:
                    opening = [o.task for o in world.ops if o.key == key and o.task is not None and not o.task.done()]
                    if not opening:
                        break
                    await asyncio.wait(opening, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)
            else:
                pending = [op.task for op in world.ops if op.task is not None and not op.task.done()]
                if pending:
                    await asyncio.wait(pending, timeout=OPERATION_BOUND)
                await asyncio.sleep(SETTLE_SECONDS)
                await loop.wait_idle()
            done.set_result(None)

    def _advance(self, kind: str, key: tuple[int, str] | None = None, turns: int | None = None) -> None:
        world = self._world
        loop = world.loop
        done: asyncio.Future[None] = loop.create_future()
        world.turns = self._parts.stagger if turns is None else turns
        world.go.set_result((kind, done, key))
        try:
            loop.run_until_complete(done)
        except (Deadlock, Livelock) as exc:
            error = explain_livelock(exc, self._clock) if self._clock is not None else exc
            self._fail(f"The run stopped: {type(error).__name__}.", cause=error)
        self._check_sources()

    def _check_sources(self) -> None:
        world = self._world
        if world.loop.violations:
            self.failed = True
            raise world.loop.violations[0]
        if self._threads:
            self.failed = True
            raise NondeterminismError(
                f"a thread started during the run ({', '.join(self._threads)})", THREADS_FIX, thread=True
            )
        for gate in world.gates:
            stop = getattr(gate, "stop", None)
            if stop is not None:
                self.failed = True
                raise stop

    # --- rules ------------------------------------------------------------------------------------------

    def _race(
        self,
        key: tuple[int, str],
        before: str,
        kinds: tuple[str, ...],
        others: tuple[str, ...],
        gaps: tuple[int, ...],
        interrupt: str,
        priority: tuple[int, ...],
    ) -> tuple[int, str]:
        __tracebackhide__ = True
        if before != "cold":
            # A replay may leave out the settle that lets the call cache the key: the line then says so.
            settle_left_out = self.replaying is not None and self._world.steps + 2 in self.replaying[1]
            why = ", not waited for" if settle_left_out else ", cached first"
            self._issue("use", *key, why=f" (the race's key{why})")
            self._settle()
            if before == "cached, its session lost":
                self._expire(key)
        keys = [key] + [self._other_key(key, other) for other in others]
        turns = [*gaps, None]
        issued = [
            self._issue(kind, *self._where(kind, where), turns=wait, priority=p)
            for kind, where, wait, p in zip(kinds, keys, turns, priority, strict=True)
        ]
        last = issued[-1]
        if self.replaying is not None:  # as the recorded run did, whatever became of the operation
            interrupted = self._call in self.replaying[0].race_cancels
        else:
            running = last is not None and last.task is not None and not last.task.done()
            interrupted = interrupt != "none" and running and last is not None and last.kind != "cleanup"
        if interrupted:
            if self.record is not None:
                self.record.race_cancels.add(self._call)
            self._cancel(last)
        return keys[-1]

    @staticmethod
    def _where(kind: str, key: tuple[int, str]) -> tuple[int | None, str]:
        return (None if kind == "cleanup" else key[0], key[1])

    def _other_key(self, key: tuple[int, str], other: str) -> tuple[int, str]:
        parts = self._parts
        server, run_id = key
        if other == "same server, other run":
            number = int(run_id.rsplit("-", 1)[1])
            return (server, f"run-{number % parts.run_ids + 1}")
        if other == "same run, other server":
            return (server % parts.servers + 1, run_id)
        return key

    def _issue(
        self,
        kind: str,
        server: int | None,
        run_id: str | None,
        why: str = "",
        turns: int | None = None,
        priority: int = 0,
    ) -> _Op | None:
        """Start an operation as a task of its name, then let the loop run ``turns`` (a left-out one: the turns
        alone, so the others start where they did)."""
        world = self._world
        name, number, runs = self._begin_operation(kind)
        if not runs:
            self._advance("turns", turns=turns)
            return None
        op = _Op(name=name, kind=kind, server=server, run_id=run_id)
        world.ops.append(op)
        where = f"(server {server}, {run_id})" if server is not None else f"({run_id})"
        verb = {"get": "get_or_create", "use": "use (get, then call a tool)", "cleanup": "cleanup"}[kind]
        ranked = f" at priority {priority}" if priority else ""
        self._write(number, op.name, f"{op.name}: {verb} {where}{ranked}{why}")
        self._next_priority = priority
        self._next_owner = op.name
        op.task = world.loop.create_task(self._operate(op), name=op.name)
        world.loop.explore_freely(op.task)
        self._advance("turns", turns=turns)
        return op

    async def _operate(self, op: _Op) -> None:
        world = self._world
        op.began = len(world.started)
        world.started.append(op.name)
        cache = world.cache
        if op.kind == "cleanup":
            await cache.cleanup(op.run_id)
            return
        assert op.server is not None
        assert op.run_id is not None
        url = world.fakes[op.server - 1].url
        client = await cache.get(url, op.run_id)
        self._remember(op, client)
        if op.kind == "use":
            await client.call_tool("echo", {"text": op.name})
            self._remember(op, client)

    def _remember(self, op: _Op, client: Any) -> None:
        key = op.key
        assert key is not None
        world = self._world
        world.clients[key] = client
        session_id = getattr(client, "session_id", None)
        if isinstance(session_id, str):
            world.owners[session_id] = key

    def _session_of(self, key: tuple[int, str]) -> str | None:
        """The key's live session, as far as the machine knows (the client the cache returned, or the journal)."""
        world = self._world
        live = {s.id for s in self._server(key[0]).live_sessions}
        client = world.clients.get(key)
        session_id = getattr(client, "session_id", None) if client is not None else None
        if isinstance(session_id, str) and session_id in live:
            return session_id
        self._attribute_from_journal()
        owned = [sid for sid, owner in world.owners.items() if owner == key and sid in live]
        return owned[-1] if owned else None

    def _expire(self, key: tuple[int, str]) -> None:
        world = self._world
        server, run_id = key
        name, number, runs = self._begin_operation("expire")
        if not runs:
            return
        op = _Op(name=name, kind="expire", server=server, run_id=run_id)
        world.ops.append(op)
        self._advance("session", key)  # a session opening for the key is waited for: it can only be lost once open
        session_id = self._session_of(key)
        fake_server = self._server(server)
        if session_id is None:
            self._write(
                number,
                op.name,
                f"{op.name}: expire (server {server}, {run_id}): the key had no live session, nothing was lost "
                "(the loop ran on meanwhile)",
            )
            return
        op.began = len(world.started)
        world.started.append(op.name)
        world.expiries[key] = world.expiries.get(key, 0) + 1
        fake_server.drop_session(session_id)
        fake_server.journal.note(f"race: {op.name}: the session of ({run_id}) is lost")
        self._write(
            number,
            op.name,
            f"{op.name}: expire (server {server}, {run_id}): once it was open, the server lost session "
            f"{session_id[:8]}",
        )

    def _unsettled(self) -> bool:
        """An operation was issued since the last settle (a settle then waits for something, or checks anew)."""
        world = self.world
        return world is not None and len(world.ops) > world.settled

    def _cancellable(self) -> _Op | None:
        if self.world is None:
            return None
        for op in reversed(self.world.ops):
            if op.kind in ("get", "use") and op.task is not None and not op.task.done() and not op.cancelled:
                return op
        return None

    def _cancel(self, op: _Op | None = None) -> None:
        """Cancel ``op`` (the cancel rule: the latest get or use still running; a replay: the recorded one)."""
        world = self._world
        name, number, runs = self._begin_operation("cancel")
        if self.replaying is not None:
            target = self.replaying[0].cancelled.get(number)
            op = next((o for o in world.ops if o.name == target), None)
        else:
            op = op or self._cancellable()
            target = None if op is None else op.name
        if self.record is not None:
            self.record.cancelled[number] = target
        if runs and (op is None or op.task is None or op.task.done()):
            ended = f"{name}: cancel {target or 'nothing'}: nothing to cancel (it ended, or was left out)"
            self._write(number, name, ended)
        elif runs:
            assert op is not None
            assert op.task is not None
            where = where_task_stands(op.task) or ("before its first step" if op.began is None else "an unknown place")
            world.ops.append(_Op(name=name, kind="cancel", server=op.server, run_id=op.run_id))
            self._write(number, name, f"{name}: cancel {op.name} (it stood at {where})")
            op.cancelled = True
            op.task.cancel()
        self._advance("turns")

    def _settle(self) -> None:
        __tracebackhide__ = True
        number, runs = self._begin_step("settle")
        if runs:
            self._write(number, "settle", "settle (wait until every operation is done, then check)")
            self._settle_and_check()

    # --- invariants ----------------------------------------------------------------------------------

    def _settle_and_check(self) -> None:
        __tracebackhide__ = True
        self._world.settled = len(self._world.ops)
        self._advance("settle")
        self._check_quiescent()

    def _check_quiescent(self) -> None:
        """The cache invariants once every operation is done and nothing can run."""
        __tracebackhide__ = True
        world = self._world
        self._attribute_from_journal()
        problems: list[str] = []
        for op in world.ops:
            task = op.task
            if task is None or not task.done():
                continue
            if op.cancelled:  # the program cancelled it: however it ended is excused, and its error retrieved
                if not task.cancelled():
                    task.exception()
                continue
            if task.cancelled():
                if not self._excused(op):
                    problems.append(f"{op.name} ended cancelled, but nothing cancelled it (another caller's cancel?)")
                continue
            error = task.exception()
            if error is not None and not self._excused(op, error=True):
                problems.append(f"{op.name} raised {error!r}")
        held = self._held_keys()
        for number in range(1, len(world.fakes) + 1):
            server = self._server(number)
            live = [s.id for s in server.live_sessions]
            mine = sorted(key for key in held if key[0] == number)
            by_key: dict[tuple[int, str], list[str]] = {}
            for sid in live:
                owner = world.owners.get(sid)
                if owner is not None:
                    by_key.setdefault(owner, []).append(sid)
            for key, sids in sorted(by_key.items()):
                if len(sids) > 1:
                    problems.append(
                        f"{len(sids)} sessions live on server {number} for one key ({key[1]}): {[s[:8] for s in sids]}"
                    )
                if key not in held:
                    problems.append(
                        f"session {sids[0][:8]} of (server {number}, {key[1]}) is still live, but the last operation "
                        f"to begin on {key[1]} was a cleanup"
                    )
            if len(live) > len(mine):
                problems.append(
                    f"{len(live)} session(s) live on server {number} ({[s[:8] for s in live]}), but the cache can "
                    f"hold at most {len(mine)} there (keys got since their run's last cleanup: "
                    f"{[k[1] for k in mine]})"
                )
            bound = self._initialize_bound(number)
            if (initializes := len(server.get_requests(method="initialize"))) > bound:
                problems.append(
                    f"initialize ran {initializes} times on server {number}; at most {bound} expected "
                    "(one per key, plus one per cleanup of its run, expiry of its session or cancelled caller)"
                )
        if problems:
            self._fail("A cache invariant failed once the run was quiet:", problems=problems)

    def _excused(self, op: _Op, *, error: bool = False) -> bool:
        """A get or use may fail if a cleanup of its run or an expiry of its key began after it did; under mcp 1.x it
        may also raise (not end cancelled) once another operation on its server was cancelled after it was issued:
        that ``ClientSession`` ends its whole session when a cancelled request's answer arrives in the step the
        cancel lands (docs/reusing-client.md, 7), and a call still in flight on it then fails."""
        world = self._world
        if op.began is None:
            return True
        if error and _CANCEL_CAN_END_SESSION:
            issued = world.ops.index(op)
            if any(o.kind == "cancel" and o.server == op.server for o in world.ops[issued + 1 :]):
                return True
        by_name = {o.name: o for o in world.ops}
        for name in world.started[op.began + 1 :]:
            other = by_name.get(name)
            if other is None:
                continue
            if other.kind == "cleanup" and other.run_id == op.run_id:
                return True
            if other.kind == "expire" and other.key == op.key:
                return True
        return False

    def _held_keys(self) -> set[tuple[int, str]]:
        """Keys the cache may hold: a get or use of the key began after the last cleanup of its run began."""
        world = self._world
        last_cleanup: dict[str, int] = {}
        for op in world.ops:
            if op.kind == "cleanup" and op.began is not None and op.run_id is not None:
                last_cleanup[op.run_id] = max(last_cleanup.get(op.run_id, -1), op.began)
        return {
            key
            for op in world.ops
            if op.kind in ("get", "use")
            and op.began is not None
            and (key := op.key) is not None
            and op.began > last_cleanup.get(key[1], -1)
        }

    def _initialize_bound(self, server: int) -> int:
        world = self._world
        keys = {op.key for op in world.ops if op.server == server and op.began is not None and op.key is not None}
        bound = 0
        for key in keys:
            assert key is not None
            cleanups = sum(1 for op in world.ops if op.kind == "cleanup" and op.run_id == key[1])
            cancels = sum(1 for op in world.ops if op.key == key and op.kind == "cancel")
            bound += 1 + cleanups + cancels + world.expiries.get(key, 0)
        return bound

    def _attribute_from_journal(self) -> None:
        """Which key each session served, from the tool calls the ``use`` operations sent."""
        world = self._world
        names = {op.name: op.key for op in world.ops if op.kind == "use"}
        for number in range(1, len(world.fakes) + 1):
            for exchange in self._server(number).get_requests(method="tools/call"):
                body = exchange.request_body
                params = body.get("params") if isinstance(body, dict) else None
                arguments = params.get("arguments") if isinstance(params, dict) else None
                text = arguments.get("text") if isinstance(arguments, dict) else None
                key = names.get(text) if isinstance(text, str) else None
                if key is not None and exchange.session_id is not None:
                    world.owners.setdefault(exchange.session_id, key)

    def _server(self, number: int) -> FakeMCPServer:
        server = self._world.fakes[number - 1].server
        assert server is not None
        return server

    # --- the end ---------------------------------------------------------------------------------------

    def teardown(self) -> None:
        __tracebackhide__ = True
        world = self.world
        if world is None:
            return
        try:
            if not self.failed:
                self._finish()
        finally:
            self._dismantle()

    def _finish(self) -> None:
        """Settle, check, close the cache, then require that nothing is left open anywhere."""
        __tracebackhide__ = True
        world = self._world
        self._finishing = True
        self._settle_and_check()
        held = sorted(self._held_keys())
        if held:  # every key the cache holds still answers: a lost session is reopened by the next use
            for key in held:
                self._issue("use", *key, why=" (the end: every key the cache holds must still answer)")
            self._settle_and_check()
        closer = _Op(name="aclose", kind="aclose", server=None, run_id=None)
        number, _ = self._begin_step("aclose")
        self._write(number, "aclose", "aclose() (the end of the example)")
        self._next_owner = closer.name

        async def close() -> None:
            await world.cache.aclose()

        closer.task = world.loop.create_task(close(), name="aclose")
        world.loop.explore_freely(closer.task)
        world.ops.append(closer)
        self._advance("settle")
        problems = []
        if closer.task.done() and not closer.task.cancelled() and (error := closer.task.exception()) is not None:
            problems.append(f"aclose() raised {error!r}")
        for number in range(1, len(world.fakes) + 1):
            live = self._server(number).live_sessions
            if live:
                problems.append(f"session(s) left live on server {number} after aclose(): {[s.id[:8] for s in live]}")
        open_clients = [r for r in world.counter.created if not r.closed]
        if open_clients:
            problems.append(f"{len(open_clients)} of {world.counter.count} HTTP client(s) left open after aclose()")
        leftovers, errors = self._drain()
        if leftovers:
            problems += [f"task left pending: {t}" for t in leftovers]
        if errors:
            problems += [f"error nobody handled: {e}" for e in errors]
        if problems:
            self._fail("After aclose(), something was left behind:", problems=problems)

    def _drain(self) -> tuple[list[str], list[str]]:
        """Run out bounded waits in FIFO order, list the tasks still pending and the errors nobody retrieved."""
        world = self._world
        loop = world.loop
        loop.chooser = FifoChooser()
        if world.pacer is not None:
            world.pacer.cancel()
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.create_task(asyncio.sleep(DRAIN_SECONDS), name="drain"))
        pending = [t for t in loop.tasks() if not t.done() and t is not world.pacer]
        leftovers = [loop._describe_waiting(t) for t in pending]
        cancel_in_order(loop, [t for t in loop.tasks() if not t.done()])
        collect_unretrieved(loop)
        errors = []
        for context in loop.errors:
            exc = context.get("exception")
            errors.append(f"{context.get('message', 'error')}: {exc!r}" if exc is not None else str(context["message"]))
        loop.errors.clear()
        return leftovers, errors

    def _dismantle(self) -> None:
        world = self._world
        loop = world.loop
        try:
            if not loop.is_closed():
                loop.chooser = FifoChooser()
                if world.pacer is not None and not world.pacer.done():
                    world.pacer.cancel()
                for _ in range(CANCEL_ROUNDS):  # a task cancelled may start another (a task group's child)
                    pending = [t for t in loop.tasks() if not t.done()]
                    if not pending:
                        break
                    cancel_in_order(loop, pending)
                collect_unretrieved(loop)
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()
        finally:
            for fake in world.fakes:
                fake.close()
            with contextlib.suppress(LifecycleError):  # not installed if the first rule failed early
                world.counter.uninstall()
            if self._clock is not None:
                self._clock.__exit__(None, None, None)
            if self._saved_start is not None:
                threading.Thread.start = self._saved_start  # type: ignore[method-assign]
            if self._gc_was_enabled:
                gc.enable()

    # --- the report ------------------------------------------------------------------------------------

    def _fail(self, what: str, *, problems: list[str] | None = None, cause: BaseException | None = None) -> None:
        __tracebackhide__ = True
        self.failed = True
        searching = self.replaying is None
        if searching and self._parts.budget is not None:
            self._parts.budget.failed()
        failure = self._parts.failure(self._report(what, problems or [], cause))
        for remark in self._parts.remarks() if searching and self._parts.remarks is not None else []:
            failure.add_note(remark)
        self.outcome = Outcome(failure, what, tuple(problems or ()), cause)
        if self.record is not None and self._parts.recorded is not None:
            self._parts.recorded(self.outcome, self.record)
        raise failure from cause

    def _report(self, what: str, problems: list[str], cause: BaseException | None) -> str:
        world = self._world
        loop = world.loop
        lines = [what] + [f"  - {p}" for p in problems]
        if cause is not None:
            lines += ["", f"Raised: {cause!r}"]
        lines += ["", *self._program_heading()]
        lines += [f"  {number}. {step}" for number, step in world.program]
        if world.left_out:
            lines.append(f"  left out: {', '.join(world.left_out)}")
        lines.append(f"  operations began executing in the order: {', '.join(world.started) or '(none)'}")
        schedule = world.schedule
        names = dict(loop.names)
        names.update({loop._seq_of(task): loop.task_name(task) for task in loop.tasks()})  # as the run named them
        lines += ["", f"Schedule: {schedule}", f"  in words: {schedule.describe(names)}"]
        lines += describe_deviations(loop.deviations, loop.deviation_count, loop.steps)
        digest = hashlib.sha256(repr(loop.trace).encode()).hexdigest()[:16]
        lines.append(f"  trace: {len(loop.trace)} steps, digest {digest} (identical whenever this example replays)")
        if self._parts.logs is not None and (logged := self._parts.logs()):
            lines += ["", *logged]
        for number in range(1, len(world.fakes) + 1):
            server = self._server(number)
            exchanges = server.journal.exchanges
            if exchanges:
                heading = f"The failing run on the wire, server {number} ({server.url}). {diagram_legend(exchanges)}"
                lines += ["", heading, str(server.journal)]
        same = "the whole program, the steps left out included" if world.left_out else "the same program"
        lines += [
            "",
            f"Hint: the `state.…` lines Hypothesis prints are {same}; rerunning the test replays this example first "
            "(Hypothesis database). To pin it in a regression test, see docs/races.md.",
        ]
        if self.replaying is None:
            note(f"schedule in words: {schedule.describe(names)}")
        return "\n".join(lines)

    def _program_heading(self) -> list[str]:
        order = "operations in the order the rules issued them; each ran as a task of that name"
        world = self._world
        if not world.left_out:
            return [f"The program ({order}):"]
        assert self.replaying is not None
        steps = len(self.replaying[0].steps)
        return [
            f"The program, shortened: {len(world.left_out)} of the {steps} steps the rules issued are left out, as "
            f"the run fails the same way without them ({order}; numbered as in the whole program):"
        ]
