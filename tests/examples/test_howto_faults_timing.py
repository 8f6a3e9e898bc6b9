"""How-to: delays, gates, barriers and hangs, one test each (docs/faults.md). Each region is shown in that page."""

from __future__ import annotations

import asyncio

import pytest
from _howto_sdk import SDKError

from pytest_fake_mcp import Outcome
from pytest_fake_mcp.client import ReusingSessionClient


# --8<-- [start:delay]
@pytest.mark.asyncio
async def test_a_call_slower_than_the_read_timeout_fails_and_the_next_works(fake_mcp_server):
    fake_mcp_server.on("tools/call", arguments={"text": "slow"}).delay(2)  # headers 2 s late
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=0.5) as client:
        with pytest.raises(SDKError, match=r"[Tt]imed out"):  # the SDK's read timeout, after 0.5 s
            await client.call_tool("echo", {"text": "slow"})
        result = await client.call_tool("echo", {"text": "fast"})  # same session, still usable

    assert result.content[0].text == "fast"
    fake_mcp_server.assert_initialize_count(1)


# --8<-- [end:delay]


# --8<-- [start:delay-between-events]
@pytest.mark.asyncio
async def test_a_slow_stream_still_delivers_its_result(fake_mcp_server):
    fake_mcp_server.on("tools/call").delay(0.2, between_events=True)  # headers at once, each event 0.2 s late
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=2) as client:
        result = await client.call_tool("echo", {"text": "a"})

    assert result.content[0].text == "a"
    call = fake_mcp_server.get_request(method="tools/call")
    assert (call.response_format, call.duration >= 0.2) == ("sse", True)


# --8<-- [end:delay-between-events]


# --8<-- [start:gate]
@pytest.mark.asyncio
async def test_a_late_404_from_the_old_session_does_not_retire_the_new_one(fake_mcp_server):
    gate = fake_mcp_server.gate("slow call")
    held = fake_mcp_server.on("tools/call", arguments={"text": "slow"}).delay(until=gate)
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "first"})
        slow = asyncio.create_task(client.call_tool("echo", {"text": "slow"}))
        await held.wait_fired()  # the slow call is now held by the fake: no sleep
        fake_mcp_server.drop_session()
        await client.call_tool("echo", {"text": "fast"})  # 404, a new session
        gate.open()  # the held call goes on, meets the 404 of the session already replaced
        assert (await slow).content[0].text == "slow"

    fake_mcp_server.assert_initialize_count(2)  # the late 404 did not open a third session
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:gate]


# --8<-- [start:barrier]
@pytest.mark.asyncio
async def test_concurrent_first_calls_share_one_session(fake_mcp_server):
    fake_mcp_server.on("tools/call").barrier(3)  # hold calls until 3 arrived, then release them together
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "abc"))

    fake_mcp_server.assert_concurrent(min_in_flight=3)
    fake_mcp_server.assert_initialize_count(1)


# --8<-- [end:barrier]


# --8<-- [start:barrier-drop]
@pytest.mark.asyncio
async def test_concurrent_calls_meeting_one_404_open_one_new_session(fake_mcp_server):
    fake_mcp_server.on("tools/call").barrier(3)  # 3 calls in flight together ...
    fake_mcp_server.on("tools/call").drop_session()  # ... and the first one released drops their session
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.connect()
        await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "abc"))

    assert [call.status for call in fake_mcp_server.get_requests(method="tools/call")][:3] == [404] * 3
    fake_mcp_server.assert_initialize_count(2)  # one recovery for all three
    fake_mcp_server.assert_tool_ran("echo", times=3)


# --8<-- [end:barrier-drop]


# --8<-- [start:hang]
@pytest.mark.asyncio
async def test_a_call_that_is_never_answered_times_out(fake_mcp_server):
    fake_mcp_server.on("tools/call").hang()  # read the request, never answer
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=0.5) as client:
        with pytest.raises(SDKError, match=r"[Tt]imed out"):
            await client.call_tool("echo", {"text": "a"})

    assert fake_mcp_server.get_request(method="tools/call").outcome in (Outcome.IN_FLIGHT, Outcome.DISCONNECTED)
    assert fake_mcp_server.executions() == []  # the tool never ran


# --8<-- [end:hang]


# --8<-- [start:latency]
@pytest.mark.asyncio
async def test_latency_for_a_block(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        with fake_mcp_server.latency(0.2, method="tools/call"):  # every matching request inside waits 0.2 s
            await client.call_tool("echo", {"text": "slow"})
        await client.call_tool("echo", {"text": "fast"})

    slow, fast = fake_mcp_server.get_requests(method="tools/call")
    assert (len(slow.faults), fast.faults) == (1, ())
    assert slow.duration >= 0.2


# --8<-- [end:latency]
