"""explore_session_cache: a session cache keyed by (server URL, run id), explored with the session-cache machine.

`SessionCacheUnderTest` is what it needs of the cache; the machine itself (`_machine`, a Hypothesis
rule-based state machine) is imported only when a cache is explored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._draws import ExampleDraws, is_reporting
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
        RaceFailure: the shrunk failing program in words (Hypothesis also prints it as ``state.…`` lines),
            the schedule in words and the sequence diagram of each server that saw requests.
        NondeterminismError: the cache used a real socket, a thread or an executor.

    Example::

        def test_our_cache():
            explore_session_cache(lambda: OurCacheAdapter(), max_examples=100)
    """
    __tracebackhide__ = True
    from ._machine import CacheMachineParts, run_cache_machine

    if servers < 1 or run_ids < 1:
        raise ValueError(f"servers={servers!r} and run_ids={run_ids!r} must both be >= 1")
    choices = ServerChoices(max_hold=max_hold)
    budget = SearchBudget(shrink_seconds=shrink_seconds, shrink_again=shrink_again)

    def gate(fake: InProcessFake, counter: HTTPClientCounter, data: Any) -> Race:
        budget.data = data
        race = Race(fake.open_server(), counter, ExampleDraws(data, is_reporting()))
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
    configured = settings_for(max_examples, settings)
    configured = type(configured)(configured, stateful_step_count=max_operations + 1)  # + the first rule
    key = database_key or f"{getattr(make_cache, '__module__', '')}.{getattr(make_cache, '__qualname__', 'cache')}"
    try:
        settings_keyed = keyed_settings(configured, key, budget)
        pinned = seed_for(seed, configured, key)

        def search(reproduce: tuple[str, bytes] | None = reproduce) -> None:
            run_cache_machine(make_cache, parts, settings=settings_keyed, seed=pinned, reproduce=reproduce)

        with budget.logs:
            run_bounded(search, budget, _ADVICE, replay=search)
    except BaseException as error:
        advise(error, _ADVICE)
        raise


class _MachineBudget:
    """What the machine tells the search's budget: each example's beginning (past the shrinking bound, the search
    stops there and its best example is replayed) and each failure."""

    def __init__(self, budget: SearchBudget) -> None:
        self.budget = budget

    def begin(self) -> None:
        self.budget.check(is_reporting())

    def failed(self) -> None:
        self.budget.failed()


_ADVICE = Advice("explore_session_cache()")
