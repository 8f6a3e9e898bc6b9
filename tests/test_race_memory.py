"""Memory stays flat over 1,000 examples of each entry point of the race engine (a measurement, not a reference check).

`tests/test_inprocess_memory.py` checks by weak reference that no fake, server or loop outlives a few examples;
this measures what 1,000 examples leave behind, whatever its kind. Each entry point first runs a warm-up of 100
examples (imports, Hypothesis's and the SDK's caches filled), then 1,000; the growth retained between the two
(after a collection) is divided by the examples run and must stay under `BOUND` allocated blocks per example.

The measure is ``sys.getallocatedblocks()`` (Python's live objects and small allocations), cheap enough for 1,000
examples: tracemalloc makes a 1,000-example cache run take minutes. Each measure is taken between runs (Hypothesis
frees a run's data tree with it), with pytest's log capture set aside (it keeps the test's records, and the
tracebacks they hold, until the test ends).

Measured on CPython 3.11 (blocks per example, 1,000 examples): before e733d82 the cache search kept about 915
(each example's loop, fakes and caches: 99.4 MB over 1,000 examples); now it keeps a few, `explore` and
`RaceSuite` under 1. A planted leak of the old shape (every example's loop, its tasks and its race,
cache or client kept) is flagged: about 300 blocks per example for `explore` and `RaceSuite`, 1,400 for the cache.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase

from _log_capture import no_log_capture
from contract_clients import ReferenceClient
from pytest_fake_mcp.races import Race, RaceSuite, explore, explore_session_cache, race_settings
from race_clients import ReferenceCache

WARMUP = 100
EXAMPLES = 1000
PLANTED_EXAMPLES = 200
"""A planted leak is flagged per example as well over 200 examples as over 1,000: fewer, to keep the cost down."""
BOUND = 100
"""Allocated blocks retained per example (roughly 100 bytes each): the old leak kept over 900, a correct run under 40,
a planted leak of one example's loop, tasks and client over 250."""
QUICK: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}

Keep = Callable[[Any], None]
"""Called with each example's race, cache or client: a no-op, or a planted leak that keeps them all."""


def _blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


def _explore(examples: int, keep: Keep) -> None:
    async def two_calls(race: Race) -> None:
        keep(race)
        client = ReferenceClient(race.url)
        try:
            await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
        finally:
            await client.aclose()

    explore(two_calls, max_examples=examples, settings=race_settings(examples, **QUICK))


def _explore_session_cache(examples: int, keep: Keep) -> None:
    def make_cache() -> Any:
        cache = ReferenceCache()
        keep(cache)
        return cache

    explore_session_cache(make_cache, max_examples=examples, settings=race_settings(examples, **QUICK))


def _race_suite(examples: int, keep: Keep) -> None:
    class Suite(RaceSuite):
        max_examples = examples
        hypothesis_settings = QUICK

    def make_client(url: str) -> Any:
        client = ReferenceClient(url)
        keep(client)
        return client

    Suite().test_stateful_mixture_of_calls_losses_cancellation_and_close(make_client)


ENTRY_POINTS: dict[str, Callable[[int, Keep], None]] = {
    "explore": _explore,  # race_test runs explore
    "explore_session_cache": _explore_session_cache,
    "RaceSuite": _race_suite,
}


def _growth_per_example(entry: Callable[[int, Keep], None], examples: int, keep: Keep) -> float:
    with no_log_capture():
        entry(WARMUP, lambda kept: None)
        before = _blocks()
        entry(examples, keep)
        return (_blocks() - before) / examples


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_memory_stays_flat_over_1000_examples(name: str) -> None:
    growth = _growth_per_example(ENTRY_POINTS[name], EXAMPLES, lambda kept: None)
    assert growth < BOUND, f"{name} kept {growth:.0f} allocated blocks per example over {EXAMPLES} examples"


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_a_planted_leak_of_every_examples_race_cache_or_client_is_flagged(name: str) -> None:
    # The old leak's shape: each example's loop and what it built (its race, cache or client, reaching its fake)
    # kept by a module-level table past the run. Here a list the test owns keeps them; the measure must flag it.
    kept: list[Any] = []

    def keep(built: Any) -> None:
        loop = asyncio.get_running_loop()  # every entry point builds these with its loop running
        kept.append((built, loop, asyncio.all_tasks(loop)))  # the tasks' frames reach the fake serving them

    growth = _growth_per_example(ENTRY_POINTS[name], PLANTED_EXAMPLES, keep)
    assert len(kept) >= PLANTED_EXAMPLES
    assert growth >= BOUND, f"{name}: a leak of every example kept only {growth:.0f} blocks per example"
