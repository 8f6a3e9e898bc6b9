"""Race testing: run async code against the in-process fake under schedules Hypothesis explores.

Every example builds a fresh controlled event loop and gets a clean in-process fake (one per test,
renewed before each example), then runs your coroutine on it. Which task runs at each step is a
Hypothesis choice (task priorities plus a few "change points", so a found race shrinks to one or two
numbers), and so are the server-side choices (how long each request is held, which session is lost
before which request). Time is virtual: sleeps and timeouts cost nothing. A failure shows the minimal
schedule in words, the choices, and the sequence diagram of the failing run; the Hypothesis database
replays it first on the next run.

Two entry points:

* `RaceSuite`: subclass it with a ``make_client`` fixture (the `SessionReuseSuite` interface) to run
  every race scenario on your client.
* `explore` / `race_test`: run your own coroutine, e.g. a session cache with its own API::

      from pytest_fake_mcp.races import race_test

      @race_test(max_examples=100)
      async def test_cache_creates_one_session(race):
          cache = MyCache()
          await asyncio.gather(cache.get(race.url), cache.get(race.url))
          await race.quiet()
          race.server.assert_initialize_count(1)

Race tests are plain (sync) test functions that build their own loop for each example: a loop shared
with pytest-asyncio or anyio would carry tasks and state from one example into the next, and their
loops cannot be told which callback to run. See ``docs/races.md``.

Hypothesis is imported here and by ``_race_machine`` (which this module imports when a cache is explored); the
checks of its private names in ``_compat`` import it only when they run.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, TypeVar, cast

import pytest
from hypothesis import HealthCheck, given, note, reproduce_failure, settings
from hypothesis import seed as pin_seed
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase

from ._compat import choice_draws, reporting_example
from ._counters import HTTPClientCounter, http_client_hooks_kept
from ._inprocess import InProcessFake
from ._loop import Deadlock, Livelock, NondeterminismError, PriorityChooser, RunResult, run_controlled
from ._options import FakeMCPOptions
from ._report import CROSSED_TASKS_HINT, crossed_tasks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable

    from ._server import FakeMCPServer
    from ._types import Receive, Scope, Send
    from .contract import ContractClient

__all__ = [
    "Deadlock",
    "Livelock",
    "NondeterminismError",
    "Race",
    "RaceFailure",
    "RaceSuite",
    "Schedule",
    "ServerChoices",
    "SessionCacheUnderTest",
    "explore",
    "explore_session_cache",
    "race_settings",
    "race_test",
    "schedules",
]

T = TypeVar("T")
U = TypeVar("U")


# --- the schedule encoding ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A PCT-style schedule: a priority per task (by creation number) and decisions that demote the runner.

    ``Schedule()`` is FIFO, stock asyncio's order; Hypothesis shrinks towards it.
    """

    priorities: tuple[int, ...] = ()
    change_points: tuple[int, ...] = ()

    def chooser(self) -> PriorityChooser:
        return PriorityChooser(self.priorities, self.change_points)

    def describe(self, names: dict[int, str]) -> str:
        """The schedule in words, naming tasks as the run named them."""
        parts = []
        raised = [(seq, p) for seq, p in enumerate(self.priorities) if p > 0]
        if raised:
            ranks = ", ".join(f"{names.get(seq, f'task #{seq}')} = {p}" for seq, p in raised)
            parts.append(f"priorities {ranks} (the highest runnable task runs first; others 0)")
        if self.change_points:
            points = ", ".join(str(c) for c in self.change_points)
            parts.append(f"at scheduling decision(s) {points} the task about to run was set aside")
        return "; ".join(parts) if parts else "FIFO (stock asyncio order)"

    def __str__(self) -> str:
        return f"Schedule(priorities={list(self.priorities)}, change_points={list(self.change_points)})"


_MAX_TASKS: Final = 8
_ENDED: Final = object()
"""What a draw gives once Hypothesis has ended the example (see `Race._take_or`)."""
_MAX_PRIORITY: Final = 3
_MAX_CHANGES: Final = 2
_HORIZON: Final = 300


def schedules(
    *,
    max_tasks: int = _MAX_TASKS,
    max_priority: int = _MAX_PRIORITY,
    max_changes: int = _MAX_CHANGES,
    horizon: int = _HORIZON,
) -> st.SearchStrategy[Schedule]:
    """Hypothesis strategy for `Schedule`: shrinks towards FIFO, then to the fewest non-zero numbers.

    Race tests draw their default schedule straight from the example's choices, with these bounds and the
    same shrinking (`explore`'s ``schedule_strategy`` takes this strategy, or any other, instead).

    Example::

        @given(schedules())
        def test_schedule(schedule): ...
    """
    return st.builds(
        Schedule,
        priorities=st.lists(st.integers(0, max_priority), max_size=max_tasks).map(tuple),
        change_points=st.lists(st.integers(0, horizon - 1), max_size=max_changes, unique=True).map(
            lambda xs: tuple(sorted(xs))
        ),
    )


