"""The wall-clock guardrail of a race run: a blocking ``time.sleep`` is refused naming its call site; reading the
clock is never an alarm by itself, but a livelock caused by a wait on the wall clock names the read."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from typing import Any

import pytest
from hypothesis import Phase

from contract_clients import ReferenceClient
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._race import Livelock, NondeterminismError, run_controlled
from pytest_fake_mcp.races import Race, explore, race_settings

FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,)}


def test_a_blocking_time_sleep_in_a_race_fails_at_once_naming_its_call_site() -> None:
    async def scenario(race: Race) -> None:
        time.sleep(0.01)  # noqa: ASYNC251 - the blocking sleep under test

    with pytest.raises(NondeterminismError, match=r"time\.sleep\(0\.01\) at test_races_wallclock\.py:\d+ in scenario"):
        explore(scenario, max_examples=3, settings=race_settings(3, **FIND_ONLY))


def test_time_sleep_zero_and_sleeps_outside_a_run_are_allowed() -> None:
    async def main() -> str:
        time.sleep(0)  # noqa: ASYNC251 - a GIL yield, not a wait
        return "ok"

    result = run_controlled(main)
    assert result.error is None
    assert result.value == "ok"
    time.sleep(0.001)  # no run in progress: the guard is gone


def test_reading_the_wall_clock_is_no_alarm_and_real_sdk_traffic_passes() -> None:
    async def main(url: str) -> float:
        started = time.monotonic()
        client = ReferenceClient(url)
        try:
            await client.call_tool("echo", {"text": "x"})
        finally:
            await client.aclose()
        time.time()
        time.perf_counter()
        return time.monotonic() - started

    with InProcessFake() as fake:
        result = run_controlled(lambda: main(fake.url))
    assert result.error is None, result.error
    assert result.violations == []


async def _wait_for_real_time() -> None:
    deadline = time.monotonic() + 3600.0
    while time.monotonic() < deadline:  # noqa: ASYNC110 - the busy wait under test: real time, virtual clock
        await asyncio.sleep(0)


def test_a_livelock_from_a_wait_on_the_wall_clock_names_the_busy_read() -> None:
    result = run_controlled(_wait_for_real_time, max_steps=5_000)
    assert isinstance(result.error, Livelock)
    message = str(result.error)
    assert "read the wall clock" in message
    assert "time.monotonic() at test_races_wallclock.py:" in message
    assert "in _wait_for_real_time" in message


def test_a_livelock_without_wall_clock_reads_says_nothing_about_the_clock() -> None:
    async def spin() -> None:
        while True:  # noqa: ASYNC110 - a livelock with no clock read
            await asyncio.sleep(0)

    result = run_controlled(spin, max_steps=5_000)
    assert isinstance(result.error, Livelock)
    assert "wall clock" not in str(result.error)


def test_the_time_module_is_restored_after_a_run() -> None:
    originals = (time.sleep, time.monotonic, time.time, time.perf_counter)
    run_controlled(_wait_for_real_time, max_steps=2_000)
    assert (time.sleep, time.monotonic, time.time, time.perf_counter) == originals


def test_a_wrapper_taken_by_name_during_a_run_does_not_keep_its_loop_alive() -> None:
    """``from time import monotonic`` while a guard is installed (socketserver does) keeps the wrapper for good:
    it must not pin the guard and, through it, the run's loop; once the guard is gone it calls the original."""
    kept: list[Any] = []
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def main() -> None:
        kept.extend((time.monotonic, time.time, time.perf_counter, time.sleep))  # as `from time import ...` does
        loops.append(weakref.ref(asyncio.get_running_loop()))

    result = run_controlled(main)
    assert result.error is None, result.error
    del result
    gc.collect()
    assert loops[0]() is None, "a wrapper kept past its run still holds the run's loop"
    monotonic, wall, counter, sleep = kept
    assert kept[0] is not time.monotonic  # the wrappers themselves, kept
    assert monotonic() <= time.monotonic()
    assert wall() > 0
    assert counter() > 0
    sleep(0.001)  # no guard any more: the original, not a refusal
