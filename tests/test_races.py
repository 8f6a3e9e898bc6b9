"""pytest_fake_mcp.races: the reference client and cache pass; each broken one is found by exploration alone.

Our own race tests use no example database (``database=None``) or one in ``tmp_path``, so a failure
saved by one test never changes what another explores. Users get Hypothesis's default, ``.hypothesis/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import Phase
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from contract_clients import CrossTaskCloseClient, ReferenceClient
from pytest_fake_mcp._race import NondeterminismError
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.races import (
    Race,
    RaceFailure,
    RaceSuite,
    Schedule,
    ServerChoices,
    explore,
    explore_session_cache,
    race_settings,
    race_test,
)
from race_clients import BROKEN_CACHES, BROKEN_CLIENTS, LazyHTTPClientClient, ReferenceCache
from race_heldout import HELD_OUT

NO_DATABASE: dict[str, Any] = {"database": None}
FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}  # one seed: no flakes
FIND_LIMIT = 200  # the bound: every broken client is found within 200 examples

SCENARIO_TESTS = {
    "concurrent_first_calls": "test_concurrent_first_calls_open_one_session_and_one_http_client",
    "calls_across_session_loss": "test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss",
    "caller_cancelled_while_opening": "test_caller_cancelled_while_its_session_opens_leaks_no_session",
}


class TestReferenceClientRaces(RaceSuite):
    """The reference client passes every scenario (the full 1,000-example run is in bench/bench_races.py)."""

    max_examples = 25
    hypothesis_settings: ClassVar[dict[str, Any]] = NO_DATABASE

    @pytest.fixture
    def make_client(self) -> Any:
        return lambda url: ReferenceClient(url)


def _suite(
    client_cls: type[Any], *, settings: dict[str, Any], examples: int = FIND_LIMIT, search: int = 0
) -> RaceSuite:
    suite_cls = type(
        f"Races{client_cls.__name__}" + (f"Search{search}" if search else ""),
        (RaceSuite,),
        {"max_examples": examples, "hypothesis_settings": settings, "__module__": __name__},
    )
    return suite_cls()  # type: ignore[no-any-return]


# The budget: each broken client and cache is found within FIND_MEDIAN examples at the median and
# within FIND_LIMIT always. FIND_SEARCHES derandomised searches per bug, each under its own database key and
# so its own fixed seed: deterministic, no flakes. bench/bench_races.py --find measures the same on 20
# random seeds.
FIND_MEDIAN = 20
FIND_SEARCHES = 5
_FIRST_FAILURE: dict[str, Any] = {**FIND_ONLY, "report_multiple_bugs": False}  # stop at the first failure


def _examples_to_find_client(client_cls: type[Any], scenario: str, search: int) -> int | None:
    """Examples run up to the first failing one (None: not found within FIND_LIMIT)."""
    made: list[str] = []

    def make_client(url: str) -> Any:
        made.append(url)  # one client per example
        return client_cls(url)

    suite = _suite(client_cls, settings=_FIRST_FAILURE, search=search)
    try:
        getattr(suite, SCENARIO_TESTS[scenario])(make_client)
    except RaceFailure:
        return len(made) - 1  # Hypothesis runs the failing example once more to report it
    return None


def _examples_to_find_cache(cache_cls: type[Any], search: int, limit: int = FIND_LIMIT) -> int | None:
    made: list[Any] = []

    def make_cache() -> Any:
        made.append(cache_cls())  # one cache per example
        return made[-1]

    try:
        explore_session_cache(
            make_cache,
            max_examples=limit,
            database_key=f"{__name__}.{cache_cls.__qualname__}.search{search}",
            settings=race_settings(limit, **_FIRST_FAILURE),
        )
    except RaceFailure:
        return len(made) - 1
    return None


def _assert_within_budget(bug: str, counts: list[int | None]) -> None:
    __tracebackhide__ = True
    found = sorted(c for c in counts if c is not None)
    assert len(found) == len(counts), f"{bug}: not found within {FIND_LIMIT} examples in some searches: {counts}"
    assert statistics.median(found) <= FIND_MEDIAN, (
        f"{bug}: found after a median of {statistics.median(found)} examples (budget {FIND_MEDIAN}): {counts}"
    )


@pytest.mark.parametrize("bug", list(BROKEN_CLIENTS))
def test_each_broken_client_is_found_by_exploration_alone_within_the_budget(bug: str) -> None:
    client_cls, scenario = BROKEN_CLIENTS[bug]
    counts = [_examples_to_find_client(client_cls, scenario, search) for search in range(FIND_SEARCHES)]
    _assert_within_budget(bug, counts)


@pytest.mark.parametrize("bug", list(BROKEN_CACHES))
def test_each_broken_cache_is_found_by_exploration_alone_within_the_budget(bug: str) -> None:
    counts = [_examples_to_find_cache(BROKEN_CACHES[bug], search) for search in range(FIND_SEARCHES)]
    _assert_within_budget(bug, counts)


def test_the_budget_check_fails_a_bug_found_too_late_or_never() -> None:
    _assert_within_budget("fast", [1, 30, 4, 20, 199])
    with pytest.raises(AssertionError, match="median of 25"):
        _assert_within_budget("slow", [25, 30, 4, 20, 199])
    with pytest.raises(AssertionError, match="not found within 200 examples"):
        _assert_within_budget("missed", [1, None, 4, 2, 3])


def test_the_reference_session_cache_passes_the_cache_exploration() -> None:
    explore_session_cache(ReferenceCache, max_examples=30, settings=race_settings(30, **NO_DATABASE))


def test_a_call_cancelled_at_any_step_leaves_the_reference_client_usable() -> None:
    # mcp 1.x ends a session whose cancelled request's answer arrives in the step the cancel lands: the next
    # request on it is refused unsent (ClosedResourceError). The client opens a new session for it. One run
    # cancels a call at every step of its life in turn, each time checking the next call answers.
    async def scenario(race: Race) -> None:
        client = ReusingSessionClient(race.url, read_timeout=1.0)
        try:
            await client.connect()
            for turns in range(40):
                call = asyncio.ensure_future(client.call_tool("echo", {"text": f"cancelled after {turns}"}))
                for _ in range(turns):
                    await asyncio.sleep(0)
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call
                result = await client.call_tool("echo", {"text": "next"})
                assert result.content[0].text == "next", f"the call after one cancelled after {turns} turns: {result}"
        finally:
            await client.aclose()

    explore(scenario, max_examples=1, schedule_strategy=st.just(Schedule()), settings=race_settings(1, **NO_DATABASE))


def test_a_failure_reads_as_the_shrunk_schedule_the_choices_and_the_diagram() -> None:
    suite = _suite(LazyHTTPClientClient, settings=NO_DATABASE)
    with pytest.raises(RaceFailure) as info:
        suite.test_concurrent_first_calls_open_one_session_and_one_http_client(LazyHTTPClientClient)
    message = str(info.value)
    assert "Schedule: Schedule(" in message
    assert "in words: " in message
    assert "ran ahead of" in message  # the first out-of-order steps, naming tasks and where they stood
    assert "caller-1" in message
    assert "The failing run on the wire" in message
    cause = str(info.value.__cause__)
    assert (message + cause).count("client ── initialize") == 1  # once: the cause's, else the report's
    assert "HTTP clients was not closed" in message + cause or "HTTP clients" in message + cause
    assert "docs/failure-modes.md#t01" not in message  # the owner-task hint only for its error
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Draw 1 (schedule): Schedule(" in notes  # the Hypothesis choices
    assert "(hold request 1): " in notes  # each of the fake's draws, though drawn straight from the choices
    # print_blob, as the suite's class attribute (keyed by the scenario's name here: run outside pytest)
    assert "adding this class attribute to RacesLazyHTTPClientClient: reproduce = {'concurrent_first_calls': (" in notes
    # The schedule shrank to one or two numbers.
    found = re.search(r"Schedule: Schedule\(priorities=(\[[^\]]*\]), change_points=(\[[^\]]*\])\)", str(info.value))
    assert found is not None
    priorities, changes = eval(found.group(1)), eval(found.group(2))
    assert sum(1 for p in priorities if p) + len(changes) <= 2, found.group(0)


def test_without_direct_draws_the_engine_draws_with_strategies_and_reports_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Hypothesis whose choice data lacks draw_integer/draw_boolean: strategies instead, the same report."""
    from pytest_fake_mcp._race._draws import ExampleDraws

    original = ExampleDraws.__init__

    def without_direct_draws(self: Any, data: Any, reporting: bool) -> None:
        original(self, data, reporting)
        self.direct = False

    monkeypatch.setattr(ExampleDraws, "__init__", without_direct_draws)
    suite = _suite(LazyHTTPClientClient, settings=NO_DATABASE)
    with pytest.raises(RaceFailure) as info:
        suite.test_concurrent_first_calls_open_one_session_and_one_http_client(LazyHTTPClientClient)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Draw 1 (schedule): Schedule(" in notes
    assert "(hold request 1): " in notes
    found = re.search(r"Schedule: Schedule\(priorities=(\[[^\]]*\]), change_points=(\[[^\]]*\])\)", str(info.value))
    assert found is not None
    assert sum(1 for p in eval(found.group(1)) if p) + len(eval(found.group(2))) <= 2, found.group(0)


def test_a_schedule_strategy_replaces_the_drawn_schedule() -> None:
    schedule = Schedule(priorities=(0, 2), change_points=(5,))

    async def failing(race: Race) -> None:
        await asyncio.sleep(0)
        raise AssertionError("fails under every schedule")

    with pytest.raises(RaceFailure, match=re.escape(f"Schedule: {schedule}")):
        explore(failing, max_examples=5, schedule_strategy=st.just(schedule), settings=race_settings(5, **NO_DATABASE))


def _gated_calls(events: list[str]) -> Any:
    """Two calls through the reference client; the race gate's notes in the journal go to ``events``."""

    async def scenario(race: Race) -> None:
        client = ReferenceClient(race.url)
        for text in ("a", "b", "c"):
            with contextlib.suppress(Exception):  # a drawn 503 fails the call: allowed here
                await client.call_tool("echo", {"text": text})
        await client.aclose()
        events.extend(event.text for event in race.server.journal.events)

    return scenario


def test_server_choices_lose_sessions_and_answer_statuses_drawn_per_request() -> None:
    events: list[str] = []
    choices = ServerChoices(lose_sessions=1, status_errors=(503,))
    explore(_gated_calls(events), max_examples=30, choices=choices, settings=race_settings(30, **FIND_ONLY))
    assert any(re.match(r"race: session \w{8} lost before request \d+ -> \['\w+'\]", e) for e in events), events
    assert any(re.fullmatch(r"race: request \d+ answered 503 by the race gate", e) for e in events), events
    assert sum(e.startswith("race: session") for e in events) <= 30, "at most one loss per example"


def test_without_server_choices_no_session_is_lost_and_no_status_drawn() -> None:
    events: list[str] = []
    explore(_gated_calls(events), max_examples=10, settings=race_settings(10, **FIND_ONLY))
    assert events == []


def test_a_reported_example_notes_each_loss_and_status_the_gate_drew() -> None:
    async def scenario(race: Race) -> None:
        await _gated_calls([])(race)
        assert not race.server.journal.events, "the gate lost a session or answered a status"

    choices = ServerChoices(lose_sessions=1, status_errors=(503,))
    with pytest.raises(RaceFailure) as info:
        explore(scenario, max_examples=50, choices=choices, settings=race_settings(50, **NO_DATABASE))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert re.search(r"\(lose before \d+\): True|\(status of request \d+\): 503", notes), notes


# --- Race.at_some_point --------------------------------------------------------------------------------


def _watched_call(reached: list[tuple[bool, str]], **bounds: int) -> Any:
    """A scenario: one call, and a watcher that waits for an explored point of it and records the point."""

    async def scenario(race: Race) -> None:
        client = ReferenceClient(race.url)
        caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller")

        async def watch() -> None:
            running = await race.at_some_point(caller, "watch", **bounds)
            reached.append((running, race.points[-1]))

        watcher = race.spawn(watch(), "watcher")
        await asyncio.wait([caller, watcher])
        await client.aclose()

    return scenario


def test_at_some_point_spreads_over_the_exchanges_and_says_where_it_landed() -> None:
    reached: list[tuple[bool, str]] = []
    one_seed = race_settings(40, database=None, derandomize=True)  # the spread is checked on a fixed search
    explore(_watched_call(reached, wire_events=10, turns=0), max_examples=40, settings=one_seed)
    during = {point.split("when the fake had ", 1)[1] for running, point in reached if running}
    assert "received nothing yet" in during
    assert "received initialize" in during
    assert any(state.startswith("answered initialize (200)") for state in during), during
    assert any(
        state.startswith("answered initialize (200), answered notifications/initialized (202)") for state in during
    )
    after = [point for running, point in reached if not running]
    assert after, "some points fall after the call ended (8 wire events: 4 exchanges)"
    assert all(point.endswith("but caller had finished already") for point in after), after


def test_at_some_point_returns_false_at_once_for_a_task_already_done() -> None:
    async def scenario(race: Race) -> None:
        client = ReferenceClient(race.url)
        caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller")
        await caller
        assert await race.at_some_point(caller, "late") is False
        assert len(race.points) == 1
        assert race.points[0].startswith("late: after ")
        assert race.points[0].endswith("but caller had finished already")
        await client.aclose()

    explore(scenario, max_examples=10, settings=race_settings(10, **NO_DATABASE))


def test_at_some_point_at_zero_and_zero_returns_at_once() -> None:
    reached: list[tuple[bool, str]] = []
    one_seed = race_settings(3, database=None, derandomize=True)
    explore(_watched_call(reached, wire_events=0, turns=0), max_examples=3, settings=one_seed)
    # Nothing drawn, no wait: the watcher's first step is the point. Where the caller stands then is the
    # schedule's doing (a schedule that runs it first gets its initialize to the fake before that step).
    assert reached
    assert all(point.startswith("watch: after 0 wire event(s) and 0 more loop turn(s), ") for _, point in reached)
    assert (True, "watch: after 0 wire event(s) and 0 more loop turn(s), when the fake had received nothing yet") in (
        reached
    )  # stock asyncio's order, the first example of the search


def test_at_some_point_rejects_negative_bounds() -> None:
    async def scenario(race: Race) -> None:
        task = race.spawn(asyncio.sleep(0), "sleeper")
        with pytest.raises(ValueError, match=r"wire_events=-1 and turns=0 must both be >= 0"):
            await race.at_some_point(task, "bad", wire_events=-1, turns=0)
        with pytest.raises(ValueError, match=r"turns=-2"):
            await race.at_some_point(task, "bad", turns=-2)
        await task

    explore(scenario, max_examples=1, settings=race_settings(1, **NO_DATABASE))


def test_a_failure_lists_the_explored_points_the_run_reached() -> None:
    client_cls, scenario = BROKEN_CLIENTS["cancellation leaks a session"]
    suite = _suite(client_cls, settings=NO_DATABASE)
    with pytest.raises(RaceFailure) as info:
        getattr(suite, SCENARIO_TESTS[scenario])(client_cls)
    message = str(info.value)
    point = re.search(
        r"Explored points reached:\n  - cancel caller-1: after (\d+) wire event\(s\) and (\d+) more", message
    )
    assert point is not None, message
    # Shrunk to the earliest failing point: with the initialize on its way or just received, nothing later.
    assert int(point.group(1)) <= 1, message
    assert "when the fake had received nothing yet\n" in message or "when the fake had received initialize\n" in message


# --- explore / race_test: the user's own coroutine ----------------------------------------------------


class _NaiveCache:
    """A cache with its own API and a check-then-act across the session's opening."""

    def __init__(self) -> None:
        self.clients: dict[str, ReferenceClient] = {}
        self.made: list[ReferenceClient] = []

    async def get(self, url: str) -> ReferenceClient:
        if url not in self.clients:
            client = ReferenceClient(url)
            self.made.append(client)
            await client.connect()
            self.clients[url] = client
        return self.clients[url]

    async def aclose(self) -> None:
        for client in self.made:
            await client.aclose()


def test_a_search_describes_only_the_example_hypothesis_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    described: list[str] = []
    original = Schedule.describe

    def describe(self: Schedule, names: dict[int, str]) -> str:
        described.append(str(self))
        return original(self, names)

    monkeypatch.setattr(Schedule, "describe", describe)

    async def passing(race: Race) -> None:
        await asyncio.sleep(0)

    explore(passing, max_examples=20, settings=race_settings(20, **NO_DATABASE))
    assert described == []  # no example was reported: none was put in words

    async def failing(race: Race) -> None:
        await asyncio.sleep(0)
        raise AssertionError("fails under every schedule")

    with pytest.raises(RaceFailure, match="in words: FIFO"):
        explore(failing, max_examples=20, settings=race_settings(20, **NO_DATABASE))
    assert described  # the reported example: its note and its report


async def _two_getters(race: Race, cache: _NaiveCache) -> None:
    first = race.spawn(cache.get(race.url), "getter-1")
    for _ in range(3):
        await asyncio.sleep(0)
    second = race.spawn(cache.get(race.url), "getter-2")
    await asyncio.gather(first, second)
    await cache.aclose()
    await race.quiet()


def test_explore_finds_a_race_in_the_users_own_cache() -> None:
    async def scenario(race: Race) -> None:
        await _two_getters(race, _NaiveCache())
        race.server.assert_initialize_count(1)

    with pytest.raises(RaceFailure, match="initialize"):
        explore(scenario, max_examples=FIND_LIMIT, settings=race_settings(FIND_LIMIT, **FIND_ONLY))


def test_a_context_closed_from_another_task_gets_the_owner_task_hint() -> None:
    async def scenario(race: Race) -> None:
        client = CrossTaskCloseClient(race.url)  # enters the SDK's contexts in caller-1, exits them here
        await race.spawn(client.call_tool("echo", {"text": "a"}), "caller-1")
        await client.aclose()

    with pytest.raises(RaceFailure) as info:
        explore(scenario, max_examples=5, settings=race_settings(5, **FIND_ONLY))
    message = str(info.value)
    assert "cancel scope in a different task" in message
    assert "Hint: enter and exit the SDK's contexts (streamable_http_client, ClientSession) in one task" in message
    assert "(docs/failure-modes.md#t01)" in message


@race_test(max_examples=10, settings=race_settings(10, **NO_DATABASE))
async def test_race_test_runs_a_passing_coroutine_under_explored_schedules(race: Race) -> None:
    client = ReferenceClient(race.url)
    await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
    await client.aclose()
    await race.quiet()
    race.server.assert_initialize_count(1)
    race.server.assert_all_sessions_closed()


def test_every_example_meets_a_clean_fake_though_explore_shares_one() -> None:
    """Each example starts with no session, no exchange and no client of the examples before it."""
    seen: list[tuple[int, int, int]] = []

    async def scenario(race: Race) -> None:
        seen.append((len(race.server.journal.exchanges), len(race.server.live_sessions), race.http_clients.count))
        client = ReferenceClient(race.url)
        await client.call_tool("echo", {"text": "a"})
        race.server.drop_session()  # a session lost and one left open: the next example must not see either
        await client.call_tool("echo", {"text": "b"})
        await client.aclose()

    explore(scenario, max_examples=8, settings=race_settings(8, **NO_DATABASE))
    assert len(seen) > 1
    assert set(seen) == {(0, 0, 0)}


def test_explore_leaves_the_garbage_collector_as_it_found_it() -> None:
    """Python 3.12's collector keeps immortal objects in the permanent generation: a count that is not a freeze."""
    frozen_during: list[int] = []

    async def scenario(race: Race) -> None:
        frozen_during.append(gc.get_freeze_count())
        await asyncio.sleep(0)

    gc.collect()
    assert gc.isenabled()
    before = gc.get_freeze_count()
    explore(scenario, max_examples=3, settings=race_settings(3, **NO_DATABASE))
    assert gc.isenabled()
    assert gc.get_freeze_count() <= before  # on 3.12 the unfrozen immortal objects go back at the next collection
    gc.collect()
    assert gc.get_freeze_count() == before
    assert min(frozen_during) > before + 1000  # what was alive before the test was frozen while it ran
    gc.freeze()  # someone else's frozen objects stay frozen
    try:
        explore(scenario, max_examples=3, settings=race_settings(3, **NO_DATABASE))
        assert gc.get_freeze_count() > before + 1000  # not unfrozen (objects that died since have left it)
    finally:
        gc.unfreeze()


def test_each_search_saves_its_failures_under_its_own_key() -> None:
    """Hypothesis keys a test by its source, alike for every search `explore` runs: the key keeps them apart."""
    database = InMemoryExampleDatabase()

    async def failing(race: Race) -> None:
        await asyncio.sleep(0)
        raise AssertionError("fails under every schedule")

    for key in ("search-a", "search-b"):
        with pytest.raises(RaceFailure):
            explore(failing, max_examples=5, settings=race_settings(5, database=database), database_key=key)
    prefixes = {key.split(b"/", 1)[0] for key in database.data}
    assert prefixes == {b"search-a", b"search-b"}


def test_a_real_socket_in_a_race_fails_at_once_naming_it() -> None:
    async def scenario(race: Race) -> None:
        await asyncio.open_connection("127.0.0.1", 9)

    with pytest.raises(NondeterminismError, match="real socket"):
        explore(scenario, max_examples=5, settings=race_settings(5, **NO_DATABASE))


def test_the_races_module_exports_exactly_its_public_names() -> None:
    import pytest_fake_mcp.races as races

    assert races.__all__ == sorted(races.__all__)
    assert set(races.__all__) == {
        "Deadlock", "Livelock", "NondeterminismError", "Race", "RaceFailure", "RaceSuite", "Schedule",
        "ServerChoices", "SessionCacheUnderTest", "explore", "explore_session_cache", "race_settings",
        "race_test", "schedules",
    }  # fmt: skip


EXPLORE_KEYWORDS = [
    "max_examples", "options", "choices", "schedule_strategy", "allow_leftover_tasks", "allow_loop_errors",
    "database_key", "settings", "seed", "reproduce", "shrink_seconds", "shrink_again",
]  # fmt: skip


def test_explore_keeps_its_public_signature_and_its_keywords_are_declared_once() -> None:
    import ast
    import inspect

    import pytest_fake_mcp._race._explore as module

    parameters = inspect.signature(explore).parameters
    assert list(parameters) == ["scenario", *EXPLORE_KEYWORDS]
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in EXPLORE_KEYWORDS)
    tree = ast.parse(inspect.getsource(module))
    declaring = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and {a.arg for a in node.args.kwonlyargs} >= set(EXPLORE_KEYWORDS)
    ]
    assert declaring == ["explore"]  # race_test and RaceSuite call explore itself: one list to keep