def _draw_schedule(choices: _Choices, strategy: st.SearchStrategy[Schedule] | None = None) -> Schedule:
    """The default schedule, straight from the example's choices: a count, then that many numbers, twice.

    The same `Schedule` as `schedules()` with its default bounds, without a strategy around each number (a
    strategy draw of the whole costs about eight times these ten-odd choices). Each count and each number
    shrinks towards 0, so a failing schedule shrinks towards FIFO, then to the fewest non-zero numbers.
    ``strategy`` (a user's) replaces it.
    """
    if strategy is not None or not choices.direct:
        return choices.draw(_default_schedules() if strategy is None else strategy, "schedule")
    integer = choices.integer
    priorities = tuple(integer(0, _MAX_PRIORITY) for _ in range(integer(0, _MAX_TASKS)))
    change_points = tuple(sorted({integer(0, _HORIZON - 1) for _ in range(integer(0, _MAX_CHANGES))}))
    schedule = Schedule(priorities=priorities, change_points=change_points)
    choices.note(schedule, "schedule")
    return schedule


# --- server-side choices ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerChoices:
    """What the fake decides per request, drawn from the same example as the schedule.

    Args:
        max_hold: each request is held 0..max_hold virtual ticks before the fake sees it (release order).
        lose_sessions: at most this many times, the session a request names is dropped just before it
            (the request then gets the fake's 404).
        status_errors: the statuses a request may be answered with instead (e.g. ``(503,)``); off by default.
    """

    max_hold: int = 2
    lose_sessions: int = 0
    status_errors: tuple[int, ...] = ()
    tick: float = 0.001


