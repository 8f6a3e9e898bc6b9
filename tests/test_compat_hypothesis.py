"""The hypothesis section of `_compat` (and the race machine's asyncio entry): each check passes on what is
installed, and each changed shape gives the public fallback's right answer or fails at once naming the library."""

from __future__ import annotations

import asyncio
import asyncio.events
import re
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import Phase, control
from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.strategies import DataObject

from pytest_fake_mcp import _compat
from pytest_fake_mcp._compat import CompatError, installed_version
from pytest_fake_mcp.races import Race, RaceFailure, explore, explore_session_cache, race_settings
from race_clients import ReferenceCache

if TYPE_CHECKING:
    from collections.abc import Iterator

ENTRIES = (
    _compat.CHOICE_DRAWS,
    _compat.BUILD_CONTEXT_IS_FINAL,
    _compat.PYTEST_PLUGIN_TEST_MARKS,
    _compat.SET_RUNNING_LOOP,
    _compat.EXAMPLE_CHOICES_BLOB,
)
FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,)}


@pytest.fixture(autouse=True)
def _checked_afresh() -> Iterator[None]:
    """Every entry checked afresh before the test, and after it (torn down after ``monkeypatch`` restored)."""
    _compat.forget()
    yield
    _compat.forget()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_every_entry_matches_what_is_installed(entry: _compat.Entry) -> None:
    assert entry.check() is None
    assert _compat.ENTRIES[f"{entry.library}:{entry.name}"] is entry
    assert all((entry.gain, entry.checked, entry.what, entry.fallback))


async def _failing_after_a_hold(race: Race) -> None:
    await asyncio.sleep(0)
    raise AssertionError("fails under every schedule")


def test_without_choice_draws_the_engine_draws_with_strategies_and_reports_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Hypothesis whose ConjectureData.draw_integer changed: data.draw(st.integers(...)), the same report."""
    original = ConjectureData.draw_integer

    def draw_integer(self: ConjectureData, *args: Any, **kwargs: Any) -> int:  # no min_value/max_value any more
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ConjectureData, "draw_integer", draw_integer)
    assert _compat.CHOICE_DRAWS.check() == "ConjectureData.draw_integer no longer takes min_value, max_value"
    assert _compat.choice_draws(object()) is None
    with pytest.raises(RaceFailure) as info:
        explore(_failing_after_a_hold, max_examples=20, settings=race_settings(20, **FIND_ONLY))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Draw 1 (schedule): Schedule(" in notes  # drawn with the schedules() strategy
    assert "in words: FIFO" in str(info.value)  # shrunk to stock asyncio's order, as with direct draws


def test_a_data_object_without_its_conjecture_data_takes_the_strategies(monkeypatch: pytest.MonkeyPatch) -> None:
    original = DataObject.__init__

    def init(self: DataObject, data: ConjectureData) -> None:
        original(self, data)
        self.__dict__["_data"] = self.__dict__.pop("conjecture_data")

    monkeypatch.setattr(DataObject, "__init__", init)
    assert "conjecture_data" in str(_compat.CHOICE_DRAWS.check())
    assert not _compat.usable(_compat.CHOICE_DRAWS)


def test_without_is_final_every_example_is_described(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(control, "current_build_context")
    assert _compat.BUILD_CONTEXT_IS_FINAL.check() is not None
    assert _compat.reporting_example() is True  # the fallback: describe it, whichever it is
    with pytest.raises(RaceFailure, match="in words: FIFO"):
        explore(_failing_after_a_hold, max_examples=5, settings=race_settings(5, **FIND_ONLY))


def test_with_is_final_only_the_reported_example_is_described() -> None:
    assert _compat.reporting_example() is True  # outside an example: describe everything

    seen: list[bool] = []

    async def passing(race: Race) -> None:
        seen.append(_compat.reporting_example())
        await asyncio.sleep(0)

    explore(passing, max_examples=5, settings=race_settings(5, **FIND_ONLY))
    assert seen
    assert not any(seen)  # a passing search reports no example


def test_without_set_running_loop_the_cache_machine_fails_at_once_naming_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(asyncio.events, "_set_running_loop")
    with pytest.raises(CompatError) as info:
        explore_session_cache(ReferenceCache, max_examples=2, settings=race_settings(2, **FIND_ONLY))
    message = str(info.value)
    assert f"asyncio.events._set_running_loop of python {installed_version('python')}" in message
    assert re.search(r"Checked with python 3\.11\.7, 3\.12\.1, 3\.13\.0", message)


def _a_race_test() -> Any:
    from pytest_fake_mcp.races import race_test

    @race_test(max_examples=1)
    async def test_quiet(race: Race) -> None:
        await asyncio.sleep(0)

    return test_quiet


def test_a_race_test_is_known_to_hypothesis_as_its_own() -> None:
    from hypothesis.internal.detection import is_hypothesis_test

    test = _a_race_test()
    assert is_hypothesis_test(test)
    assert test.hypothesis.inner_test.__name__ == "test_quiet"
    assert _compat.stacked_hypothesis_decorators(test) == []


def test_without_the_plugins_marks_a_race_test_runs_unmarked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback: Hypothesis no longer reads the mark; the race test is left unmarked and still runs."""
    import hypothesis.internal.detection

    monkeypatch.setattr(hypothesis.internal.detection, "is_hypothesis_test", lambda f: False)
    assert _compat.PYTEST_PLUGIN_TEST_MARKS.check() == (
        "is_hypothesis_test no longer reads a test's is_hypothesis_test attribute"
    )
    test = _a_race_test()
    assert not hasattr(test, "is_hypothesis_test")
    assert _compat.stacked_hypothesis_decorators(test) == []
    test()  # explores its one example


def test_a_stacked_seed_is_found_by_its_mark_and_refused() -> None:
    from hypothesis import seed

    test = seed(3)(_a_race_test())
    assert _compat.stacked_hypothesis_decorators(test) == ["_hypothesis_internal_use_seed"]
    with pytest.raises(TypeError, match=r"@race_test\(seed=\.\.\.\)"):
        test()


async def _failing_past_a_size(race: Race) -> None:
    size = race.draw(st.integers(0, 10_000), "size")
    await asyncio.sleep(0)
    assert size < 500, f"size {size} is too large"


def test_without_the_choices_blob_shrinking_runs_unbounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback: no best example can be replayed, so the bound is not applied (Hypothesis's own applies)."""
    from hypothesis import core

    original = core.encode_failure
    monkeypatch.setattr(core, "encode_failure", lambda *args: original(*args))  # another signature
    assert _compat.EXAMPLE_CHOICES_BLOB.check() == "hypothesis.core.encode_failure(choices) is gone"
    assert _compat.example_blob(object()) is None
    with pytest.raises(RaceFailure) as info:
        explore(_failing_past_a_size, settings=race_settings(200, database=None), seed=3, shrink_seconds=0)
    assert "cut short" not in "\n".join(getattr(info.value, "__notes__", []))
    assert "size 500 is too large" in str(info.value.__cause__)  # shrunk all the way


def test_with_the_choices_blob_shrinking_stops_at_its_bound() -> None:
    with pytest.raises(RaceFailure) as info:
        explore(_failing_past_a_size, settings=race_settings(200, database=None), seed=3, shrink_seconds=0)
    assert "Shrinking was cut short" in "\n".join(info.value.__notes__)
