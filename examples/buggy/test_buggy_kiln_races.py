"""Pattern 2, explored: the race engine finds the Kiln cache's races by itself, no barrier placed by hand.

Two getters of one run both miss the cache across the lock's release and both open a session, and a
cleanup that lands while a creation is in flight leaves the new session open. The failure prints the
shrunk program, the schedule in words and the sequence diagram.
"""

from __future__ import annotations

import logging

import pytest
from clients.kiln_races import KilnCacheUnderTest

from pytest_fake_mcp.races import explore_session_cache


def test_the_kiln_cache_races_are_found_by_exploration(caplog: pytest.LogCaptureFixture) -> None:
    # The search runs a hundred programs and more (shrinking included), and the SDK and the cache log warnings
    # and errors for many of them: pytest would print them all under the failure. The failure message is the
    # report, about the one shrunk program, so the log of the search is left out.
    caplog.set_level(logging.CRITICAL)
    # One server, one run id, up to 3 operations, answers not held: both races fit, and a small space keeps
    # the search and its shrinking short. seed pins it: every cold run finds and shrinks to the same failure.
    explore_session_cache(
        KilnCacheUnderTest, servers=1, run_ids=1, max_operations=3, max_hold=0, max_examples=200, seed=1
    )