class _ServerGate:
    """Plain-ASGI wrapper: asks the example how long to hold each request, and whether to lose its session."""

    def __init__(self, app: Any, race: Race, choices: ServerChoices) -> None:
        self.app = app
        self.race = race
        self.choices = choices
        self.number = 0
        self.losses = 0

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine of its own: the fake's app is awaited straight from the transport's await, with one
        # frame less to pass through at each of the request's steps; the draws still happen as the request
        # arrives (the transport awaits this call at once).
        if scope["type"] != "http" or scope["method"] == "GET":
            return self.app(scope, receive, send)  # type: ignore[no-any-return]
        self.number += 1
        n, choices, race = self.number, self.choices, self.race
        race._on_wire()  # the request reached the fake
        hold = 0
        if choices.max_hold:  # the label is noted only in a reported example: built only then
            label = f"hold request {n}" if race._choices.reporting else None
            hold = race._draw_integer(0, choices.max_hold, label)
        session_id = _header(scope, b"mcp-session-id") if self.losses < choices.lose_sessions else None
        if session_id and race._draw_boolean(f"lose before {n}"):
            self.losses += 1
            dropped = race.server._app.drop_session(session_id)
            race.server.journal.note(f"race: session {session_id[:8]} lost before request {n} -> {dropped}")
        status = 0
        if choices.status_errors:
            status = race._draw_choice((0, *choices.status_errors), f"status of request {n}")
        if status:
            race.server.journal.note(f"race: request {n} answered {status} by the race gate")
            return self._refuse(status, send)
        answering = True

        async def send_start(message: dict[str, Any]) -> None:
            # Hold the answer, not the request: the fake has seen the request when it arrived, so what it
            # records stays in the order the client sent things.
            if hold:
                await asyncio.sleep(hold * choices.tick)
            await send(message)
            race._on_wire()  # the answer went out

        def send_held(message: dict[str, Any]) -> Awaitable[None]:
            # Only the start of the answer needs a coroutine here; the rest goes straight to ``send``.
            nonlocal answering
            if answering and message["type"] == "http.response.start":
                answering = False
                return send_start(message)
            return send(message)

        return self.app(scope, receive, send_held)  # type: ignore[no-any-return]

    async def _refuse(self, status: int, send: Send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        self.race._on_wire()  # the answer went out
        await send({"type": "http.response.body", "body": b""})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


# --- one example --------------------------------------------------------------------------------------


class Race:
    """What a race coroutine gets: the in-process fake, its URL, the HTTP clients built, and helpers.

    Example::

        async def scenario(race):
            client = MyClient(race.url)
            await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
            await client.aclose()
            await race.quiet()
            race.server.assert_initialize_count(1)
    """

    def __init__(self, server: FakeMCPServer, http_clients: HTTPClientCounter, choices: _Choices) -> None:
        self.server = server
        self.http_clients = http_clients
        self._choices = choices
        self.stop: BaseException | None = None
        self.points: list[str] = []
        """Each explored point the run reached (`at_some_point`), in words; a failure report lists them."""
        self._wire = 0
        self._wire_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def url(self) -> str:
        """The fake's endpoint; every httpx/httpx2 client built during the run reaches it in-process."""
        return self.server.url

    def draw(self, strategy: st.SearchStrategy[T], label: str) -> T:
        """Draw a value from the example (it shrinks and replays with the schedule)."""
        fallback: Callable[[], T] = lambda: _first(strategy)  # noqa: E731 - what an ending example gets
        return self._take(lambda: self._choices.draw(strategy, label), fallback)

    def _draw_integer(self, low: int, high: int, label: str | None) -> int:
        """``draw(st.integers(low, high), label)``, straight from the example's choices (``label`` None: no note)."""
        return self._take_or(low, self._choices.integer, low, high, label)

    def _draw_boolean(self, label: str) -> bool:
        """``draw(st.booleans(), label)``, straight from the example's choices."""
        return self._take_or(False, self._choices.boolean, label)

    def _draw_choice(self, options: tuple[T, ...], label: str) -> T:
        """``draw(st.sampled_from(options), label)``, straight from the example's choices; shrinks to the first."""
        choices = self._choices
        if not choices.direct:
            return self._take(lambda: choices.draw(st.sampled_from(options), label), lambda: options[0])

        def pick() -> T:
            value = options[choices.integer(0, len(options) - 1)]
            choices.note(value, label)
            return value

        return self._take(pick, lambda: options[0])

    def _take(self, draw: Callable[[], T], fallback: Callable[[], T]) -> T:
        """``draw()``; once Hypothesis ends the example, ``fallback()``: the run finishes quietly, the end is
        re-raised after it."""
        value = self._take_or(_ENDED, draw)
        return fallback() if value is _ENDED else cast("T", value)

    def _take_or(self, ended: U, draw: Callable[..., T], *args: Any) -> T | U:
        """``draw(*args)``; once Hypothesis ends the example, ``ended`` (no closures: the race gate draws for
        every request)."""
        if self.stop is not None:
            return ended  # pragma: no cover - the example is ending
        try:
            return draw(*args)
        except BaseException as exc:  # Hypothesis ends the example: finish the run quietly, re-raise after
            self.stop = exc
            return ended

    async def quiet(self) -> None:
        """Wait until nothing else can run without time moving (every other task is blocked or done)."""
        loop = asyncio.get_running_loop()
        wait_idle = getattr(loop, "wait_idle", None)
        if wait_idle is None:
            raise RuntimeError("Race.quiet() works only inside a race run (on the controlled loop)")
        await wait_idle()

    async def at_some_point(
        self, during: asyncio.Future[Any], label: str = "point", *, wire_events: int = 6, turns: int = 3
    ) -> bool:
        """Wait for a point Hypothesis picks in the run's progress on the wire, while ``during`` runs.

        The point is ``k`` wire events after the call, then ``j`` loop turns, with ``k`` drawn in
        ``0..wire_events`` and ``j`` in ``0..turns``. A wire event is a request reaching the fake, or the
        fake handing over the start of an answer, whichever task sent the request (GET streams are not
        counted). So the points spread over the exchanges with the fake, however many steps each one takes:
        "cancel it just after the fake answered ``initialize``" is one draw away. A failing example shrinks
        to the earliest failing point, and the failure report names it with what the fake had received and
        answered then.

        Args:
            during: the task (or future) the point falls in; if it finishes first, the wait ends then.
            label: names the point in the report and in Hypothesis's draws.
            wire_events: the latest wire event the point may follow.
            turns: the most loop turns the point may come after its wire event.

        Returns:
            True if ``during`` was still running at the point; False if it finished first.

        Raises:
            ValueError: ``wire_events`` or ``turns`` is negative.

        Example::

            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller")

            async def cancel_it() -> None:
                if await race.at_some_point(caller, "cancel the caller"):
                    caller.cancel()

            race.spawn(cancel_it(), "canceller")
        """
        if wire_events < 0 or turns < 0:
            raise ValueError(f"wire_events={wire_events!r} and turns={turns!r} must both be >= 0 (0 and 0: at once)")
        k = self._draw_integer(0, wire_events, f"{label}: wire events") if wire_events else 0
        j = self._draw_integer(0, turns, f"{label}: loop turns") if turns else 0
        if k and not during.done():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def wake(_: object) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            during.add_done_callback(wake)
            self._wire_waiters.append((self._wire + k, waiter))
            try:
                await waiter
            finally:
                during.remove_done_callback(wake)
        for _ in range(j):
            if during.done():
                break
            await asyncio.sleep(0)
        where = f"after {k} wire event(s) and {j} more loop turn(s)"
        if during.done():
            self.points.append(f"{label}: {where}, but {_task_name(during)} had finished already")
            return False
        self.points.append(f"{label}: {where}, when the fake had {self._wire_state()}")
        return True

    def _on_wire(self) -> None:
        """One more wire event: wake the points waiting for it."""
        self._wire += 1
        if self._wire_waiters:
            reached = self._wire
            waiting = []
            for target, waiter in self._wire_waiters:
                if target > reached:
                    waiting.append((target, waiter))
                elif not waiter.done():
                    waiter.set_result(None)
            self._wire_waiters = waiting

    def _wire_state(self) -> str:
        """What the fake had received and answered, in words: ``answered initialize (200), received ...``."""
        parts = []
        for exchange in self.server.journal.exchanges:
            if exchange.http_method == "GET":
                continue
            what = exchange.rpc_method or (exchange.kind if exchange.kind != "other" else exchange.http_method)
            parts.append(f"received {what}" if exchange.status is None else f"answered {what} ({exchange.status})")
        return ", ".join(parts) if parts else "received nothing yet"

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """``asyncio.create_task`` with a name the failure report uses (``caller-1``, ``closer``, ...).

        The task is interleaved freely with every other task, even when its code is an installed package.
        """
        loop = asyncio.get_running_loop()
        task = loop.create_task(coro, name=name)
        explore_freely = getattr(loop, "explore_freely", None)
        if explore_freely is not None:
            explore_freely(task)
        return task


def _task_name(future: asyncio.Future[Any]) -> str:
    return future.get_name() if isinstance(future, asyncio.Task) else "the awaited future"


def _reporting() -> bool:
    """Is Hypothesis reporting the current example (its final replay, or verbose output)?

    Describing a run (the schedule in words, where each out-of-order step stood, each draw as a note)
    costs as much as a good part of the run: a search does it only for the example it reports.
    """
    return reporting_example()


class _Choices:
    """Draws from the example: straight from its choice sequence where Hypothesis allows, else with strategies.

    A strategy draw opens spans around its choices, and ``data.draw`` also checks that the strategy leaves
    the global random alone and notes the value: three to four times the cost of the choice itself, for the
    schedule's ten-odd numbers and each request's hold. So the engine's own draws take integers and booleans
    from the choice sequence directly (``ConjectureData.draw_integer``/``draw_boolean``); only a reported
    example (its final replay, or verbose output) notes each value, as ``data.draw`` would
    (``Draw 2 (hold request 1): 0``). The choices are the same either way, so an example replays and shrinks
    alike. A Hypothesis whose choice data lacks those methods gets strategies instead (``direct`` is False).
    """

    def __init__(self, data: Any, reporting: bool) -> None:
        self.data = data
        self.reporting = reporting
        draws = choice_draws(data)
        self.direct = draws is not None
        self._integer: Callable[[int, int], int] | None = None
        self._boolean: Callable[[], bool] | None = None
        if draws is not None:
            self._integer, self._boolean = draws

    def integer(self, low: int, high: int, label: str | None = None) -> int:
        """An integer in ``low..high``, shrinking towards ``low``; noted under ``label`` if one is given."""
        if not self.direct:
            return self.data.draw(_integers(low, high), label=label)  # type: ignore[no-any-return]
        value: int = self._integer(low, high)  # type: ignore[misc]
        if label is not None and self.reporting:
            self.note(value, label)
        return value

    def boolean(self, label: str) -> bool:
        """A boolean, shrinking towards False, noted under ``label``."""
        if not self.direct:
            return self.data.draw(_BOOLEANS, label=label)  # type: ignore[no-any-return]
        value: bool = self._boolean()  # type: ignore[misc]
        if self.reporting:
            self.note(value, label)
        return value

    def note(self, value: object, label: str) -> None:
        """In a reported example, note ``value`` as ``data.draw`` notes a draw (``Draw 3 (label): value``)."""
        if self.reporting:
            self.data.draw(st.just(value), label=label)  # no choice: the note alone, numbered with the others

    def draw(self, strategy: st.SearchStrategy[T], label: str) -> T:
        """``data.draw(strategy, label)``: a user's strategy, or the schedule's without direct draws."""
        return self.data.draw(strategy, label=label)  # type: ignore[no-any-return]


# The fallback's strategies, built once each: building a strategy costs about as much as drawing from it.
_BOOLEANS: Final = st.booleans()


@functools.cache
def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _first(strategy: st.SearchStrategy[Any]) -> Any:
    if isinstance(strategy, st.SearchStrategy) and repr(strategy).startswith("booleans"):
        return False
    return 0


class RaceFailure(AssertionError):
    """A race example failed: the message has the schedule in words, what failed, and the diagram."""


def _report(
    what: str,
    schedule: Schedule,
    result: RunResult,
    server: FakeMCPServer,
    cause: BaseException | None,
    points: list[str] | None = None,
) -> str:
    lines = [what, "", f"Schedule: {schedule}", f"  in words: {schedule.describe(result.task_names)}"]
    if result.deviations:
        lines.append(
            f"  {result.deviation_count} step(s) of {result.steps} ran out of FIFO order; the first ones "
            "(task, where it stood):"
        )
        lines += [f"    {d}" for d in result.deviations[:6]]
    elif result.deviation_count:
        lines.append(
            f"  {result.deviation_count} step(s) of {result.steps} ran out of FIFO order (described when "
            "Hypothesis reports the example)"
        )
    else:
        lines.append(f"  every one of {result.steps} steps ran in FIFO order")
    digest = hashlib.sha256(repr(result.trace).encode()).hexdigest()[:16]
    lines.append(f"  trace: {len(result.trace)} steps, digest {digest} (identical whenever this example replays)")
    if points:
        lines += ["", "Explored points reached:"] + [f"  - {p}" for p in points]
    if cause is not None:
        lines += ["", f"Raised: {cause!r}"]
    if result.loop_errors:
        lines += ["", "Errors the loop reported:"] + [f"  - {e}" for e in result.describe_errors()]
    if result.leftover_tasks:
        lines += ["", "Tasks left pending after the run:"] + [f"  - {t}" for t in result.leftover_tasks]
    lines += ["", "The failing run on the wire:", str(server.journal), ""]
    if crossed_tasks(cause) or any(crossed_tasks(e.get("exception")) for e in result.loop_errors):
        lines.append(f"Hint: {CROSSED_TASKS_HINT}.")
    lines.append(
        "Hint: rerunning the test replays this example first (Hypothesis database); to pin it in a regression "
        "test, see docs/races.md."
    )
    return "\n".join(lines)


def run_example(
    data: Any,
    scenario: Callable[[Race], Awaitable[Any]],
    *,
    options: FakeMCPOptions | None = None,
    choices: ServerChoices | None = None,
    schedule_strategy: st.SearchStrategy[Schedule] | None = None,
    allow_leftover_tasks: bool = False,
    allow_loop_errors: bool = False,
    fake: InProcessFake | None = None,
) -> Any:
    """One example: draw a schedule, run ``scenario`` on a fresh loop and a clean fake, fail with a report.

    ``fake``: an open in-process fake to renew for this example (`explore` shares one between its
    examples); by default the example builds its own.
    """
    __tracebackhide__ = True
    reporting = _reporting()
    drawing = _Choices(data, reporting)
    schedule = _draw_schedule(drawing, schedule_strategy)
    with HTTPClientCounter() as counter:
        own_fake = fake is None
        if fake is None:
            fake = InProcessFake(options or FakeMCPOptions())
            server = fake.open()
        else:
            server = fake.renew()
        try:
            race = Race(server, counter, drawing)
            fake.asgi = _ServerGate(fake.app, race, choices or ServerChoices())
            result = run_controlled(lambda: _as_coroutine(scenario(race)), schedule.chooser(), describe=reporting)
        finally:
            if own_fake:
                fake.close()
    if race.stop is not None:
        raise race.stop
    if reporting:
        note(f"schedule in words: {schedule.describe(result.task_names)}")
    failure = None
    if result.error is not None:
        kind = type(result.error).__name__
        failure = f"The race scenario failed under this schedule ({kind})."
    elif result.loop_errors and not allow_loop_errors:
        failure = "The run left errors nobody handled (an exception never retrieved, a callback that raised)."
    elif result.leftover_tasks and not allow_leftover_tasks:
        failure = "The run ended with tasks still pending (nothing may be left running once the scenario ends)."
    if failure is not None:
        raise RaceFailure(_report(failure, schedule, result, server, result.error, race.points)) from result.error
    return result.value


@functools.cache
def _default_schedules() -> st.SearchStrategy[Schedule]:
    return schedules()  # built once: building the strategy costs as much as drawing from it


def race_settings(max_examples: int = 100, **kwargs: Any) -> settings:
    """The Hypothesis settings race tests use: no deadline (virtual time), the blob printed, no too_slow check."""
    kwargs.setdefault("deadline", None)
    kwargs.setdefault("print_blob", True)
    kwargs.setdefault("suppress_health_check", [HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    return settings(max_examples=max_examples, **kwargs)


def explore(
    scenario: Callable[[Race], Awaitable[Any]],
    *,
    max_examples: int = 100,
    options: FakeMCPOptions | None = None,
    choices: ServerChoices | None = None,
    schedule_strategy: st.SearchStrategy[Schedule] | None = None,
    allow_leftover_tasks: bool = False,
    allow_loop_errors: bool = False,
    database_key: str | None = None,
    settings: settings | None = None,
    seed: int | None = None,
    reproduce: tuple[str, bytes] | None = None,
) -> None:
    """Run ``scenario(race)`` under up to ``max_examples`` explored schedules; raise on the minimal failure.

    Call it from a plain (sync) test. ``database_key`` names the saved failures (default: the scenario's
    qualified name), so a rerun replays the last failure first. ``seed`` pins generation (as
    ``@hypothesis.seed``; under ``derandomize``, the key is the seed); ``settings`` replaces `race_settings`.
    ``reproduce=(version, blob)`` runs exactly the example a failure printed (as ``@reproduce_failure``): a
    regression test.

    Raises:
        RaceFailure: the shrunk failing example, with the schedule in words and the sequence diagram.
        NondeterminismError: the scenario used a real socket, a thread or an executor.

    Example::

        def test_two_callers_share_one_session():
            async def scenario(race):
                client = MyClient(race.url)
                await asyncio.gather(client.call_tool("echo", {}), client.call_tool("echo", {}))
                await client.aclose()
                race.server.assert_initialize_count(1)

            explore(scenario, max_examples=50)
    """
    __tracebackhide__ = True
    fake = InProcessFake(options or FakeMCPOptions())

    def example(data: Any) -> None:
        run_example(
            data,
            scenario,
            options=options,
            choices=choices,
            schedule_strategy=schedule_strategy,
            allow_leftover_tasks=allow_leftover_tasks,
            allow_loop_errors=allow_loop_errors,
            fake=fake,
        )

    key = database_key or f"{getattr(scenario, '__module__', '')}.{getattr(scenario, '__qualname__', scenario)}"
    example.__name__ = "race_" + "".join(c if c.isalnum() else "_" for c in key.rsplit(".", 1)[-1])
    example.__qualname__ = example.__name__
    test = given(data=st.data())(example)
    configured = settings if settings is not None else race_settings(max_examples)
    pinned = seed_for(seed, configured, key)
    if pinned is not None:
        test = pin_seed(pinned)(test)  # under the settings: they keep their database
    runner = keyed_settings(configured, key)(test)
    if reproduce is not None:
        runner = reproduce_failure(*reproduce)(runner)
    # One fake for every example, renewed before each (building and routing one costs more than a reset),
    # and the HTTP-client counting hooks kept installed between examples (installing them patches classes).
    # GC is off during each run; what was alive before the test is frozen meanwhile, so the collections
    # between examples walk only what the examples left, not every module the process has loaded.
    frozen = not _frozen_by_others()
    with http_client_hooks_kept(), fake:
        if frozen:
            gc.freeze()
        try:
            runner()
        finally:
            # Collect what the runs left here, not in whichever test runs next.
            gc.collect()
            if frozen:
                gc.unfreeze()


def _frozen_by_others() -> bool:
    """Has someone else frozen objects (``gc.freeze``)? Then `explore` leaves the collector's freeze alone."""
    return gc.get_freeze_count() > _frozen_by_python()


@functools.cache
def _frozen_by_python() -> int:
    """The most objects CPython itself keeps in the permanent generation (``gc.get_freeze_count()``).

    0, except on 3.12: its collector moves every immortal object it meets there (gcmodule.c ``update_refs``),
    that is the tuples of the static builtin types' bases and MROs (375 on 3.12.1, from interpreter start); 3.13
    untracks them instead. Counted once: static builtin types are all made at interpreter start.
    """
    if sys.version_info[:2] != (3, 12):
        return 0
    immortal = sys.getrefcount(None)  # None is immortal from 3.12: the immortal reference count
    seen: set[int] = set()
    types: list[type] = [object]
    found: set[type] = set()
    while types:
        cls = types.pop()
        if cls in found:
            continue
        found.add(cls)
        types.extend(type.__subclasses__(cls))
        if not cls.__flags__ & _HEAP_TYPE:
            for tup in (cls.__bases__, cls.__mro__):
                if gc.is_tracked(tup) and sys.getrefcount(tup) >= immortal:
                    seen.add(id(tup))
    return len(seen)


_HEAP_TYPE: Final = 1 << 9
"""``Py_TPFLAGS_HEAPTYPE``: a class made at run time (static builtin types lack it)."""


class _KeyedDatabase(ExampleDatabase):
    """``database`` with each key under ``prefix``: Hypothesis keys a test by its source, alike for every race."""

    def __init__(self, database: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self.database = database
        self.prefix = prefix

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.database.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self.prefix + src, self.prefix + dest, value)

    def __repr__(self) -> str:
        return f"_KeyedDatabase({self.database!r}, prefix={self.prefix!r})"


def seed_for(seed: int | None, configured: settings, key: str) -> Hashable | None:
    """``seed``; else, under ``derandomize``, ``key``: each search its own fixed seed.

    Hypothesis derandomises a test with a seed from its source, alike for every search `explore` runs.
    """
    if seed is not None:
        return seed
    return key if configured.derandomize else None


def keyed_settings(configured: settings, key: str) -> settings:
    """``configured`` with its database (if any) keeping the failures saved under ``key`` apart from others'."""
    database = configured.database
    if database is None:
        return configured
    return settings(configured, database=_KeyedDatabase(database, key.encode() + b"/"))


def race_test(
    max_examples: int = 100, **explore_options: Any
) -> Callable[[Callable[[Race], Awaitable[Any]]], Callable[[], None]]:
    """Turn ``async def test_x(race)`` into a plain test that explores it (see `explore` for the options).

    Example::

        @race_test(max_examples=100)
        async def test_cache_creates_one_session(race):
            ...
    """

    def decorate(fn: Callable[[Race], Awaitable[Any]]) -> Callable[[], None]:
        @functools.wraps(fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def test() -> None:
            __tracebackhide__ = True
            explore(fn, max_examples=max_examples, **explore_options)

        del test.__wrapped__  # pytest must not see the `race` argument
        return test

    return decorate


# --- session caches ---------------------------------------------------------------------------------


class SessionCacheUnderTest(Protocol):
    """What `explore_session_cache` needs of a cache keyed by (server URL, run id)."""

    async def get(self, url: str, run_id: str) -> Any:
        """Get or create the client for (url, run_id); it offers ``call_tool(name, arguments)``."""

    async def cleanup(self, run_id: str) -> None:
        """Close every client of the run (the root agent's ``finally``)."""

    async def aclose(self) -> None:
        """Close everything."""


def explore_session_cache(
    make_cache: Callable[[], SessionCacheUnderTest],
    *,
    max_examples: int = 100,
    max_operations: int = 6,
    stagger: int = 3,
    database_key: str | None = None,
    settings: settings | None = None,
    servers: int = 2,
    run_ids: int = 2,
    max_hold: int = 1,
    options: FakeMCPOptions | None = None,
    seed: int | None = None,
) -> None:
    """Explore a session cache with a Hypothesis state machine: the program *and* its interleaving.

    Each example is a program of up to ``max_operations`` rules on keys (server, run id), with ``servers``
    in-process fakes as the servers and ``run_ids`` run ids: ``get_or_create`` (``cache.get(url, run_id)``),
    ``use`` (get, then a tool call through the client), ``cleanup`` (``cache.cleanup(run_id)``), ``expire``
    (once the key's session is open, its server loses it; the next use must open one new session),
    ``cancel`` (the latest get or use still running is cancelled where it stands) and ``settle`` (wait
    until every operation is done, then check). Each operation runs as a task; the next rule comes
    ``stagger`` loop turns later, and the explored schedule decides which task runs at each step, so
    operations overlap. Checked once the run is quiet:

    * at most one session live per key, and no live session the cache cannot hold (none for a run whose
      last operation to *begin* was a cleanup);
    * ``initialize`` ran at most once per key, plus once per cleanup of its run, expiry and cancelled caller;
    * no operation failed unless a cleanup of its run or an expiry of its key began after it did;
    * at the end, every key the cache still holds answers one more ``use`` (a lost session is reopened);
    * after ``aclose()``: no session live on any server, every HTTP client closed, no task left, no error
      unretrieved.

    ``max_hold``: each answer is held 0..max_hold virtual ticks by the fake (drawn); ``seed`` pins
    generation (as ``@hypothesis.seed``).

    Raises:
        RaceFailure: the shrunk failing program in words (Hypothesis also prints it as ``state.…`` lines),
            the schedule in words and the sequence diagram of each server that saw requests.
        NondeterminismError: the cache used a real socket, a thread or an executor.

    Example::

        def test_our_cache():
            explore_session_cache(lambda: OurCacheAdapter(), max_examples=100)
    """
    __tracebackhide__ = True
    from ._race_machine import CacheMachineParts, run_cache_machine

    if servers < 1 or run_ids < 1:
        raise ValueError(f"servers={servers!r} and run_ids={run_ids!r} must both be >= 1")
    choices = ServerChoices(max_hold=max_hold)

    def gate(fake: InProcessFake, counter: HTTPClientCounter, data: Any) -> Race:
        race = Race(fake._open_server(), counter, _Choices(data, _reporting()))
        fake.asgi = _ServerGate(fake.app, race, choices)
        return race

    parts = CacheMachineParts(
        schedules=schedules(),
        gate=gate,
        failure=RaceFailure,
        servers=servers,
        run_ids=run_ids,
        stagger=stagger,
        options=options,
    )
    configured = settings if settings is not None else race_settings(max_examples)
    configured = type(configured)(configured, stateful_step_count=max_operations + 1)  # + the first rule
    key = database_key or f"{getattr(make_cache, '__module__', '')}.{getattr(make_cache, '__qualname__', 'cache')}"
    run_cache_machine(make_cache, parts, settings=keyed_settings(configured, key), seed=seed_for(seed, configured, key))


# --- the suite --------------------------------------------------------------------------------------


def _outcome(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception()


async def _closed(client: ContractClient, race: Race) -> None:
    await client.aclose()
    await race.quiet()


class RaceSuite:
    """Subclass it with a ``make_client`` fixture to explore every race scenario on your MCP client.

    ``make_client`` returns a callable taking the fake's URL and returning your client, which offers
    ``await client.call_tool(name, arguments)`` and ``await client.aclose()`` (the same interface as
    `SessionReuseSuite`). Each scenario runs ``max_examples`` explored schedules on a clean in-process
    fake; knobs are class attributes. Example::

        import pytest
        from pytest_fake_mcp.races import RaceSuite

        class TestOurClientRaces(RaceSuite):
            @pytest.fixture
            def make_client(self):
                return lambda url: OurClient(url)

    Scenario oracles are checked once the run is quiet: an exception left unretrieved, a task left
    running, an HTTP client left open or a session left open on the fake fails the example.

    Set ``eras = ("handshake", "modern")`` to run each scenario once per era the fake serves: the oracles
    are era-neutral ("one ``initialize``" becomes "one ``server/discover`` and no session id" once the
    client went modern), and a scenario about sessions is skipped in the modern era, which has none.
    ``make_client`` may take the ``race_era`` fixture (e.g. to skip the modern era under mcp 1.x, whose
    client speaks only the handshake).
    """

    max_examples: ClassVar[int] = 50
    """Examples per scenario (raise it in a nightly job; a found failure is replayed first anyway)."""
    concurrency: ClassVar[int] = 3
    """Concurrent callers in the concurrency scenarios."""
    stagger: ClassVar[int] = 3
    """Loop turns between starting one caller and the next: under stock asyncio order the first caller is
    then a little ahead, as in real traffic; exploration finds the orders in which it is not."""
    options: ClassVar[FakeMCPOptions | None] = None
    hypothesis_settings: ClassVar[dict[str, Any]] = {}
    """Extra Hypothesis settings for every scenario, e.g. ``{"database": None}`` or ``{"phases": ...}``."""
    eras: ClassVar[tuple[str, ...]] = ()
    """Eras the fake serves, one run of each scenario per era (e.g. ``("handshake", "modern")``); empty: each
    scenario runs once, with the era of ``options`` (docs/eras.md)."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each scenario once per era of :attr:`eras`."""
        if self.eras and "race_era" in metafunc.fixturenames:
            metafunc.parametrize("race_era", list(self.eras), ids=[f"era-{era}" for era in self.eras])

    @pytest.fixture
    def race_era(self) -> str | None:
        """The era the fake serves in this scenario run (None: the era of ``options``)."""
        return None

    @pytest.fixture(autouse=True)
    def _race_era_in_use(self, race_era: str | None) -> None:
        self._era = race_era

    def _options(self) -> FakeMCPOptions | None:
        era = getattr(self, "_era", None)
        if era is None:
            return self.options
        return (self.options or FakeMCPOptions()).merged(era=era)

    def _skip_in_modern_era(self, why: str) -> None:
        if getattr(self, "_era", None) == "modern":
            pytest.skip(f"{why}: the 2026-07-28 era has no sessions")

    @pytest.fixture
    def make_client(self) -> Callable[[str], ContractClient]:
        raise NotImplementedError(
            f"{type(self).__name__} must define a `make_client` fixture returning a callable that takes the "
            "fake's URL and returns your client, e.g.\n\n    @pytest.fixture\n    def make_client(self):\n"
            "        return lambda url: OurClient(url)"
        )

    def _explore(
        self,
        name: str,
        scenario: Callable[[Race], Awaitable[Any]],
        choices: ServerChoices | None = None,
    ) -> None:
        __tracebackhide__ = True
        cls = type(self)
        era = getattr(self, "_era", None)
        explore(
            scenario,
            max_examples=self.max_examples,
            options=self._options(),
            choices=choices,
            database_key=f"{cls.__module__}.{cls.__qualname__}.{name}" + (f"[{era}]" if era else ""),
            settings=race_settings(self.max_examples, **self.hypothesis_settings),
        )

    # --- scenarios ---------------------------------------------------------------------------------

    def test_concurrent_first_calls_open_one_session_and_one_http_client(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """K first calls at once: one ``initialize``, one HTTP client, every call answered."""
        __tracebackhide__ = True
        k = self.concurrency

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            callers = await _staggered(race, client, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(client, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed: {failed}"
            _assert_set_up_once(race)
            _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("concurrent_first_calls", scenario)

    def test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """After one call, the session is lost before some request; K calls at once: one re-initialize per loss."""
        __tracebackhide__ = True
        self._skip_in_modern_era("a session loss needs a session")
        k = self.concurrency

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            await client.call_tool("echo", {"text": "first"})
            race.server.drop_session()
            callers = await _staggered(race, client, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(client, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed across one session loss: {failed}"
            race.server.assert_initialize_count(2)
            race.server.assert_no_stale_session_ids()
            _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("calls_across_session_loss", scenario)

    def test_aclose_racing_the_first_call_leaves_nothing_open(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """``aclose`` while the first call is opening the session: no session, task or HTTP client left."""
        __tracebackhide__ = True

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller-1")
            closer = race.spawn(client.aclose(), "closer")
            await asyncio.wait([caller, closer])
            error = _outcome(closer)
            assert error is None, f"aclose() raised {error!r} while the first call was in flight"
            _outcome(caller)  # retrieved, not judged: a call cut short by aclose() may raise
            await race.quiet()
            _assert_nothing_open(race)

        self._explore("aclose_racing_first_call", scenario)

    def test_caller_cancelled_while_its_session_opens_leaks_no_session(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """The first caller is cancelled at an explored point; a later call works; after aclose nothing is open."""
        __tracebackhide__ = True

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller-1")

            async def cancel() -> None:
                if await race.at_some_point(caller, "cancel caller-1"):
                    caller.cancel()

            canceller = race.spawn(cancel(), "canceller")
            await asyncio.wait([caller, canceller])
            if not caller.cancelled():
                caller.exception()
            await client.call_tool("echo", {"text": "after"})
            await _closed(client, race)
            _assert_nothing_open(race)

        self._explore("caller_cancelled_while_opening", scenario)

    def test_stateful_mixture_of_calls_losses_cancellation_and_close(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Hypothesis picks the operations (calls, session loss, restart, cancellation, close) and their order."""
        __tracebackhide__ = True
        operations = st.lists(st.sampled_from(("call", "call", "drop", "restart", "cancel", "close")), max_size=6)

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            program = race.draw(operations, "operations")
            note(f"operations: {program}")
            callers: list[asyncio.Task[Any]] = []
            others: list[asyncio.Task[Any]] = []
            for i, op in enumerate(program):
                if op == "call":
                    callers.append(race.spawn(client.call_tool("echo", {"text": str(i)}), f"caller-{len(callers) + 1}"))
                elif op == "drop":
                    race.server.drop_session()
                elif op == "restart":
                    race.server.restart()
                elif op == "cancel" and callers:
                    callers[-1].cancel()
                elif op == "close":
                    others.append(race.spawn(client.aclose(), f"closer-{len(others) + 1}"))
                await asyncio.sleep(0)
            if callers or others:
                await asyncio.wait([*callers, *others])
            for task in others:
                error = _outcome(task)
                assert error is None, f"{task.get_name()}: aclose() raised {error!r}"
            for task in callers:
                if not task.cancelled():
                    task.exception()  # any outcome is allowed: a call may meet a loss, a restart or a close
            await _closed(client, race)
            _assert_nothing_open(race)

        self._explore("stateful_mixture", scenario)


async def _staggered(race: Race, client: ContractClient, k: int, stagger: int) -> list[asyncio.Task[Any]]:
    callers = []
    for i in range(k):
        if i:
            for _ in range(stagger):
                await asyncio.sleep(0)
        callers.append(race.spawn(client.call_tool("echo", {"text": f"c{i}"}), f"caller-{i + 1}"))
    return callers


def _assert_set_up_once(race: Race) -> None:
    """One ``initialize`` (handshake era); one ``server/discover`` per client and no session id (modern era).

    The exchanges are read once for both questions (did the client go modern, how many ``initialize``); the
    server's assertion, whose snapshot of every figure costs more than the count, builds the message of a
    failure only.
    """
    __tracebackhide__ = True
    exchanges = race.server.exchanges
    if any(e.era == "modern" for e in exchanges):  # the client spoke the 2026-07-28 era: no sessions
        race.server.assert_discover_once()
        race.server.assert_no_session_ids()
    elif sum(e.rpc_method == "initialize" for e in exchanges) != 1:
        race.server.assert_initialize_count(1)


def _assert_one_http_client(race: Race) -> None:
    __tracebackhide__ = True
    race.http_clients.assert_created(1, talked_to=race.url)


def _assert_nothing_open(race: Race) -> None:
    """No session live on the fake, no HTTP client left open, no exchange still running."""
    __tracebackhide__ = True
    live = race.server.live_sessions
    assert not live, f"sessions left open on the server after aclose(): {[s.id[:8] for s in live]}"
    race.http_clients.assert_all_closed()
