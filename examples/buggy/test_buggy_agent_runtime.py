"""Two users behind one pooled MCP session: the agent runtime cannot tell them apart.

``PooledAgentRuntimeClient`` takes the process's shared session for the server, so Alice and Bob
send the same ``Mcp-Session-Id``. The runtime scopes agent sessions per MCP session, so each user
sees, and can write to, the other's conversations. The test is a shorter copy of
``examples/test_agent_runtime.py``'s, with the pooled client in place of ``AgentRuntimeClient``.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.agent_runtime import PooledAgentRuntimeClient, SessionPool, serve_agent_runtime
from clients.sdk import WAIT

from pytest_fake_mcp import FakeMCPServer

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]


async def test_two_clients_get_isolated_sessions_and_state(fake_mcp_server: FakeMCPServer) -> None:
    serve_agent_runtime(fake_mcp_server)
    pool = SessionPool()  # in the app, a module-level singleton

    async with (
        asyncio.timeout(WAIT),
        pool,
        PooledAgentRuntimeClient(fake_mcp_server.url, pool) as alice,
        PooledAgentRuntimeClient(fake_mcp_server.url, pool) as bob,
    ):
        await alice.create_session("reviewer")
        await bob.create_session("reviewer")

    # Fails: one MCP session for two users, so the runtime sees one client (and Bob's
    # list_sessions() would show Alice's conversation beside his own).
    fake_mcp_server.assert_sessions(created=2, ended_by={"delete": 2})
