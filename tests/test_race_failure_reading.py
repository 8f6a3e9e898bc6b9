"""Issue 23, items 3 and 4: a race failure a user can read in a minute, and a rerun that replays it.

* Shrinking is bounded in wall-clock time (``shrink_seconds``); the smallest failing example so far is reported,
  saying so, with the argument that replays it.
* A rerun replays the stored failure as it is (same schedule, same trace digest) without shrinking again, unless
  asked (``shrink_again``).
* One name per task in a report.
* The reported run's library log lines that no passing example logged sit beside the diagram; the harmless
  flood is left out.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import Phase, currently_in_test_context
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from pytest_fake_mcp._race import _search
from pytest_fake_mcp.races import (
    Race,
    RaceFailure,
    RaceSuite,
    Schedule,
    explore,
    explore_session_cache,
    race_settings,
)
from race_clients import CleanupRacingCache, UnsharedCloseClient

if TYPE_CHECKING:
    from pathlib import Path

FIND: dict[str, Any] = {"database": None, "phases": (Phase.generate, Phase.shrink)}
DOUBLE_CLOSE = "test_two_concurrent_acloses_on_an_open_session_leave_nothing_open"


def _line(report: str, start: str) -> str:
    return next(line for line in report.splitlines() if line.strip().startswith(start))


def _notes(error: BaseException) -> str:
    """The notes under a failure's report: how the search came to it (and Hypothesis's own)."""
    return "\n".join(getattr(error, "__notes__", []))


def _identity(report: str) -> tuple[str, str, str]:
    """What must be identical whenever an example replays: the schedule, in words, and the trace digest."""
    return _line(report, "Schedule:"), _line(report, "in words:"), _line(report, "trace:")


def _program(report: str) -> list[str]:
    """The report's program: its numbered lines and what it left out, session ids blanked."""
    section = report.split("operations began executing")[0].split("The program", 1)[1]
    return [_ids_blanked(line) for line in section.splitlines() if re.match(r"\s+(\d+\.|left out:) ", line)]


def _ids_blanked(report: str) -> str:
    return re.sub(r"\b[0-9a-f]{4,32}\b", "#", report)


def _late_failure(runs: list[int]) -> Any:
    """A scenario failing only past a drawn threshold: its failing examples shrink over many steps."""

    async def scenario(race: Race) -> None:
        runs.append(1)
        size = race.draw(st.integers(0, 10_000), "size")
        await asyncio.sleep(0)
        assert size < 500, f"size {size} is too large"

    return scenario


# --- A: shrinking bounded in time ----------------------------------------------------------------------------


def test_shrinking_past_its_bound_reports_the_smallest_failure_so_far_and_how_to_shrink_longer() -> None:
    """Before: no ``shrink_seconds`` (TypeError), and shrinking ran as long as Hypothesis's own five minutes."""
    runs: list[int] = []
    with pytest.raises(RaceFailure) as info:
        explore(_late_failure(runs), settings=race_settings(200, **FIND), seed=3, shrink_seconds=0)
    notes = _notes(info.value)
    assert "Shrinking was cut short 0 s after the first failure" in notes
    assert "shrink_seconds=60 on explore()" in notes
    assert "--race-shrink-seconds=60" in notes
    assert "reproduce=('" in notes  # the argument that runs exactly this example
    unbounded: list[int] = []
    with pytest.raises(RaceFailure) as full:
        explore(_late_failure(unbounded), settings=race_settings(200, **FIND), seed=3, shrink_seconds=600)
    assert "cut short" not in _notes(full.value)
    assert len(runs) < len(unbounded), (len(runs), len(unbounded))
    assert "size 500 is too large" in str(full.value.__cause__)  # shrunk to the boundary when unbounded


def test_the_cache_machine_stops_shrinking_at_its_bound_and_reports_its_best_so_far() -> None:
    """Before: 516 shrink examples, about a minute (issue 23); now the bound, then one replay."""
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(CleanupRacingCache, settings=race_settings(200, database=None), seed=1, shrink_seconds=0)
    notes = _notes(info.value)
    assert "Shrinking was cut short 0 s after the first failure" in notes
    assert "shrink_seconds=60 on explore_session_cache()" in notes
    assert "reproduce=('" in notes


