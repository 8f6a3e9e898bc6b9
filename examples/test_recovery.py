"""A good client survives the server losing its session: one new session, the call retried, no dead id resent.

The SDK's own clients do not: after a 404 they keep the dead id. The two-phase client does not
either (``examples/buggy/test_buggy_two_phase_client.py``) until phase 2 opens a new transport
(``examples/test_two_phase.py``).
"""

from __future__ import annotations

import asyncio

import pytest
from clients.reusing import ReusingSessionClient
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer


@pytest.mark.asyncio
async def test_client_opens_a_new_session_after_drop_session(fake_mcp_server: FakeMCPServer, mcp_http_clients) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()  # the server forgets the session: its id now answers 404
        assert text(await client.call_tool("echo", {"text": "after"})) == "after"

    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_session_reused()  # a new session only because the server ended the old one
    fake_mcp_server.assert_tool_ran("echo", times=2)  # the refused call did not run; its retry did
    mcp_http_clients.assert_created(1)  # the new session rode the same HTTP client


@pytest.mark.asyncio
async def test_client_opens_a_new_session_after_restart(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.restart()  # every session forgotten, open streams ended; same port
        assert text(await client.call_tool("echo", {"text": "after"})) == "after"

    fake_mcp_server.assert_sessions(created=2, ended_by={"restart": 1, "delete": 1})
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_all_sessions_closed()


@pytest.mark.asyncio
async def test_client_recovers_when_a_call_meets_a_404(fake_mcp_server: FakeMCPServer) -> None:
    # A scripted fault instead of a call from the test: the 2nd tools/call finds its session gone.
    fake_mcp_server.on("tools/call").nth(2).drop_session()

    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        for i in range(3):
            assert text(await client.call_tool("echo", {"text": f"call {i}"})) == f"call {i}"

    fake_mcp_server.assert_initialize_count(2)
    fake_mcp_server.assert_no_stale_session_ids()
    assert [e.status for e in fake_mcp_server.get_requests(method="tools/call")] == [200, 404, 200, 200]
