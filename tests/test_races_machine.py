"""explore_session_cache's state machine: several servers and run ids, every rule, the report, the guardrails.

Which broken caches it finds (and that the reference cache passes) is in tests/test_races.py.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase

from pytest_fake_mcp._race import NondeterminismError
from pytest_fake_mcp.races import RaceFailure, explore_session_cache, race_settings
from race_clients import CheckThenActCache, NoRetryAfterExpiryCache, ReferenceCache
from race_heldout import UnshieldedCreationCache

NO_DATABASE: dict[str, Any] = {"database": None}
FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}  # one seed: no flakes
SHRUNK: dict[str, Any] = {"database": None, "phases": (Phase.generate, Phase.shrink)}


class _RecordingCache(ReferenceCache):
    """The reference cache, noting which keys and operations the machine asked for."""

    seen: ClassVar[set[tuple[str, str, str]]] = set()

    async def get(self, url: str, run_id: str) -> Any:
        self.seen.add(("get", url, run_id))
        return await super().get(url, run_id)

    async def cleanup(self, run_id: str) -> None:
        self.seen.add(("cleanup", "", run_id))
        await super().cleanup(run_id)


def test_the_machine_spreads_operations_over_several_servers_and_run_ids() -> None:
    _RecordingCache.seen = set()
    explore_session_cache(
        _RecordingCache, max_examples=30, servers=3, run_ids=2, seed=1, settings=race_settings(30, **FIND_ONLY)
    )
    urls = {url for kind, url, _ in _RecordingCache.seen if kind == "get"}
    runs = {run for kind, _, run in _RecordingCache.seen if kind == "get"}
    assert len(urls) == 3, urls
    assert runs == {"run-1", "run-2"}
    assert any(kind == "cleanup" for kind, _, _ in _RecordingCache.seen)


def test_a_failure_reads_as_the_shrunk_program_the_schedule_and_each_servers_diagram() -> None:
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(
            CheckThenActCache, max_examples=200, servers=1, run_ids=1, seed=2, settings=race_settings(200, **SHRUNK)
        )
    message = str(info.value)
    # The program in words (shortened, if steps Hypothesis could not delete turned out not to matter).
    assert re.search(r"^The program(, shortened: .*)? \(operations in the order the rules issued them", message, re.M)
    assert "get_or_create (server " in message
    assert "operations began executing in the order: get-" in message
    assert "Schedule: Schedule(" in message
    assert "in words: " in message
    assert "The failing run on the wire, server " in message
    assert "client ── initialize" in message
    # Under virtual time the rows are numbered (#n); the heading of each diagram says so, as explore()'s does.
    headings = [line for line in message.splitlines() if line.startswith("The failing run on the wire, server ")]
    assert headings, message
    for heading in headings:
        assert heading.endswith(
            "Exchanges (#n: arrival order, as the clock read alike for several (virtual time moves only on timers); "
            "each answer on its request's row; ✂ under a row acted on it):"
        ), heading
    assert re.search(r"^\s*#1 +client ── initialize", message, re.MULTILINE), message
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "state = SessionCacheMachine()" in notes  # Hypothesis's own printing of the same program
    assert "state.get_or_create(" in notes
    assert "this argument to explore_session_cache(): reproduce=(" in notes  # Hypothesis's advice, as our argument
    # Shrunk to one of the cache's races: a get, then a second get (double create), a cleanup (cleanup racing
    # the creation), or a cancel and a cleanup (the cancelled creation is never closed).
    steps = [line.strip() for line in message.split("operations began")[0].splitlines() if re.match(r"\s+\d+\. ", line)]
    program = [step for step in steps if "settle (" not in step]  # an explicit check point is not an operation
    assert 2 <= len(program) <= 3, steps
    assert "get_or_create" in program[0]

    # The advice run as printed replays exactly that program (the argument exists, and takes the blob).
    advice = re.search(r"explore_session_cache\(\): reproduce=(\(.*\))$", notes, re.MULTILINE)
    assert advice is not None, notes
    with pytest.raises(RaceFailure) as replayed:
        explore_session_cache(
            CheckThenActCache,
            servers=1,
            run_ids=1,
            settings=race_settings(200, **NO_DATABASE),
            reproduce=ast.literal_eval(advice[1]),
        )
    digest = re.compile(r"trace: \d+ steps, digest \w+")
    assert digest.findall(str(replayed.value)) == digest.findall(message)


def test_an_expired_session_must_be_reopened_by_the_next_use() -> None:
    with pytest.raises(RaceFailure) as info:
        explore_session_cache(
            NoRetryAfterExpiryCache, max_examples=200, seed=2, settings=race_settings(200, **FIND_ONLY)
        )
    message = str(info.value)
    assert "expire (server " in message
    assert "the server lost session" in message
    assert "raised SessionLostError" in message


def test_the_reference_cache_passes_with_one_server_one_run_and_the_old_keywords() -> None:
    explore_session_cache(
        ReferenceCache, max_examples=15, max_operations=4, stagger=2, servers=1, run_ids=1,
        settings=race_settings(15, **NO_DATABASE),
    )  # fmt: skip


class _ThreadedCache(ReferenceCache):
    async def get(self, url: str, run_id: str) -> Any:
        await asyncio.to_thread(lambda: None)  # e.g. a blocking config read moved to a thread
        return await super().get(url, run_id)


def test_a_thread_in_the_cache_fails_at_once_naming_it() -> None:
    with pytest.raises(NondeterminismError, match="thread"):
        explore_session_cache(_ThreadedCache, max_examples=20, settings=race_settings(20, **FIND_ONLY))


def test_bad_sizes_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"servers=0"):
        explore_session_cache(ReferenceCache, servers=0)


def test_a_found_program_replays_first_and_identically_from_the_database(tmp_path: Path) -> None:
    database = DirectoryBasedExampleDatabase(str(tmp_path / "db"))
    found = _CountingCache()
    with pytest.raises(RaceFailure) as first:
        explore_session_cache(
            found, max_examples=200, seed=3,
            settings=race_settings(200, database=database, phases=(Phase.generate,), report_multiple_bugs=False),
        )  # fmt: skip
    replayed = _CountingCache()
    with pytest.raises(RaceFailure) as second:
        explore_session_cache(
            replayed, max_examples=200, settings=race_settings(200, database=database, phases=(Phase.reuse,))
        )
    assert replayed.examples <= 2  # the saved example, then its report
    assert _digest(str(first.value)) == _digest(str(second.value))
    assert _without_ids(first.value) == _without_ids(second.value)  # the same program, failing the same way


class _CountingCache:
    """A factory of check-then-act caches counting the examples (one cache each); one database key for both."""

    __module__ = __name__
    __qualname__ = "CountingCheckThenActCache"

    def __init__(self) -> None:
        self.examples = 0

    def __call__(self) -> CheckThenActCache:
        self.examples += 1
        return CheckThenActCache()


def _digest(message: str) -> str:
    found = re.search(r"trace: \d+ steps, digest (\w+)", message)
    assert found is not None, message
    return found.group(1)


def _without_ids(failure: BaseException) -> str:
    """The report above the schedule, session ids (random per run) masked."""
    return re.sub(r"\b[0-9a-f]{8}\b", "<sid>", str(failure).split("Schedule:")[0])


class _CancelBecomesErrorCache(ReferenceCache):
    """Correct, except that a getter cancelled mid-get ends with an error instead of its cancellation."""

    async def get(self, url: str, run_id: str) -> Any:
        try:
            return await super().get(url, run_id)
        except asyncio.CancelledError:
            raise RuntimeError("the get was cancelled") from None


def test_an_operation_the_program_cancelled_may_end_with_an_error_unreported() -> None:
    # The machine cancelled it: whatever it ended with is excused, and retrieved, so the loop never reports it as
    # an error nobody handled once the cache is closed (it did, blaming the cache).
    explore_session_cache(_CancelBecomesErrorCache, max_examples=150, seed=4, settings=race_settings(150, **FIND_ONLY))


def test_an_operation_that_ends_cancelled_though_nothing_cancelled_it_fails_the_cache() -> None:
    # A shared creation that one getter's cancel reaches: the other getter ends cancelled (race_heldout's bug).
    with pytest.raises(RaceFailure, match="ended cancelled, but nothing cancelled it"):
        explore_session_cache(
            UnshieldedCreationCache, max_examples=200, seed=1, settings=race_settings(200, **FIND_ONLY)
        )
