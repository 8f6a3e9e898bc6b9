"""explore_session_cache: a session cache keyed by (server URL, run id), explored with the session-cache machine.

`SessionCacheUnderTest` is what it needs of the cache; the machine itself (`_machine`, a Hypothesis
rule-based state machine) is imported only when a cache is explored.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from hypothesis import Phase

from ._draws import is_reporting
from ._example import Race
from ._example_run import RaceFailure
from ._explore import Advice, advise, keyed_settings, run_bounded, seed_for, settings_for
from ._schedule import schedules
from ._search import SearchBudget
from ._server_choices import ServerChoices, ServerChoicesMiddleware

if TYPE_CHECKING:
    from collections.abc import Callable

    from hypothesis import settings

    from .._host._inprocess import InProcessFake
    from .._record._counters import HTTPClientCounter
    from .._wire._options import FakeMCPOptions
    from ._logs import LogWatch
    from ._program import Outcome, Program

__all__ = ["SessionCacheUnderTest", "explore_session_cache"]


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
    max_examples: int | None = None,
    max_operations: int = 8,
    stagger: int = 3,
    database_key: str | None = None,
    settings: settings | None = None,
    servers: int = 2,
    run_ids: int = 2,
    max_hold: int = 1,
    options: FakeMCPOptions | None = None,
    seed: int | None = None,
    reproduce: tuple[str, bytes] | None = None,
    shrink_seconds: float | None = None,
    shrink_again: bool | None = None,
) -> None:
    """Explore a session cache with a Hypothesis state machine: the program *and* its interleaving.

    Each example is a program of up to ``max_operations`` rules on keys (server, run id), with ``servers``
    in-process fakes as the servers and ``run_ids`` run ids: ``get_or_create`` (``cache.get(url, run_id)``),
    ``use`` (get, then a tool call through the client), ``cleanup`` (``cache.cleanup(run_id)`` of a key's run),
    ``expire`` (once the key's session is open, its server loses it; the next use must open one new session),
    ``cancel`` (the latest get or use still running is cancelled where it stands), ``race_cold``,
    ``race_cached`` and ``race_lost`` (three gets, uses or cleanups at once on a key and its neighbours, from
    a key not cached yet, cached, or cached and lost, a drawn number of loop turns apart, the last one maybe
    cancelled) and ``settle`` (wait until every operation is done, then
    check). Each operation runs as a task at a drawn priority that the tasks it starts inherit; the next rule
    comes ``stagger`` loop turns later (a race's operations: their drawn gap, up to twice that), and the
    explored schedule decides which task runs at each step, so operations overlap. Checked once the run is
    quiet:

    * at most one session live per key, and no live session the cache cannot hold (none for a run whose
      last operation to *begin* was a cleanup);
    * ``initialize`` ran at most once per key, plus once per cleanup of its run, expiry and cancelled caller;
    * no operation failed, or ended cancelled without being cancelled (another caller's cancel reached it),
      unless a cleanup of its run or an expiry of its key began after it did;
    * at the end, every key the cache still holds answers one more ``use`` (a lost session is reopened);
    * after ``aclose()``: no session live on any server, every HTTP client closed, no task left, no error
      unretrieved.

    ``max_examples``: the loaded Hypothesis profile's unless given (it wins over ``settings``'). ``max_hold``:
    each answer is held 0..max_hold virtual ticks by the fake (drawn); ``seed`` pins
    generation (as ``@hypothesis.seed``); ``reproduce=(version, blob)`` runs exactly the program a failure printed
    (as ``@hypothesis.reproduce_failure``: the failure says which argument to add); ``shrink_seconds``,
    ``shrink_again``: as `explore`'s (shrinking bounded in time; a stored failure replayed as it is).

    Raises:
        RaceFailure: the shrunk failing program in words, without the steps its failure turned out not to need
            when replayed without them (docs/races.md#the-failing-program-shortened; Hypothesis prints the
            whole program as ``state.…`` lines), the schedule in words and the sequence diagram of each server
            that saw requests.
        NondeterminismError: the cache used a real socket, a thread or an executor.

    Example::

        def test_our_cache():
            explore_session_cache(lambda: OurCacheAdapter(), max_examples=100)
    """
    __tracebackhide__ = True
    from ._machine import CacheMachineParts, cache_machine, run_cache_machine

    if servers < 1 or run_ids < 1:
        raise ValueError(f"servers={servers!r} and run_ids={run_ids!r} must both be >= 1")
    choices = ServerChoices(max_hold=max_hold)
    budget = SearchBudget(shrink_seconds=shrink_seconds, shrink_again=shrink_again)

    def gate(fake: InProcessFake, counter: HTTPClientCounter, draws: Any) -> Race:
        race = Race(fake.open_server(), counter, draws)
        fake.asgi = ServerChoicesMiddleware(fake.app, race, choices)
        return race

    parts = CacheMachineParts(
        schedules=schedules(),
        gate=gate,
        failure=RaceFailure,
        servers=servers,
        run_ids=run_ids,
        stagger=stagger,
        options=options,
        budget=_MachineBudget(budget),
        remarks=lambda: budget.remarks(_ADVICE.setting),
        logs=budget.logs.lines,
    )
    shortening = _Shortening(budget.logs)
    machine = cache_machine(make_cache, dataclasses.replace(parts, recorded=shortening.recorded))
    shortening.machine = machine
    configured = settings_for(max_examples, settings)
    configured = type(configured)(configured, stateful_step_count=max_operations + 1)  # + the first rule
    key = database_key or f"{getattr(make_cache, '__module__', '')}.{getattr(make_cache, '__qualname__', 'cache')}"
    try:
        settings_keyed = keyed_settings(configured, key, budget)
        pinned = seed_for(seed, configured, key)

        def search(reproduce: tuple[str, bytes] | None = reproduce) -> None:
            run_cache_machine(machine, settings=settings_keyed, seed=pinned, reproduce=reproduce)

        with budget.logs:
            try:
                run_bounded(search, budget, _ADVICE, replay=search)
            except RaceFailure as error:
                shorter = shortening.of(error) if Phase.shrink in configured.phases else None
                reported = error if shorter is None else shorter
                # Raised here, without the frames it passed through (the machine's, Hypothesis's stateful runner,
                # its teardown): pytest shows the test's line and the report, which says where each task stood.
                raise reported.with_traceback(None) from reported.__cause__
    except BaseException as error:
        advise(error, _ADVICE)
        raise
    finally:
        shortening.release()


class _MachineBudget:
    """What the machine tells the search's budget: each example's beginning (past the shrinking bound, the search
    stops there and its best example is replayed) and each failure."""

    def __init__(self, budget: SearchBudget) -> None:
        self.budget = budget

    def begin(self, data: Any) -> None:
        self.budget.data = data
        self.budget.check(is_reporting())

    def failed(self) -> None:
        self.budget.failed()


class _Shortening:
    """The reported failure's program, shortened to the steps the failure needs (`shorten`, in ``_program``)."""

    def __init__(self, logs: LogWatch) -> None:
        self.logs = logs
        self.machine: type[Any] | None = None
        self.last: tuple[Outcome, Program] | None = None

    def recorded(self, outcome: Outcome, program: Program) -> None:
        self.last = (outcome, program)

    def release(self) -> None:
        """The search is over: let go of its last failure (its run's loop, fakes and cache), which the machine
        class, kept by Hypothesis, reaches through `recorded`."""
        self.last = None
        self.machine = None

    def of(self, error: RaceFailure) -> AssertionError | None:
        """The failure of ``error``'s program without the steps it does not need, with ``error``'s notes; None if
        ``error`` is not the run recorded last, or every step matters."""
        from ._machine import replay_cache_program
        from ._program import shorten

        machine = self.machine
        if machine is None or self.last is None or self.last[0].failure is not error:
            return None
        original, program = self.last
        self.last = None

        def replay(left_out: frozenset[int]) -> Outcome | None:
            self.logs.begin(previous_passed=False)  # the report's log records are the replay's own
            return replay_cache_program(machine, program, left_out)

        found = shorten(program, original, replay)
        if found is None:
            return None
        failure = found[1].failure
        for note in getattr(error, "__notes__", []):
            failure.add_note(note)
        return failure


_ADVICE = Advice("explore_session_cache()")
