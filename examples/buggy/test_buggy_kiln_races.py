"""Pattern 2, explored: the race engine finds the Kiln cache's races by itself, no barrier placed by hand.

Two getters of one run both miss the cache across the lock's release and both open a session, and a
cleanup that lands while a creation is in flight leaves the new session open. The failure prints the
shrunk program, the schedule in words and the sequence diagram.
"""

from __future__ import annotations

from clients.kiln_races import KilnCacheUnderTest

from pytest_fake_mcp.races import explore_session_cache


def test_the_kiln_cache_races_are_found_by_exploration() -> None:
    explore_session_cache(KilnCacheUnderTest, max_examples=200)
