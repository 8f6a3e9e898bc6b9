"""Issue 23, item 3: a cache failure's program without the operations that do not matter.

Hypothesis cannot delete a rule whose key a later rule took, nor one of a race's three operations alone, so the
program it reports keeps steps its failure does not need. `explore_session_cache` replays that program with
steps left out and reports the shortest run that fails the same way (docs/races.md, "The failing program,
shortened"). These tests run real caches (the held-out set's, the planted ones) on the SDK's client.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
from hypothesis import Phase

from pytest_fake_mcp._race._program import Outcome, Program, Step, shorten
from pytest_fake_mcp.races import RaceFailure, explore_session_cache, race_settings
from race_clients import CheckThenActCache
from race_heldout import CloseBeforeEvictCache, UrlKeyedCache

SHRUNK: dict[str, Any] = {"database": None, "phases": (Phase.generate, Phase.shrink), "derandomize": True}
FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}


def _program(report: str) -> list[str]:
    """The report's program lines (``7. use-6: ...``), the example's end and settles aside."""
    section = report.split("The program", 1)[1].split("operations began executing", 1)[0]
    lines = [line.strip() for line in section.splitlines()[1:]]
    return [line for line in lines if re.match(r"\d+\. ", line) and "settle (" not in line and "(the end" not in line]


def _left_out(report: str) -> str | None:
    found = re.search(r"^\s*left out: (.*)$", report, re.MULTILINE)
    return None if found is None else found[1]


def _reproduce(error: BaseException) -> tuple[str, bytes]:
    notes = "\n".join(getattr(error, "__notes__", []))
    found = re.search(r"explore_session_cache\(\): reproduce=(\(.*\))$", notes, re.MULTILINE)
    assert found is not None, notes
    value = ast.literal_eval(found[1])
    assert isinstance(value, tuple)
    return value


def test_a_cache_failure_is_reported_without_the_steps_it_does_not_need() -> None:
    # The URL-keyed cache: one run's cleanup closes the client another run is using. Its bug needs three
    # operations (a get or use of one run, a use of the other run on the same server, a cleanup of the first);
    # the program Hypothesis ends with keeps the races and cached keys that led there.
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(UrlKeyedCache, seed=1, shrink_seconds=0, settings=race_settings(100, **SHRUNK))
    report = str(info.value)
    assert "The program, shortened: " in report, report
    assert "as the run fails the same way without them" in report
    left_out = _left_out(report)
    assert left_out is not None, report
    kept = _program(report)
    assert 2 <= len(kept) <= 4, kept  # the operations that make the race, no more
    assert any("cleanup" in line for line in kept), kept
    assert "the whole program, the steps left out included" in report  # Hypothesis's `state.` lines keep them

    # The printed advice replays the whole example; its shortening is the same every time (no clock, no draws).
    with pytest.raises(RaceFailure) as replayed:
        explore_session_cache(
            UrlKeyedCache, settings=race_settings(100, database=None), reproduce=_reproduce(info.value)
        )
    again = str(replayed.value)
    assert _program(again) == kept
    assert _left_out(again) == left_out
    digest = re.compile(r"trace: \d+ steps, digest \w+")
    assert digest.findall(again) == digest.findall(report)


def test_a_program_every_step_of_which_matters_is_reported_whole() -> None:
    # The check-then-act cache on one key, in a space small enough for Hypothesis to finish shrinking: a get,
    # cancelled where its session is opening, leaks that session (the end's use opens a second). Without the get,
    # the cancel has nothing to cancel; without the cancel, nothing leaks: both stay, and the report says nothing
    # was left out.
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(
            CheckThenActCache,
            servers=1,
            run_ids=1,
            max_operations=3,
            max_hold=0,
            seed=2,
            shrink_seconds=60,
            settings=race_settings(200, **SHRUNK),
        )
    report = str(info.value)
    assert "The program (operations in the order the rules issued them" in report, report
    assert _left_out(report) is None
    kept = _program(report)
    assert [line.split(":")[0] for line in kept] == ["1. get-1", "2. cancel-2"], kept


def test_without_the_shrink_phase_the_program_is_reported_whole() -> None:
    # Hypothesis's phases without shrinking: the user asked for the example as found, so it is not shortened.
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(UrlKeyedCache, seed=1, settings=race_settings(100, **FIND_ONLY))
    report = str(info.value)
    assert "The program (operations in the order the rules issued them" in report
    assert _left_out(report) is None
    assert "Hypothesis prints are the same program" in report


# --- the pieces: what counts as failing the same way, and the order steps are tried out ------------------------


def _outcome(what: str, *problems: str, cause: BaseException | None = None) -> Outcome:
    return Outcome(RaceFailure(what), what, problems, cause)


QUIET = "A cache invariant failed once the run was quiet:"


def test_a_run_fails_the_same_way_whatever_its_operations_ids_and_messages() -> None:
    original = _outcome(QUIET, 'use-8 raised SessionClosedError("MCP session #1 at http://127.0.0.1:2/mcp ended")')
    assert _outcome(QUIET, 'use-3 raised SessionClosedError("MCP session #2 at http://127.0.0.1:1/mcp")').same_as(
        original
    )
    leak = _outcome(QUIET, "session 261d496a of (server 2, run-2) is still live, but the last operation ...")
    assert _outcome(
        QUIET, "x", "session 0e74c17d of (server 1, run-1) is still live, but the last operation ..."
    ).same_as(leak)


def test_a_run_failing_otherwise_does_not_fail_the_same_way() -> None:
    original = _outcome(QUIET, "use-8 raised SessionClosedError('ended')")
    assert not _outcome(QUIET, "use-8 raised RuntimeError('ended')").same_as(original)
    assert not _outcome(QUIET, "2 sessions live on server 1 for one key (run-1): ['facda9e6', '4bbee99f']").same_as(
        original
    )
    assert not _outcome("After aclose(), something was left behind:", "use-8 raised SessionClosedError('x')").same_as(
        original
    )
    stopped = _outcome("The run stopped: Deadlock.", cause=TimeoutError())
    assert not _outcome("The run stopped: Deadlock.", cause=ValueError()).same_as(stopped)
    assert _outcome("The run stopped: Deadlock.", cause=TimeoutError()).same_as(stopped)


def test_each_rules_steps_go_together_first_then_each_step_alone() -> None:
    # Two rules: a race's three steps (1-3) and a settle (4). The failure needs step 2 alone.
    program = Program(
        steps=[Step(1, 0, "get-1", ""), Step(2, 0, "use-2", ""), Step(3, 0, "cleanup-3", ""), Step(4, 1, "settle", "")]
    )
    original = _outcome(QUIET, "use-2 raised X()")
    tried: list[frozenset[int]] = []

    def replay(left_out: frozenset[int]) -> Outcome | None:
        tried.append(left_out)
        return None if 2 in left_out else original

    found = shorten(program, original, replay)
    assert found is not None
    assert found[0] == frozenset({1, 3, 4})
    assert tried == [
        frozenset({1, 2, 3}),
        frozenset({4}),
        frozenset({1, 4}),
        frozenset({1, 2, 4}),
        frozenset({1, 3, 4}),
    ]


def test_nothing_is_left_out_when_every_step_matters() -> None:
    program = Program(steps=[Step(1, 0, "get-1", ""), Step(2, 1, "get-2", "")])
    original = _outcome(QUIET, "2 sessions live on server 1 for one key (run-1)")
    assert shorten(program, original, lambda left_out: None) is None


def test_a_program_that_loses_only_settles_is_reported_whole() -> None:
    # The run checks once it is quiet at its end anyway: a report saying it left out a settle tells nothing.
    program = Program(steps=[Step(1, 0, "get-1", ""), Step(2, 1, "cleanup-2", ""), Step(3, 2, "settle", "")])
    original = _outcome(QUIET, "1 session(s) live on server 1")
    assert shorten(program, original, lambda left_out: original if left_out == {3} else None) is None


def test_a_races_cached_key_whose_settle_was_left_out_is_not_called_cached() -> None:
    # race_cached caches its key by a call, then settles. Shortening may leave the settle out: the call then
    # overlaps the race, and the line must not claim the key was cached first.
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(CloseBeforeEvictCache, seed=1, shrink_seconds=0, settings=race_settings(100, **SHRUNK))
    report = str(info.value)
    left_out = {int(item.split(" ")[0]) for item in (_left_out(report) or "").split(", ") if item}
    keys = [line for line in _program(report) if "(the race's key" in line]
    assert keys, report
    for line in keys:
        number = int(line.split(".")[0])
        label = "not waited for" if number + 1 in left_out else "cached first"
        assert f"(the race's key, {label})" in line, (line, left_out)
    assert any("not waited for" in line for line in keys), keys
