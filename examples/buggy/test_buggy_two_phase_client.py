"""The two-phase client "re-initializes" on 404 by calling ``initialize()`` on the same session.

Against a mocked transport its test passed ("HTTP client created once, initialize twice"). Against
the fake, the dead session id goes out again: on mcp 2.x the second ``initialize()`` sends nothing
and the retry carries the dead id; on mcp 1.x the ``initialize`` itself carries it.
``examples/test_two_phase.py`` runs the same two tests on ``ReopeningMcpClient``, which opens a new
transport in phase 2, and they pass.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from clients.sdk import WAIT, SessionError
from clients.two_phase import TwoPhaseMcpClient

from pytest_fake_mcp import FakeMCPServer


@pytest.mark.asyncio
async def test_two_phase_client_never_resends_a_dead_session_id(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(WAIT), TwoPhaseMcpClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()  # the server forgets the session: its id now answers 404
        # This test judges the wire, not the result. (Without the suppress it fails one step
        # earlier, on the client's own "Session not found" error, with the same diagram attached.)
        with contextlib.suppress(SessionError):
            await client.call_tool("echo", {"text": "after"})

    # Fails: after the 404 the client kept sending the dead id (marked ! in the diagram).
    fake_mcp_server.assert_no_stale_session_ids()


@pytest.mark.asyncio
async def test_two_phase_client_opens_a_new_session_after_a_404(
    fake_mcp_server: FakeMCPServer, mcp_http_clients
) -> None:
    # A fault this time: the 2nd tools/call finds its session gone (404), as after a server restart.
    fake_mcp_server.on("tools/call").nth(2).drop_session()
    async with asyncio.timeout(WAIT), TwoPhaseMcpClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "first"})
        with contextlib.suppress(SessionError):
            await client.call_tool("echo", {"text": "second"})

    mcp_http_clients.assert_created(1)  # passes: this half of the two-phase design is right
    # Fails: the "re-initialization" never opened a second session.
    fake_mcp_server.assert_sessions(created=2)
