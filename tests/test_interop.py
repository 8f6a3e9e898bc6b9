"""Real SDK clients against the fake over loopback: the wire matches protocol.md §3 transcripts B, C and D.

Each client runs initialize -> list -> call -> DELETE, and the journal must show exactly the
sequence the real SDK servers saw. Run this module under both venvs: mcp 2.x (``.venv``) covers
``ClientSession`` and ``Client`` in legacy and auto mode; mcp 1.x (``.venv-mcp1``) covers transcript C.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from _sdk import MODES, as_json, sdk_session
from pytest_fake_mcp import Exchange, FakeMCPServer

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
ONLY_MCP2 = pytest.mark.skipif(not MCP2, reason="mcp.Client exists in mcp 2.x only")
FIRST_ID = 1 if MCP2 else 0
"""The 2.x client numbers requests from 1, the 1.x client from 0 (protocol.md §1.1)."""
HANDSHAKE_VERSION = "2025-11-25"

Wire = tuple[str, str | None, int | None, bool, str]
"""(HTTP method, JSON-RPC method, status, request carried a session id, response format)."""


def wire(exchange: Exchange) -> Wire:
    return (
        exchange.http_method,
        exchange.rpc_method,
        exchange.status,
        exchange.session_id is not None,
        exchange.response_format,
    )


def assert_wire(server: FakeMCPServer, expected: list[Wire]) -> None:
    """POSTs and DELETE in exact order; the GET as a set.

    The SDK client opens its GET stream from a task of its own when it sends
    ``notifications/initialized``, so the GET races with the POSTs that follow (and even with that
    notification): its position is the client's concurrency, not ours.
    """
    __tracebackhide__ = True
    actual = [wire(e) for e in server.journal.exchanges]
    assert [w for w in actual if w[0] != "GET"] == [w for w in expected if w[0] != "GET"], server.journal
    assert [w for w in actual if w[0] == "GET"] == [w for w in expected if w[0] == "GET"], server.journal


def handshake(fmt: str, *, listed: bool = True) -> list[Wire]:
    """Transcript B/C: initialize, initialized, GET, [tools/list], tools/call, DELETE."""
    sequence: list[Wire] = [
        ("POST", "initialize", 200, False, fmt),
        ("POST", "notifications/initialized", 202, True, "empty"),
        ("GET", None, 200, True, "sse"),
    ]
    if listed:
        sequence.append(("POST", "tools/list", 200, True, fmt))
    sequence.append(("POST", "tools/call", 200, True, fmt))
    if not listed:
        # protocol.md §6 item 18: call_tool lists tools after the result to validate its output schema.
        sequence.append(("POST", "tools/list", 200, True, fmt))
    sequence.append(("DELETE", None, 200, True, "empty"))
    return sequence


def assert_handshake_headers(server: FakeMCPServer, first_id: int) -> None:
    """initialize carries no session and no version header; every later request carries both."""
    __tracebackhide__ = True
    init = server.get_request(method="initialize", session_id=None)
    assert init is not None
    assert init.rpc_id == first_id
    assert init.protocol_version is None
    session_id = init.response_session_id
    assert session_id is not None
    later = [e for e in server.journal.exchanges if e.seq > init.seq]
    assert {e.session_id for e in later} == {session_id}
    assert {e.protocol_version for e in later} == {HANDSHAKE_VERSION}
    ids = [e.rpc_id for e in later if e.kind == "request"]
    assert ids == list(range(first_id + 1, first_id + 1 + len(ids)))


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", MODES)
async def test_client_session_runs_the_transcript_sequence(fake_mcp_server: FakeMCPServer, fmt: str) -> None:
    """2.x: transcript B through ``ClientSession``; 1.x: transcript C (ids from 0)."""
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        tools = await session.list_tools()
        result = await session.call_tool("echo", {"text": "hi"})

    assert [t.name for t in tools.tools] == ["echo"]
    assert as_json(result) == {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert_wire(fake_mcp_server, handshake(fmt))
    assert_handshake_headers(fake_mcp_server, FIRST_ID)
    [record] = fake_mcp_server.sessions
    assert record.end_reason == "delete"


@ONLY_MCP2
@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", MODES)
async def test_client_in_legacy_mode_runs_transcript_b(fake_mcp_server: FakeMCPServer, fmt: str) -> None:
    from mcp import Client

    async with asyncio.timeout(10), Client(fake_mcp_server.url, mode="legacy") as client:
        await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})

    assert result.content[0].text == "hi"
    assert_wire(fake_mcp_server, handshake(fmt))
    assert_handshake_headers(fake_mcp_server, 1)


@ONLY_MCP2
@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", MODES)
@pytest.mark.fake_mcp_server(era="handshake")
async def test_client_in_auto_mode_probes_then_falls_back_transcript_d_then_b(
    fake_mcp_server: FakeMCPServer, fmt: str
) -> None:
    from mcp import Client

    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})

    assert result.content[0].text == "hi"
    assert_wire(fake_mcp_server, [("POST", "server/discover", 400, False, "json"), *handshake(fmt)])
    probe = fake_mcp_server.journal.exchanges[0]
    assert probe.rpc_id == 1
    assert probe.protocol_version == "2026-07-28"
    assert probe.request_headers["mcp-method"] == "server/discover"
    assert probe.response_messages == (
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}},
    )
    # The probe's minted id is discarded (2.x): the only session is the one initialize opened.
    assert [s.id for s in fake_mcp_server.sessions] == [fake_mcp_server.journal.exchanges[1].response_session_id]
    assert_handshake_headers(fake_mcp_server, 2)


@ONLY_MCP2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(flavour="mcp1")
async def test_client_in_auto_mode_against_mcp1_flavour_gets_the_1x_probe_answer(
    fake_mcp_server: FakeMCPServer,
) -> None:
    """Transcript D verbatim: a 1.x server answers the probe with ``"id":"server-error"`` and keeps the id."""
    from mcp import Client

    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})

    probe = fake_mcp_server.journal.exchanges[0]
    assert (probe.rpc_method, probe.status, probe.response_session_id is not None) == ("server/discover", 400, True)
    assert probe.response_messages[0]["id"] == "server-error"
    assert_wire(fake_mcp_server, [wire(probe), *handshake("sse", listed=False)])
    # 1.x keeps the session a failed opening request minted (protocol.md §6 item 1).
    assert fake_mcp_server.sessions[0].id == probe.response_session_id


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", MODES)
async def test_call_tool_of_an_unlisted_tool_sends_an_implicit_tools_list(
    fake_mcp_server: FakeMCPServer, fmt: str
) -> None:
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "hi"})

    assert_wire(fake_mcp_server, handshake(fmt, listed=False))
    assert fake_mcp_server.figures.tool_executions == {"echo": 1}


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)  # the unknown tool is the point
async def test_call_tool_with_an_error_result_sends_no_implicit_tools_list(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("nope", {})

    assert as_json(result) == {"content": [{"type": "text", "text": "Unknown tool: nope"}], "isError": True}
    assert fake_mcp_server.get_requests(method="tools/list") == []
