"""Sessions (_sessions.py and the session handling of _app.py): GET streams, DELETE, the session history, flavours.

Most tests speak raw HTTP with httpx, so each status and body is asserted as the SDK servers send
it (protocol.md §1.4, §1.5); the last ones show what a real SDK client makes of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from _sdk import sdk_session
from pytest_fake_mcp import EndReason, FakeMCPServer

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
if MCP2:
    from mcp import MCPError as SDKError
else:
    from mcp import McpError as SDKError

VERSION = "2025-11-25"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
FLAVOURS = [
    pytest.param("mcp2", marks=pytest.mark.fake_mcp_server(flavour="mcp2", json_response=True), id="mcp2"),
    pytest.param("mcp1", marks=pytest.mark.fake_mcp_server(flavour="mcp1", json_response=True), id="mcp1"),
]


def session_headers(session_id: str) -> dict[str, str]:
    return {**ACCEPT, "mcp-session-id": session_id, "mcp-protocol-version": VERSION}


async def initialize(client: httpx.AsyncClient, url: str) -> str:
    """Open a session with raw POSTs (initialize + initialized) and return its id."""
    response = await client.post(url, json=INITIALIZE, headers=ACCEPT)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = await client.post(url, json=initialized, headers=session_headers(session_id))
    assert response.status_code == 202
    return session_id


def first_message(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON answer, or the first SSE frame's."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = next(line for line in response.text.splitlines() if line.startswith("data: "))
        return dict(json.loads(data.removeprefix("data: ")))
    return dict(response.json())


@contextlib.asynccontextmanager
async def raw_client() -> AsyncIterator[httpx.AsyncClient]:
    async with asyncio.timeout(10), httpx.AsyncClient(timeout=5) as client:
        yield client


# --- GET stream and DELETE -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_second_get_stream_on_a_session_gets_409_and_delete_ends_the_first(
    fake_mcp_server: FakeMCPServer,
) -> None:
    url = fake_mcp_server.url
    async with raw_client() as client:
        session_id = await initialize(client, url)
        headers = session_headers(session_id)
        async with client.stream("GET", url, headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"] == "text/event-stream"
            assert stream.headers["mcp-session-id"] == session_id

            second = await client.get(url, headers=headers)
            assert second.status_code == 409
            assert second.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Conflict: Only one SSE stream is allowed per session"},
            }

            deleted = await client.delete(url, headers=headers)
            assert (deleted.status_code, deleted.content) == (200, b"")
            assert deleted.headers["mcp-session-id"] == session_id
            # DELETE ends the session, and with it the open stream: the body ends (bounded by raw_client).
            assert [chunk async for chunk in stream.aiter_bytes()] == []

        after = await client.get(url, headers=headers)

    assert after.status_code == 404
    gets = fake_mcp_server.get_requests(http_method="GET")
    assert [g.status for g in gets] == [200, 409, 404]
    [record] = fake_mcp_server.sessions
    assert record.end_reason is EndReason.DELETE


@pytest.mark.asyncio
@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_delete_ends_the_session_and_later_requests_get_the_flavours_404(
    fake_mcp_server: FakeMCPServer, flavour: str
) -> None:
    url = fake_mcp_server.url
    async with raw_client() as client:
        session_id = await initialize(client, url)
        deleted = await client.delete(url, headers=session_headers(session_id))
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        after = await client.post(url, json=ping, headers=session_headers(session_id))

    assert deleted.status_code == 200
    assert after.status_code == 404
    if flavour == "mcp2":  # 2.x forgets the id at once (protocol.md §6 item 7)
        assert after.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
        assert "mcp-session-id" not in after.headers
    else:  # 1.x keeps the dead transport registered
        assert after.json() == {
            "jsonrpc": "2.0",
            "id": "server-error",
            "error": {"code": -32600, "message": "Not Found: Session has been terminated"},
        }
        assert after.headers["mcp-session-id"] == session_id


@pytest.mark.asyncio
@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_unknown_method_gets_the_flavours_error_code(fake_mcp_server: FakeMCPServer, flavour: str) -> None:
    async with raw_client() as client:
        session_id = await initialize(client, fake_mcp_server.url)
        foo = {"jsonrpc": "2.0", "id": 7, "method": "foo/bar"}
        response = await client.post(fake_mcp_server.url, json=foo, headers=session_headers(session_id))

    assert response.status_code == 200
    expected = (
        {"code": -32601, "message": "Method not found", "data": "foo/bar"}
        if flavour == "mcp2"
        else {"code": -32602, "message": "Invalid request parameters", "data": ""}
    )
    assert first_message(response) == {"jsonrpc": "2.0", "id": 7, "error": expected}
    record = fake_mcp_server.get_request(method="foo/bar")
    assert record is not None
    assert record.error_code == expected["code"]


# --- the session history ---------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(json_response=True)
async def test_sessions_record_creation_end_reason_initialize_count_and_requests(
    fake_mcp_server: FakeMCPServer,
) -> None:
    url = fake_mcp_server.url
    async with raw_client() as client:
        deleted_id = await initialize(client, url)
        again = await client.post(url, json=INITIALIZE, headers=session_headers(deleted_id))
        assert (again.status_code, again.headers["mcp-session-id"]) == (200, deleted_id)
        await client.delete(url, headers=session_headers(deleted_id))
        dropped_id = await initialize(client, url)
        live_id = await initialize(client, url)
        assert fake_mcp_server.drop_session(dropped_id) == [dropped_id]
        gone = await client.post(
            url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=session_headers(dropped_id)
        )

    assert gone.status_code == 404
    deleted, dropped, live = fake_mcp_server.sessions
    assert [s.id for s in (deleted, dropped, live)] == [deleted_id, dropped_id, live_id]
    assert [s.end_reason for s in (deleted, dropped, live)] == [EndReason.DELETE, EndReason.DROPPED, None]
    assert [s.initialize_count for s in (deleted, dropped, live)] == [2, 1, 1]
    assert [s.live for s in (deleted, dropped, live)] == [False, False, True]
    assert fake_mcp_server.live_sessions == (live,)
    # Every exchange that carried (or minted) the id, by journal seq: initialize, initialized, initialize, DELETE.
    assert deleted.requests == (1, 2, 3, 4)
    assert deleted.created_by == 1
    assert dropped.requests == (5, 6, 9)
    assert deleted.protocol_version == VERSION
    assert deleted.ended is not None
    assert deleted.created <= deleted.ended
    assert dropped.ended is not None
    assert live.ended is None
    assert str(deleted) == f"session {deleted_id[:8]}: 2 initialize, 4 requests, ended (delete)"


@pytest.mark.asyncio
async def test_restart_ends_every_session(fake_mcp_server: FakeMCPServer) -> None:
    async with raw_client() as client:
        first = await initialize(client, fake_mcp_server.url)
        second = await initialize(client, fake_mcp_server.url)
        fake_mcp_server.restart()

    assert [(s.id, s.end_reason) for s in fake_mcp_server.sessions] == [
        (first, EndReason.RESTART),
        (second, EndReason.RESTART),
    ]
    assert fake_mcp_server.live_sessions == ()


# --- what an SDK client makes of it -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_dropped_session_surfaces_as_the_sdks_session_error(fake_mcp_server: FakeMCPServer) -> None:
    """2.x takes code and message from the 404 body; 1.x reports +32600 "Session terminated" (protocol.md §4)."""
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        fake_mcp_server.drop_session()
        with pytest.raises(SDKError) as info:
            await session.send_ping()

    expected = (-32600, "Session not found") if MCP2 else (32600, "Session terminated")
    assert (info.value.error.code, info.value.error.message) == expected
    assert fake_mcp_server.figures.initialize_count == 1  # neither SDK client re-initializes
    assert [e.status for e in fake_mcp_server.get_requests(http_method="DELETE")] == [404]


def test_the_live_sessions_are_those_not_ended_in_the_order_they_were_added() -> None:
    """However a session ends (DELETE, a drop, idle expiry, a restart), it leaves the live ones and stays known."""
    from pytest_fake_mcp._record._sessions import EndReason, SessionRegistry

    registry = SessionRegistry()
    sessions = [registry.mint(now=0.0, seq=seq) for seq in range(1, 6)]
    for session in sessions:
        registry.add(session)
    assert registry.live() == sessions
    sessions[1].end(EndReason.DELETE, 1.0)
    sessions[3].expire_if_idle(100.0, idle_timeout=10.0)
    assert registry.live() == [sessions[0], sessions[2], sessions[4]]
    assert registry.live() == [sessions[0], sessions[2], sessions[4]]  # read again: the same
    assert registry.get(sessions[1].id) is sessions[1]
    assert registry.all() == sessions
    late = registry.mint(now=2.0, seq=6)
    registry.add(late)
    assert registry.end_all(EndReason.DROPPED, 3.0) == [sessions[0], sessions[2], sessions[4], late]
    assert registry.live() == []
    registry.clear()
    assert registry.all() == []
