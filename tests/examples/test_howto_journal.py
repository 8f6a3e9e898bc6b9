"""How-to: the wire journal (docs/journal.md): every exchange, queried like pytest-httpx."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:queries]
@pytest.mark.asyncio
async def test_query_the_journal(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "hi"})

    init = fake_mcp_server.get_request(method="initialize")  # the one match, or None; AssertionError if several
    session_id = init.response_session_id  # the Mcp-Session-Id the fake gave
    calls = fake_mcp_server.get_requests(method="tools/call", tool="echo", session_id=session_id)
    assert [(call.status, call.response_format) for call in calls] == [(200, "sse")]
    assert calls[0].request_body["params"]["arguments"] == {"text": "hi"}
    assert fake_mcp_server.get_requests(http_method="DELETE", session_id=session_id, status=200)
    assert fake_mcp_server.figures.initialize_count == 1
    assert fake_mcp_server.figures.tool_executions == {"echo": 1}


# --8<-- [end:queries]


# --8<-- [start:sessions]
@pytest.mark.asyncio
async def test_sessions_and_how_they_ended(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url):
        pass
    async with sdk_session(fake_mcp_server.url):
        fake_mcp_server.drop_session()  # every live session; or drop_session(session_id)

    first, second = fake_mcp_server.sessions  # live and ended, in the order they began
    assert (first.end_reason, second.end_reason) == ("delete", "dropped")
    assert fake_mcp_server.live_sessions == ()


# --8<-- [end:sessions]


# --8<-- [start:diagram]
@pytest.mark.asyncio
async def test_print_the_sequence_diagram(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()

    diagram = str(fake_mcp_server.journal)  # print(fake_mcp_server.journal) in a test, run with -s
    assert "initialize" in diagram
    assert "tools/list" in diagram
    print(fake_mcp_server.figures)  # every count at once: sessions, 404s, connections, peak concurrency


# --8<-- [end:diagram]
