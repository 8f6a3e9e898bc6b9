"""Session reuse, asserted in CI: the test you write once for your MCP client.

Point the client at ``fake_mcp_server.url``, use it, then assert on what the fake saw.
Swap ``ReusingSessionClient`` for your own client; ``examples/buggy/`` shows what fails.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.reusing import ReusingSessionClient
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer


@pytest.mark.asyncio
async def test_calls_reuse_one_session_and_one_http_client(fake_mcp_server: FakeMCPServer, mcp_http_clients) -> None:
    fake_mcp_server.add_tool("search", lambda query: f"results for {query}")

    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        assert text(await client.call_tool("search", {"query": "mcp"})) == "results for mcp"
        for i in range(3):
            assert text(await client.call_tool("echo", {"text": f"call {i}"})) == f"call {i}"

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_tool_ran("echo", times=3)
    fake_mcp_server.assert_all_sessions_closed()  # the client DELETEd its session on close
    mcp_http_clients.assert_created(1)
    mcp_http_clients.assert_all_closed()


@pytest.mark.asyncio
async def test_the_journal_answers_the_questions_the_assertions_do_not(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})

    [session] = fake_mcp_server.sessions
    calls = fake_mcp_server.get_requests(method="tools/call", tool="echo")
    assert [(e.session_id, e.status) for e in calls] == [(session.id, 200)]
    assert fake_mcp_server.get_request(http_method="DELETE", session_id=session.id) is not None
    print(fake_mcp_server.journal)  # the sequence diagram, as failures show it (pytest -s to see it)
