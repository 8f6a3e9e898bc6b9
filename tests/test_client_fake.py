"""ReusingSessionClient against the fake server: the wire oracles hold through outages and restarts."""

from __future__ import annotations

import asyncio

import pytest

from pytest_fake_mcp import FakeMCPServer, ReusingSessionClient, SessionLostError


@pytest.mark.asyncio
async def test_an_outage_fails_clearly_and_never_resends_a_dead_id(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
        await client.call_tool("echo", {"text": "before"})
        with fake_mcp_server.sessions_expired(), pytest.raises(SessionLostError, match="lost 3 times"):
            await client.call_tool("echo", {"text": "during"})
        result = await client.call_tool("echo", {"text": "after"})
    assert result.content[0].text == "after"
    fake_mcp_server.assert_no_stale_session_ids()
    assert fake_mcp_server.initialize_count == 1 + 3 + 1  # first, three tries in the outage, after
    fake_mcp_server.assert_tool_ran("echo", times=2)  # nothing ran during the outage


@pytest.mark.asyncio
async def test_a_drop_then_restart_each_cost_one_initialize(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
        await client.call_tool("echo", {"text": "a"})
        fake_mcp_server.drop_session()
        await client.call_tool("echo", {"text": "b"})
        fake_mcp_server.restart()
        await client.call_tool("echo", {"text": "c"})
    fake_mcp_server.assert_initialize_count(3)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_all_sessions_closed()
    fake_mcp_server.assert_sessions(created=3, ended_by={"dropped": 1, "restart": 1, "delete": 1})
