"""The two-phase client, corrected: on a 404 a new session on the same HTTP client, the call retried.

These are the tests of ``examples/buggy/test_buggy_two_phase_client.py``; ``TwoPhaseMcpClient`` fails
them, and ``ReopeningMcpClient`` (the same design with phase 2 opening a new transport) passes.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.sdk import WAIT, text
from clients.two_phase import ReopeningMcpClient

from pytest_fake_mcp import FakeMCPServer, HTTPClientCounter

pytestmark = pytest.mark.asyncio


async def test_two_phase_client_never_resends_a_dead_session_id(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(WAIT), ReopeningMcpClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()  # the server forgets the session: its id now answers 404
        after = await client.call_tool("echo", {"text": "after"})

    assert text(after) == "after"
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})


# --8<-- [start:reopening]
async def test_two_phase_client_opens_a_new_session_after_a_404(
    fake_mcp_server: FakeMCPServer, mcp_http_clients: HTTPClientCounter
) -> None:
    fake_mcp_server.on("tools/call").nth(2).drop_session()  # the 2nd call finds its session gone (404)
    async with asyncio.timeout(WAIT), ReopeningMcpClient(fake_mcp_server.url) as client:
        first = await client.call_tool("echo", {"text": "first"})
        second = await client.call_tool("echo", {"text": "second"})

    assert (text(first), text(second)) == ("first", "second")
    mcp_http_clients.assert_created(1)  # the design's own flagship assertion holds...
    fake_mcp_server.assert_sessions(created=2)  # ...and the "re-initialization" really opened a session
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_all_sessions_closed()
    fake_mcp_server.assert_tool_ran("echo", times=2)  # the refused call did not run; its retry did
    # --8<-- [end:reopening]
