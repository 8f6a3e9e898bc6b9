"""pytest_fake_mcp.races: the reference client and cache pass; each broken one is found by exploration alone.

Our own race tests use no example database (``database=None``) or one in ``tmp_path``, so a failure
saved by one test never changes what another explores. Users get Hypothesis's default, ``.hypothesis/``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import Phase

from contract_clients import ReferenceClient
from pytest_fake_mcp._loop import NondeterminismError
from pytest_fake_mcp.races import (
    Race,
    RaceFailure,
    RaceSuite,
    Schedule,
    explore,
    explore_session_cache,
    race_settings,
    race_test,
)
from race_clients import BROKEN_CACHES, BROKEN_CLIENTS, LazyHTTPClientClient, ReferenceCache

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


def _suite(client_cls: type[Any], *, settings: dict[str, Any], examples: int = FIND_LIMIT) -> RaceSuite:
    suite_cls = type(
        f"Races{client_cls.__name__}",
        (RaceSuite,),
        {"max_examples": examples, "hypothesis_settings": settings, "__module__": __name__},
    )
    return suite_cls()  # type: ignore[no-any-return]


@pytest.mark.parametrize("bug", list(BROKEN_CLIENTS))
def test_each_broken_client_is_found_by_exploration_alone(bug: str) -> None:
    client_cls, scenario = BROKEN_CLIENTS[bug]
    suite = _suite(client_cls, settings=FIND_ONLY)
    with pytest.raises(RaceFailure):
        getattr(suite, SCENARIO_TESTS[scenario])(lambda url: client_cls(url))


@pytest.mark.parametrize("bug", list(BROKEN_CACHES))
def test_each_broken_cache_is_found_by_exploration_alone(bug: str) -> None:
    with pytest.raises(RaceFailure):
        explore_session_cache(
            BROKEN_CACHES[bug], max_examples=FIND_LIMIT, settings=race_settings(FIND_LIMIT, **FIND_ONLY)
        )


def test_the_reference_session_cache_passes_the_cache_exploration() -> None:
    explore_session_cache(ReferenceCache, max_examples=30, settings=race_settings(30, **NO_DATABASE))


def test_a_failure_reads_as_the_shrunk_schedule_the_choices_and_the_diagram() -> None:
    suite = _suite(LazyHTTPClientClient, settings=NO_DATABASE)
    with pytest.raises(RaceFailure) as info:
        suite.test_concurrent_first_calls_open_one_session_and_one_http_client(LazyHTTPClientClient)
    message = str(info.value)
    assert "Schedule: Schedule(" in message
    assert "in words: " in message
    assert "ran ahead of" in message  # the first out-of-order steps, naming tasks and where they stood
    assert "caller-1" in message
    assert "The failing run on the wire:" in message
    assert "client ── initialize" in message
    assert "HTTP clients was not closed" in message or "HTTP clients" in message
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Draw 1 (schedule): Schedule(" in notes  # the Hypothesis choices
    assert "@reproduce_failure(" in notes  # print_blob
    # The schedule shrank to one or two numbers.
    found = re.search(r"Schedule: Schedule\(priorities=(\[[^\]]*\]), change_points=(\[[^\]]*\])\)", str(info.value))
    assert found is not None
    priorities, changes = eval(found.group(1)), eval(found.group(2))
    assert sum(1 for p in priorities if p) + len(changes) <= 2, found.group(0)


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
        seen.append((len(race.server.exchanges), len(race.server.live_sessions), race.http_clients.count))
        client = ReferenceClient(race.url)
        await client.call_tool("echo", {"text": "a"})
        race.server.drop_session()  # a session lost and one left open: the next example must not see either
        await client.call_tool("echo", {"text": "b"})
        await client.aclose()

    explore(scenario, max_examples=8, settings=race_settings(8, **NO_DATABASE))
    assert len(seen) > 1
    assert set(seen) == {(0, 0, 0)}


def test_explore_leaves_the_garbage_collector_as_it_found_it() -> None:
    async def scenario(race: Race) -> None:
        await asyncio.sleep(0)

    gc.collect()
    assert gc.isenabled()
    explore(scenario, max_examples=3, settings=race_settings(3, **NO_DATABASE))
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    gc.freeze()  # someone else's frozen objects stay frozen
    try:
        explore(scenario, max_examples=3, settings=race_settings(3, **NO_DATABASE))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


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


def test_only_the_races_module_imports_hypothesis() -> None:
    code = "import sys, pytest_fake_mcp._inprocess, pytest_fake_mcp._loop; print('hypothesis' in sys.modules)"
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
import pytest_fake_mcp.races as races
from hypothesis import Phase
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
_run_example = races.run_example

def counting_run_example(*args, **kwargs):
    EXAMPLES.append(1)
    return _run_example(*args, **kwargs)

races.run_example = counting_run_example
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
