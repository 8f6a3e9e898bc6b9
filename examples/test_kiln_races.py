"""Pattern 2, explored: the reference session cache survives every program and schedule the race engine tries."""

from __future__ import annotations

from clients.kiln_races import ReferenceCacheUnderTest

from pytest_fake_mcp.races import explore_session_cache


def test_the_reference_cache_has_no_race_the_engine_finds() -> None:
    explore_session_cache(ReferenceCacheUnderTest, max_examples=30)
