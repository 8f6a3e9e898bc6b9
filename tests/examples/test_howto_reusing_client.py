"""How-to: the rules of a reusing client, each shown on the reference client (docs/reusing-client.md)."""

from __future__ import annotations

import asyncio

import pytest

from pytest_fake_mcp.client import ReusingSessionClient, SessionLostError


# --8<-- [start:single-flight]
@pytest.mark.asyncio
async def test_concurrent_first_calls_share_one_session(fake_mcp_server):
    fake_mcp_server.on("tools/call").barrier(3)  # answer no call until all three are in flight

    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        results = await asyncio.gather(*(client.call_tool("echo", {"text": str(n)}) for n in range(3)))

    assert [result.content[0].text for result in results] == ["0", "1", "2"]
    fake_mcp_server.assert_initialize_count(1)  # one handshake for three first calls (C02)
    fake_mcp_server.assert_concurrent(min_in_flight=3)  # and no lock serialised the calls (C03)


# --8<-- [end:single-flight]


# --8<-- [start:one-reopen]
@pytest.mark.asyncio
async def test_one_new_session_however_many_calls_met_the_404(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.connect()
        fake_mcp_server.on("tools/call").barrier(2)  # both calls in flight together ...
        fake_mcp_server.on("tools/call").drop_session()  # ... meet the lost session: two 404s
        await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))

    fake_mcp_server.assert_initialize_count(2)  # one new session for both (R08), not one each
    fake_mcp_server.assert_no_stale_session_ids(strict=True)  # no request, not even a DELETE, sent the dead id
    fake_mcp_server.assert_tool_ran("echo", times=2)  # the 404s ran nothing; each retry ran once
    mcp_http_clients.assert_created(1)  # the new session rode the same HTTP client (H01)


# --8<-- [end:one-reopen]


# --8<-- [start:not-retried]
@pytest.mark.asyncio
async def test_an_error_that_is_not_session_loss_goes_to_the_caller(fake_mcp_server):
    fake_mcp_server.on("tools/call").respond(503)

    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        with pytest.raises(Exception, match="Service Unavailable"):  # the SDK's MCP error, not retried
            await client.call_tool("echo", {"text": "charge once"})
        result = await client.call_tool("echo", {"text": "next"})

    assert result.content[0].text == "next"
    assert fake_mcp_server.get_requests(method="tools/call", status=503)  # sent once, answered 503, not resent
    assert len(fake_mcp_server.get_requests(method="tools/call")) == 2


# --8<-- [end:not-retried]


# --8<-- [start:bounded]
@pytest.mark.asyncio
async def test_a_server_that_keeps_losing_sessions_is_given_up_on(fake_mcp_server):
    fake_mcp_server.on("tools/call").always().drop_session()  # every call finds its session gone

    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, max_attempts=2) as client:
        with pytest.raises(SessionLostError, match="lost 2 times in a row"):
            await client.call_tool("echo", {"text": "x"})

    fake_mcp_server.assert_initialize_count(2)  # bounded (R04), and the call did not hang (R05)


# --8<-- [end:bounded]


# --8<-- [start:close-anywhere]
@pytest.mark.asyncio
async def test_close_from_another_task_deletes_the_session(fake_mcp_server):
    client = ReusingSessionClient(fake_mcp_server.url)
    await asyncio.create_task(client.call_tool("echo", {"text": "a"}))  # the session opens in another task

    async with asyncio.timeout(10):
        await client.aclose()  # closed from this task: the session's owner task exits its own contexts (T01)
    fake_mcp_server.mark_client_closed()

    fake_mcp_server.assert_all_sessions_closed()  # DELETE sent and answered (T08)
    fake_mcp_server.assert_no_requests_after_close()


# --8<-- [end:close-anywhere]
