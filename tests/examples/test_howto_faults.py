"""How-to: scripting faults (README.md; docs/faults.md has the full vocabulary)."""

from __future__ import annotations

# --8<-- [start:faults]
import asyncio

import pytest

from pytest_fake_mcp.client import ReusingSessionClient


@pytest.mark.asyncio
async def test_client_under_faults(fake_mcp_server):
    fake_mcp_server.on("initialize").delay(0.05)  # a slow handshake
    fake_mcp_server.on("tools/call").barrier(2)  # hold the first 2 calls until both arrived
    fake_mcp_server.on("tools/call").nth(3).drop_session()  # the 3rd call meets a 404

    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "ab"))
        await client.call_tool("echo", {"text": "c"})  # 404: a new session, the call retried

    fake_mcp_server.assert_concurrent(min_in_flight=2)
    fake_mcp_server.assert_initialize_count(2)
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_tool_ran("echo", times=3)  # the refused call never ran; its retry did


# --8<-- [end:faults]
