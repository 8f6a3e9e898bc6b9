"""The agent runtime, seen from its clients: a session per user, state per session, nothing shared.

The fake plays the runtime (``serve_agent_runtime``): its tool handlers keep each user's agent
sessions in ``ctx.state``, which the fake keeps per MCP session and forgets when the session ends.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.agent_runtime import AgentRuntimeClient, AgentSessionNotFoundError, serve_agent_runtime
from clients.sdk import WAIT, new_http_client

from pytest_fake_mcp import FakeMCPServer

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]


async def reach(client: AgentRuntimeClient, agent_session_id: str) -> str:
    """Whether ``client`` can send to ``agent_session_id``: "reached" or "not found"."""
    try:
        await client.send(agent_session_id, "hello?")
    except AgentSessionNotFoundError:
        return "not found"
    return "reached"


# --8<-- [start:isolation]
async def test_two_clients_get_isolated_sessions_and_state(fake_mcp_server: FakeMCPServer) -> None:
    serve_agent_runtime(fake_mcp_server)

    async with asyncio.timeout(WAIT), AgentRuntimeClient(fake_mcp_server.url) as alice:
        async with AgentRuntimeClient(fake_mcp_server.url) as bob:
            alices = await alice.create_session("reviewer")
            bobs = await bob.create_session("reviewer")
            await alice.send(alices, "review def f(): pass")
            follow_up = await alice.send(alices, "and the edge cases?")  # the same conversation, continued
            seen = {"alice": await alice.list_sessions(), "bob": await bob.list_sessions()}
            bob_to_alices = await reach(bob, alices)
        alice_after_bob_left = await alice.list_sessions()

    fake_mcp_server.assert_sessions(created=2, ended_by={"delete": 2})  # one MCP session per user, each closed
    fake_mcp_server.assert_no_stale_session_ids()
    assert follow_up["message_count"] == 2
    assert seen == {"alice": [alices], "bob": [bobs]}  # each sees only their own conversations
    assert bob_to_alices == "not found"
    assert alice_after_bob_left == [alices]
    # --8<-- [end:isolation]


# --8<-- [start:closed-404]
async def test_a_closed_clients_session_answers_404(fake_mcp_server: FakeMCPServer) -> None:
    serve_agent_runtime(fake_mcp_server)

    async with asyncio.timeout(WAIT), AgentRuntimeClient(fake_mcp_server.url) as bob:
        bobs = await bob.create_session("reviewer")
        async with AgentRuntimeClient(fake_mcp_server.url) as alice:
            await alice.create_session("reviewer")
        # Alice's client is closed: the server ended her session and forgot its state.
        bob_session, alice_session = fake_mcp_server.sessions  # in the order they began
        fake_mcp_server.assert_sessions(created=2, live=1, ended_by={"delete": 1})
        assert (alice_session.end_reason, bob_session.live) == ("delete", True)
        # Whoever holds her session id now (a leaked log line, a second client) gets a 404.
        assert await post_list_agent_sessions(fake_mcp_server.url, alice_session.id) == 404
        assert await bob.list_sessions() == [bobs]  # Bob's session is untouched

    fake_mcp_server.assert_all_sessions_closed()
    # --8<-- [end:closed-404]


async def post_list_agent_sessions(url: str, session_id: str) -> int:
    """The status a raw ``tools/call list_agent_sessions`` carrying ``session_id`` gets."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_agent_sessions"}}
    headers = {"accept": "application/json, text/event-stream", "mcp-session-id": session_id}
    async with new_http_client() as http_client:
        response = await http_client.post(url, json=message, headers=headers)
    return int(response.status_code)