def test_a_pytest_option_sets_every_searchs_bound(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("pytest_plugins = []")
    pytester.makepyfile(
        test_inner="""
        import asyncio
        from hypothesis import strategies as st
        from pytest_fake_mcp.races import race_test, race_settings

        @race_test(settings=race_settings(200, database=None), seed=3)
        async def test_late(race):
            size = race.draw(st.integers(0, 10_000), "size")
            await asyncio.sleep(0)
            assert size < 500
        """
    )
    outer = dict(_search._defaults)  # this run's own (the project's addopts set 600 s)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--race-shrink-seconds=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Shrinking was cut short 0 s*shrink_seconds=60 on @race_test(...)*"])
    # Put back as they were, not to the built-in 20 s: the outer run's later searches keep their bound. Before,
    # the inner run's end reset them, and this worker's later race tests could be cut short under load.
    assert _search._defaults == outer


# --- B: replays that replay ------------------------------------------------------------------------------------


def _search_twice(tmp_path: Path, search: Any) -> tuple[list[str], list[str], list[int]]:
    """The report, the notes and the examples run of two searches over one directory database."""
    reports, notes, counts = [], [], []
    for _ in range(2):
        database = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
        runs: list[int] = []
        with pytest.raises(RaceFailure) as info:
            search(database, runs)
        reports.append(str(info.value))
        notes.append(_notes(info.value))
        counts.append(len(runs))
    return reports, notes, counts


def test_a_rerun_replays_the_stored_failure_exactly_without_shrinking_it_again(tmp_path: Path) -> None:
    """Before: the report did not say it replayed the stored failure as it was."""

    def search(database: Any, runs: list[int]) -> None:
        explore(_late_failure(runs), settings=race_settings(100, database=database), database_key="late", seed=5)

    reports, notes, counts = _search_twice(tmp_path, search)
    assert _identity(reports[0]) == _identity(reports[1])
    assert _ids_blanked(reports[0]) == _ids_blanked(reports[1])  # the whole report alike
    assert counts[1] == 2, counts  # the stored example, then its reported replay: nothing shrunk again
    assert "Replayed from the Hypothesis database as it was stored, not shrunk again" in notes[1]
    assert "shrink_again=True on explore()" in notes[1]


def test_shrink_again_shrinks_a_stored_failure_further(tmp_path: Path) -> None:
    """A failure stored half-shrunk (the bound cut it) is shrunk further only when asked."""

    def search(database: Any, runs: list[int], **bounds: Any) -> None:
        explore(
            _late_failure(runs), settings=race_settings(100, database=database), database_key="late", seed=5, **bounds
        )

    database = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
    with pytest.raises(RaceFailure) as cut:
        search(database, [], shrink_seconds=0)
    assert "cut short" in _notes(cut.value)
    with pytest.raises(RaceFailure) as replayed:
        search(database, [])
    assert _identity(str(replayed.value)) == _identity(str(cut.value))
    with pytest.raises(RaceFailure) as shrunk:
        search(database, [], shrink_again=True, shrink_seconds=600)
    assert "size 500 is too large" in str(shrunk.value.__cause__)


def test_a_cache_machine_rerun_replays_its_stored_failure_exactly(tmp_path: Path) -> None:
    def search(database: Any, runs: list[int]) -> None:
        def make() -> CleanupRacingCache:
            if currently_in_test_context():  # an example Hypothesis runs (not a replay shortening the program)
                runs.append(1)
            return CleanupRacingCache()

        explore_session_cache(
            make, settings=race_settings(200, database=database), database_key="cache", seed=1, shrink_seconds=2
        )

    reports, notes, counts = _search_twice(tmp_path, search)
    assert _identity(reports[0]) == _identity(reports[1])
    assert _program(reports[0]) == _program(reports[1])  # the same program, shortened alike
    assert counts[1] == 2, counts
    assert "Replayed from the Hypothesis database as it was stored" in notes[1]


def test_a_suite_rerun_replays_its_stored_failure_and_names_its_class_attribute(tmp_path: Path) -> None:
    def search(database: Any, runs: list[int]) -> None:
        def make(url: str) -> UnsharedCloseClient:
            runs.append(1)
            return UnsharedCloseClient(url)

        suite = type("RacesStored", (RaceSuite,), {"max_examples": 20, "hypothesis_settings": {"database": database}})
        getattr(suite(), DOUBLE_CLOSE)(make)

    reports, notes, counts = _search_twice(tmp_path, search)
    assert _identity(reports[0]) == _identity(reports[1])
    assert counts[1] == 2, counts
    assert "the class attribute shrink_again = True on RacesStored" in notes[1]


# --- C: one name per task ---------------------------------------------------------------------------------------


def test_every_place_in_a_report_names_a_task_alike() -> None:
    """Before (3.11): the schedule in words said ``task #0 _as_coroutine`` for the task the deviations call
    ``main``."""

    async def scenario(race: Race) -> None:
        async def step(name: str) -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            order.append(name)

        order: list[str] = []
        await asyncio.gather(race.spawn(step("a"), "caller-a"), race.spawn(step("b"), "caller-b"))
        assert order == ["a", "b"], order

    schedule = Schedule(priorities=(1, 0, 2))  # main first among the runnable, then caller-b ahead of caller-a
    with pytest.raises(RaceFailure) as info:
        explore(scenario, settings=race_settings(5, **FIND), schedule_strategy=st.just(schedule))
    report = str(info.value)
    assert not re.findall(r"task #\d+ \w+", report), report
    assert "priorities main = 1, caller-b = 2" in _line(report, "in words:")
    assert "caller-b" in _line(report, "step ")


# --- D: the log lines that explain a failure ----------------------------------------------------------------


def test_the_log_line_that_explains_a_failure_is_beside_its_diagram() -> None:
    """UnsharedCloseClient's second close shuts the HTTP client under the first one's DELETE: its warning says so.
    Before: the report had no log lines at all."""
    suite = type("RacesLogged", (RaceSuite,), {"max_examples": 20, "hypothesis_settings": {"database": None}})
    with pytest.raises(RaceFailure) as info:
        getattr(suite(), DOUBLE_CLOSE)(UnsharedCloseClient)
    report = str(info.value)
    section = report.index("Log records of the failing run")
    assert "Cannot send a request, as the client has been closed" in report[section:]
    assert section < report.index("The failing run on the wire")


def test_a_warning_every_passing_example_logs_too_is_left_out() -> None:
    flood = logging.getLogger("pytest_fake_mcp.tests.flood")

    async def scenario(race: Race) -> None:
        flood.warning("harmless warning about stream %s", "x")
        size = race.draw(st.integers(0, 10), "size")
        if size >= 5:
            flood.warning("the cache dropped entry %d under a caller", size)
            raise AssertionError("dropped")

    with pytest.raises(RaceFailure) as info:
        explore(scenario, settings=race_settings(100, **FIND), seed=1)
    report = str(info.value)
    assert "the cache dropped entry 5 under a caller" in report
    assert "harmless warning" not in report
    assert "1 record(s) passing examples logged too left out" in report