def test_only_the_races_module_imports_hypothesis() -> None:
    code = (
        "import sys, pytest_fake_mcp._host._inprocess, pytest_fake_mcp._race._loop; print('hypothesis' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_schedule_in_words() -> None:
    names = {0: "main", 1: "caller-1", 2: "caller-2"}
    assert Schedule().describe(names) == "FIFO (stock asyncio order)"
    described = Schedule(priorities=(0, 0, 1), change_points=(3,)).describe(names)
    assert "caller-2 = 1" in described
    assert "decision(s) 3" in described


# --- replay in a new process ------------------------------------------------------------------------------

_REPLAY_TEST = """
import atexit
import pytest
import pytest_fake_mcp._race._explore as explore_module
from hypothesis import Phase
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from race_clients import LazyHTTPClientClient
from pytest_fake_mcp.races import RaceSuite

class TestReplay(RaceSuite):
    max_examples = 200
    hypothesis_settings = {{
        "database": DirectoryBasedExampleDatabase({db!r}),
        "phases": (Phase.reuse, Phase.generate),  # no shrinking: the replay is what is tested
    }}

    @pytest.fixture
    def make_client(self):
        return lambda url: LazyHTTPClientClient(url)

EXAMPLES = []
_run_example = explore_module.run_example

def counting_run_example(*args, **kwargs):
    EXAMPLES.append(1)
    return _run_example(*args, **kwargs)

explore_module.run_example = counting_run_example
atexit.register(lambda: print(f"examples run: {{len(EXAMPLES)}}"))
"""


def _run_replay(path: Path, hash_seed: str) -> str:
    tests_dir = Path(__file__).parent
    src = tests_dir.parent / "src"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": os.pathsep.join([str(src), str(tests_dir)])}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(path), "-k",
         "concurrent_first_calls", "--hypothesis-show-statistics"],
        env=env, capture_output=True, text=True, timeout=300, cwd=path.parent, check=False,
    )  # fmt: skip
    return out.stdout + out.stderr


