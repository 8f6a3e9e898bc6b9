"""The held-out session caches (tests/race_heldout.py): the correct ones pass the cache machine; bugs it may miss
are shown real by a deterministic program (a gate on the fake orders the two overlapping operations).

Search power on the broken caches is measured elsewhere (issue 23), not here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_fake_mcp.client import SessionClosedError
from pytest_fake_mcp.races import explore_session_cache, race_settings
from race_heldout import (
    HELD_OUT,
    HELD_OUT_CORRECT,
    HeldOutCache,
    LossHandlerPopsByKeyCache,
    UnshieldedCreationCache,
    UrlKeyedCache,
)

WAIT = 10.0


def test_the_set_has_the_four_named_shapes_and_two_of_our_own() -> None:
    assert len(HELD_OUT) == 6
    assert len(HELD_OUT_CORRECT) == 2
    assert all(issubclass(cls, HeldOutCache) for cls in HELD_OUT.values())  # each one method from HeldOutCache


@pytest.mark.parametrize("cache_type", list(HELD_OUT_CORRECT.values()), ids=list(HELD_OUT_CORRECT))
def test_a_correct_held_out_cache_passes_the_cache_machine(cache_type: type[Any]) -> None:
    explore_session_cache(cache_type, max_examples=50, settings=race_settings(50, database=None), seed=23)


@pytest.mark.asyncio
@pytest.mark.parametrize("cache_type", [HeldOutCache, UrlKeyedCache], ids=["correct", "keyed by URL only"])
async def test_one_runs_cleanup_closes_the_client_another_run_is_calling_on(
    fake_mcp_server: Any, cache_type: type[HeldOutCache]
) -> None:
    # get(s, run-0); use(s, run-1) held in its tools/call; cleanup(run-0) while it is held.
    gate = fake_mcp_server.gate("run-1's call")
    held = fake_mcp_server.on("tools/call").delay(until=gate)
    cache = cache_type()
    try:
        async with asyncio.timeout(WAIT):
            await cache.get(fake_mcp_server.url, "run-0")
            run_1 = await cache.get(fake_mcp_server.url, "run-1")
            call = asyncio.create_task(run_1.call_tool("echo", {"text": "run-1"}))
            await held.wait_fired()
            cleanup = asyncio.create_task(cache.cleanup("run-0"))
            if cache_type is UrlKeyedCache:
                await cleanup  # closes the client run-1 shares, its call still held
                gate.open()
                with pytest.raises(SessionClosedError):
                    await call
            else:
                await cleanup
                gate.open()
                assert (await call).content[0].text == "run-1"
    finally:
        gate.open()
        async with asyncio.timeout(WAIT):
            await cache.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "cache_type", [HeldOutCache, UnshieldedCreationCache], ids=["correct", "shared creation not shielded"]
)
async def test_cancelling_one_getter_during_the_shared_creation(
    fake_mcp_server: Any, cache_type: type[HeldOutCache]
) -> None:
    # get(k) creates (its initialize held); a second get(k) waits on the same creation; the first is cancelled.
    gate = fake_mcp_server.gate("initialize")
    held = fake_mcp_server.on("initialize").delay(until=gate)
    cache = cache_type()
    try:
        async with asyncio.timeout(WAIT):
            first = asyncio.create_task(cache.get(fake_mcp_server.url, "run-0"))  # creates, publishes the creation
            second = asyncio.create_task(cache.get(fake_mcp_server.url, "run-0"))  # finds it, waits on it
            await held.wait_fired()  # both ran: the creation's initialize is held
            first.cancel()
            gate.open()
            await asyncio.gather(first, return_exceptions=True)
            if cache_type is UnshieldedCreationCache:
                with pytest.raises(asyncio.CancelledError):
                    await second  # never cancelled itself: the creation it shared was
            else:
                client = await second
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
                fake_mcp_server.assert_initialize_count(1)
    finally:
        gate.open()
        async with asyncio.timeout(WAIT):
            await cache.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("cache_type", "initializes"),
    [
        pytest.param(HeldOutCache, 2, id="correct"),
        pytest.param(LossHandlerPopsByKeyCache, 3, id="loss handler pops by key"),
    ],
)
async def test_two_callers_meeting_one_loss_replace_the_client_once(
    fake_mcp_server: Any, cache_type: type[HeldOutCache], initializes: int
) -> None:
    # get(k); two uses of k held in their tools/call; expire(k); both meet the 404 and run the loss handler.
    gate = fake_mcp_server.gate("both calls")
    held = fake_mcp_server.on("tools/call").times(2).delay(until=gate)
    cache = cache_type()
    handles: list[Any] = []
    try:
        async with asyncio.timeout(WAIT):
            handles = [await cache.get(fake_mcp_server.url, "run-0") for _ in range(2)]  # two uses of k
            calls = [asyncio.create_task(h.call_tool("echo", {"text": t})) for h, t in zip(handles, "ab", strict=True)]
            await held.wait_fired(2)
            fake_mcp_server.drop_session()
            gate.open()
            results = await asyncio.gather(*calls)
            assert [r.content[0].text for r in results] == ["a", "b"]
            # the first handler replaced the lost client; the buggy second one dropped that fresh client too
            fake_mcp_server.assert_initialize_count(initializes)
    finally:
        gate.open()
        async with asyncio.timeout(WAIT):
            await cache.aclose()
            for handle in handles:
                await handle.client.aclose()  # the buggy cache forgot the fresh client it dropped
