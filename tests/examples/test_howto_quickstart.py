"""How-to: the first test (docs/quickstart.md, README.md). The regions between the markers are the docs' code."""

from __future__ import annotations

# --8<-- [start:first-test]
import asyncio

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@pytest.mark.asyncio
async def test_my_client_keeps_one_session(fake_mcp_server):
    fake_mcp_server.add_tool("search", lambda query: f"results for {query}")

    async with (
        asyncio.timeout(10),  # bound every client wait: mcp 1.x hangs for ever on some faults
        streamable_http_client(fake_mcp_server.url) as streams,  # 2 streams in mcp 2.x, 3 in 1.x
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        await session.call_tool("search", {"query": "mcp"})
        await session.call_tool("search", {"query": "pytest"})

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_tool_ran("search", times=2)
    fake_mcp_server.assert_all_sessions_closed()


# --8<-- [end:first-test]
