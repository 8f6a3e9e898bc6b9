"""How-to: the session-loss faults, one test each (docs/faults.md). Each region is shown verbatim in that page."""

from __future__ import annotations

import asyncio

import pytest

from pytest_fake_mcp import SessionLossShape
from pytest_fake_mcp.client import ReusingSessionClient, SessionLostError, SessionOpenError


# --8<-- [start:drop-session]
@pytest.mark.asyncio
async def test_a_dropped_session_is_replaced_once(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})
        dropped = fake_mcp_server.drop_session()  # every live session now; or drop_session(session_id)
        await client.call_tool("echo", {"text": "b"})  # 404: a new session, the call retried

    assert dropped == [client.session_ids[0]]
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:drop-session]


# --8<-- [start:drop-after-answer]
@pytest.mark.asyncio
async def test_a_call_answered_before_the_loss_is_not_run_again(fake_mcp_server):
    fake_mcp_server.on("tools/call").drop_session(after_answer=True)  # the call runs, then its session is gone
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        first = await client.call_tool("echo", {"text": "a"})
        await client.call_tool("echo", {"text": "b"})  # meets the 404, on a new session

    assert first.content[0].text == "a"
    assert len(fake_mcp_server.executions("echo", {"text": "a"})) == 1  # ran once, never replayed
    fake_mcp_server.assert_initialize_count(2)


# --8<-- [end:drop-after-answer]


# --8<-- [start:restart]
@pytest.mark.asyncio
async def test_the_client_survives_a_server_restart(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})
        fake_mcp_server.restart()  # every session forgotten, open streams ended; same port
        await client.call_tool("echo", {"text": "b"})

    fake_mcp_server.assert_sessions(created=2, ended_by={"restart": 1, "delete": 1})
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:restart]


# --8<-- [start:idle]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(idle_timeout=60)
async def test_a_session_that_idled_out_is_replaced(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})
        expired = fake_mcp_server.advance_idle_clock(61, include_streaming=True)  # no real waiting
        await client.call_tool("echo", {"text": "b"})

    assert expired == [client.session_ids[0]]
    fake_mcp_server.assert_sessions(created=2, ended_by={"idle": 1, "delete": 1})


# --8<-- [end:idle]


# --8<-- [start:cap-sessions]
@pytest.mark.asyncio
async def test_a_full_server_is_not_taken_for_session_loss(fake_mcp_server):
    fake_mcp_server.cap_sessions(1)  # a second live session is refused: 503 "Too many open sessions"
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as first:
        await first.call_tool("echo", {"text": "a"})
        async with ReusingSessionClient(fake_mcp_server.url) as second:
            with pytest.raises(SessionOpenError):  # surfaced at once, not retried in a loop
                await second.call_tool("echo", {"text": "b"})
            await first.aclose()  # its DELETE makes room
            await second.call_tool("echo", {"text": "b"})

    fake_mcp_server.assert_initialize_count(3)
    fake_mcp_server.assert_all_sessions_closed()


# --8<-- [end:cap-sessions]


# --8<-- [start:sessions-expired]
@pytest.mark.asyncio
async def test_persistent_session_loss_fails_within_a_bound(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, max_attempts=2) as client:
        await client.call_tool("echo", {"text": "a"})
        with fake_mcp_server.sessions_expired(), pytest.raises(SessionLostError):  # every session is unknown:
            await client.call_tool("echo", {"text": "b"})  # gives up after 2 new sessions, does not spin
        await client.call_tool("echo", {"text": "c"})  # the outage is over: a new session works

    fake_mcp_server.assert_initialize_count(4)  # the first session, 2 tries in the outage, 1 after it
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:sessions-expired]


# --8<-- [start:strict-initialize]
@pytest.mark.asyncio
async def test_a_new_session_carries_no_old_id(fake_mcp_server):
    fake_mcp_server.strict_initialize()  # an initialize carrying Mcp-Session-Id is refused with 400
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})
        fake_mcp_server.drop_session()
        await client.call_tool("echo", {"text": "b"})

    assert [init.status for init in fake_mcp_server.get_requests(method="initialize")] == [200, 200]
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:strict-initialize]


# --8<-- [start:shapes]
NOT_FOUND_SHAPES = [shape for shape in SessionLossShape if shape.session_unknown and shape.status == 404]


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", NOT_FOUND_SHAPES, ids=lambda shape: shape.name)
async def test_every_404_shape_is_read_as_session_loss(fake_mcp_server, shape):
    fake_mcp_server.on("tools/call").drop_session(shape=shape)  # the dead id is answered in this shape
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        result = await client.call_tool("echo", {"text": "a"})

    assert result.content[0].text == "a"
    assert fake_mcp_server.get_requests(method="tools/call")[0].status == 404
    fake_mcp_server.assert_initialize_count(2)


# --8<-- [end:shapes]
