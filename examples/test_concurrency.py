"""Concurrent first calls share one ``initialize``, and a barrier proves they really were concurrent."""

from __future__ import annotations

import asyncio

import pytest
from clients.reusing import ReusingSessionClient
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer

CALLS = 4


@pytest.mark.asyncio
async def test_concurrent_first_calls_send_one_initialize(fake_mcp_server: FakeMCPServer) -> None:
    # The fake holds the tools/call requests until all of them have arrived: no sleeps, no luck.
    fake_mcp_server.on("tools/call").barrier(CALLS)

    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        results = await asyncio.gather(*(client.call_tool("echo", {"text": str(i)}) for i in range(CALLS)))

    assert [text(r) for r in results] == [str(i) for i in range(CALLS)]
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_concurrent(min_in_flight=CALLS)
    fake_mcp_server.assert_session_reused()