def _report_lines(output: str) -> list[str]:
    keep = ("Schedule: ", "in words: ", "ran ahead of", "trace: ")
    return [line.strip() for line in output.splitlines() if line.startswith("E ") and any(k in line for k in keep)]


def test_a_found_failure_replays_identically_in_a_new_process(tmp_path: Path) -> None:
    test_file = tmp_path / "test_replay_inner.py"
    test_file.write_text(textwrap.dedent(_REPLAY_TEST.format(db=str(tmp_path / "db"))))
    first = _run_replay(test_file, "1")
    second = _run_replay(test_file, "2")
    assert "1 failed" in first, first[-3000:]
    assert "1 failed" in second, second[-3000:]
    assert _report_lines(first), first[-3000:]
    assert _report_lines(first) == _report_lines(second)
    # The second process failed on the saved example first: one run to find it, one to report it.
    ran = [int(m) for m in re.findall(r"examples run: (\d+)", first + "\n" + second)]
    assert len(ran) == 2, (first + second)[-2000:]
    assert ran[1] <= 2, ran


HELD_OUT_BUDGET = 100
"""Hypothesis's default budget: each held-out race is found within it in every one of the fixed searches."""


@pytest.mark.parametrize("bug", list(HELD_OUT))
def test_each_held_out_cache_race_is_found_by_exploration_alone_within_the_default_budget(bug: str) -> None:
    # Cache races written apart from the machine's encoding (tests/race_heldout.py). Their medians over 20 seeds are
    # the bench's to measure (docs/races.md, "How many examples it takes": 3 to 16, found in 20 of 20 seeds on both
    # SDK lines); five fixed searches are too few for a median, so each is held to the rate instead: found
    # within the default budget by 4 of 5 (9 of 10 seeds). A change to the encoding that loses one fails here.
    counts = [_examples_to_find_cache(HELD_OUT[bug], search, HELD_OUT_BUDGET) for search in range(FIND_SEARCHES)]
    found = sum(count is not None for count in counts)
    assert found >= FIND_SEARCHES - 1, f"{bug}: not found within {HELD_OUT_BUDGET} valid examples in {counts}"
