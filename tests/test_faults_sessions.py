"""Session faults met by real SDK clients: drops, restarts, idle expiry, caps, "session unknown" shapes, strict init."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from _fault_helpers import MCP1, attempt, echo, raw_call, raw_initialize, sdk_session, seen, text_of
from pytest_fake_mcp import EndReason, FakeMCPServer, Outcome, SessionLossShape

NOT_FOUND_CODE = 32600 if MCP1 else -32600
"""What the SDK client raises on a 404 (1.x flips the sign: protocol.md §4)."""


def leaf_names(seen_: object) -> set[str]:
    return {type(e).__name__ for e in getattr(seen_, "leaves", [])}


# --- drop ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_dropped_session_answers_404_and_a_new_session_works(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        assert text_of(await session.call_tool("echo", {"text": "a"})) == "a"
        [dropped] = fake_mcp_server.drop_session()
        lost = await seen(session.call_tool("echo", {"text": "b"}))
    assert lost.code == NOT_FOUND_CODE
    assert lost.message == ("Session terminated" if MCP1 else "Session not found")
    async with sdk_session(fake_mcp_server.url) as again:  # what a good client does: a new session, one retry
        assert text_of(await again.call_tool("echo", {"text": "b"})) == "b"
    refused = fake_mcp_server.get_requests(method="tools/call", session_id=dropped)[-1]
    assert refused.status == 404
    assert any(f"dropped ['{dropped[:8]}']" in event.text for event in fake_mcp_server.journal.events)
    assert fake_mcp_server.sessions[0].end_reason is EndReason.DROPPED


@pytest.mark.asyncio
async def test_after_n_requests_the_session_is_gone(fake_mcp_server: FakeMCPServer) -> None:
    drop = fake_mcp_server.on("tools/call").after(1).drop_session()
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), echo("c"))
    assert [r.ok for r in results[1:]] == [True, False, False]
    assert results[2].code == NOT_FOUND_CODE
    first, second, third = fake_mcp_server.get_requests(method="tools/call")
    assert (first.status, second.status, third.status) == (200, 404, 404)
    assert second.faults == (str(drop),)
    assert third.faults == ()  # already gone: the fake's own 404, no fault needed


@pytest.mark.asyncio
async def test_dropped_after_answering_the_call_ran_but_the_client_errs(fake_mcp_server: FakeMCPServer) -> None:
    """R12: the SDK's tools/list after a first call meets the dead session, so call_tool raises after the run."""
    fake_mcp_server.on("tools/call").drop_session(after_answer=True)
    results = await attempt(fake_mcp_server.url, echo("a"))
    assert results[1].code == NOT_FOUND_CODE
    [call] = fake_mcp_server.get_requests(method="tools/call")
    assert call.status == 200
    [listing] = fake_mcp_server.get_requests(method="tools/list")
    assert listing.status == 404
    assert [str(e) for e in fake_mcp_server.executions("echo", {"text": "a"})] == [
        f'echo({{"text": "a"}}) in exchange #{call.seq}'
    ]


# --- restart --------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_restart_forgets_every_session_and_keeps_the_port(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with sdk_session(url) as first, sdk_session(url) as second:
        fake_mcp_server.restart()
        assert (await seen(first.call_tool("echo", {"text": "a"}))).code == NOT_FOUND_CODE
        assert (await seen(second.call_tool("echo", {"text": "a"}))).code == NOT_FOUND_CODE
    assert fake_mcp_server.url == url
    results = await attempt(url, echo("b"))
    assert [r.ok for r in results] == [True, True]
    ended = [s.end_reason for s in fake_mcp_server.sessions]
    assert ended[:2] == [EndReason.RESTART, EndReason.RESTART]
    for stream in fake_mcp_server.get_requests(http_method="GET"):
        if stream.status == 200 and stream.session_id in [s.id for s in fake_mcp_server.sessions[:2]]:
            assert stream.outcome is Outcome.CUT  # a GET stream open at the restart was ended
            assert "restart() ended this exchange" in stream.faults


@pytest.mark.asyncio
async def test_restart_ends_an_open_sse_stream_and_a_held_call(fake_mcp_server: FakeMCPServer) -> None:
    running, finish = threading.Event(), threading.Event()

    async def slow() -> str:
        running.set()
        await asyncio.to_thread(finish.wait, 5)
        return "too late"

    fake_mcp_server.add_tool("slow", slow)
    held = fake_mcp_server.on("tools/call", tool="echo").hang()
    streaming = asyncio.create_task(attempt(fake_mcp_server.url, lambda s: s.call_tool("slow", {}), read_s=0.5))
    holding = asyncio.create_task(attempt(fake_mcp_server.url, echo("a")))
    await held.wait_fired()
    assert await asyncio.to_thread(running.wait, 5)
    async with asyncio.timeout(5):  # its SSE headers go out a loop turn after the handler starts: wait for them
        while (call := fake_mcp_server.get_request(tool="slow")) is None or call.status is None:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    fake_mcp_server.restart()
    finish.set()
    cut, closed = await streaming, await holding
    assert cut[1].code == (408 if MCP1 else -32000)  # 1.x waits for its read timeout (protocol.md §6 item 16)
    assert "RemoteProtocolError" in leaf_names(closed[-1])  # closed before any answer
    open_stream = fake_mcp_server.get_request(method="tools/call", tool="slow")
    assert open_stream is not None
    assert (open_stream.status, open_stream.outcome) == (200, Outcome.CUT)
    hung = fake_mcp_server.get_request(method="tools/call", tool="echo")
    assert hung is not None
    assert (hung.status, hung.outcome) == (None, Outcome.CUT)
    assert hung.faults == (str(held), "restart() ended this exchange")


@pytest.mark.asyncio
async def test_restart_can_answer_old_ids_with_another_shape(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        fake_mcp_server.restart(shape=SessionLossShape.NOT_FOUND_32001)
        lost = await seen(session.call_tool("echo", {"text": "a"}))
    assert lost.code == (32600 if MCP1 else -32001)
    call = fake_mcp_server.get_requests(method="tools/call")[-1]
    assert call.error_code == -32001
    assert call.faults[0].startswith("session ")
    assert "TypeScript-style" in call.faults[0]


# --- idle expiry (compressed time) -------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(idle_timeout=60)
async def test_a_session_idle_past_the_timeout_expires(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on(http_method="GET").always().respond(405)  # no GET stream holding the session open
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "a"})
        assert fake_mcp_server.advance_idle_clock(59) == []
        [expired] = fake_mcp_server.advance_idle_clock(2)
        lost = await seen(session.call_tool("echo", {"text": "b"}))
    assert lost.code == NOT_FOUND_CODE
    assert fake_mcp_server.sessions[0].end_reason is EndReason.IDLE
    assert f"advance_idle_clock(2s) -> expired ['{expired[:8]}']" in [e.text for e in fake_mcp_server.journal.events]


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(idle_timeout=60)
async def test_an_open_get_stream_keeps_a_session_from_idling_out(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with httpx.AsyncClient(timeout=5) as client:
        session_id = await raw_initialize(client, url)
        headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
        async with client.stream("GET", url, headers=headers) as stream:
            assert stream.status_code == 200  # the headers are here: the stream is open on the fake
            assert fake_mcp_server.advance_idle_clock(3600) == []
            assert fake_mcp_server.advance_idle_clock(0, include_streaming=True) == [session_id]
            assert [chunk async for chunk in stream.aiter_bytes()] == []  # the stream ends with the session
        assert (await raw_call(client, url, session_id, "ping", {})).status_code == 404


# --- a cap on live sessions -------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", [SessionLossShape.TOO_MANY_SESSIONS, SessionLossShape.ALREADY_INITIALIZED])
async def test_past_the_cap_a_new_session_is_refused(fake_mcp_server: FakeMCPServer, shape: SessionLossShape) -> None:
    cap = fake_mcp_server.cap_sessions(1, shape=shape)
    async with sdk_session(fake_mcp_server.url):
        refused = await attempt(fake_mcp_server.url)
    assert not refused[-1].ok
    if MCP1:
        assert "HTTPStatusError" in leaf_names(refused[-1])  # 1.x tears the transport down on 503/400
    else:
        assert {(e.error.code, e.error.message) for e in refused[-1].leaves if hasattr(e, "error")} == {
            (shape.code, shape.message)
        }
    assert cap.fired == 1
    assert fake_mcp_server.get_requests(method="initialize")[1].status == shape.status
    assert [r.ok for r in await attempt(fake_mcp_server.url)] == [True]  # the first one closed: room again


# --- the shapes of "I do not know this session" --------------------------------------------------------------------


def _expected_code(shape: SessionLossShape) -> int | None:
    """What the SDK client surfaces for each shape (protocol.md §4); None: the 1.x transport dies."""
    if shape.status == 200:
        return shape.code
    if shape.status == 404:
        return 32600 if MCP1 else (shape.code if shape.code is not None else -32600)
    if MCP1:
        return None
    return shape.code if shape.code is not None else -32603


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SessionLossShape), ids=lambda s: s.name)
async def test_each_shape_reaches_the_client(fake_mcp_server: FakeMCPServer, shape: SessionLossShape) -> None:
    if shape.session_unknown:

        async def lose(session: object) -> list[str]:
            return fake_mcp_server.drop_session(shape=shape)
    else:  # a control: the session is fine, this one request is refused
        fake_mcp_server.on("tools/call").nth(2).respond(shape)

        async def lose(session: object) -> list[str]:
            return []

    results = await attempt(fake_mcp_server.url, echo("a"), lose, echo("b"), echo("c"))
    expected = _expected_code(shape)
    if expected is None:
        assert "HTTPStatusError" in leaf_names(results[-1])
    else:
        assert results[3].code == expected
        assert results[4].ok is not shape.session_unknown  # a dead session stays dead; a control does not
    answer = fake_mcp_server.get_requests(method="tools/call")[1]
    assert answer.status == shape.status
    assert str(shape) in answer.faults[0]


def test_the_shapes_name_their_wire_form() -> None:
    controls = [s for s in SessionLossShape if not s.session_unknown]
    assert controls == [
        SessionLossShape.INVALID_REQUEST,
        SessionLossShape.ALREADY_INITIALIZED,
        SessionLossShape.TOO_MANY_SESSIONS,
    ]
    assert json.loads(SessionLossShape.NOT_FOUND_MCP1.body()) == {
        "jsonrpc": "2.0",
        "id": "server-error",
        "error": {"code": -32600, "message": "Session not found"},
    }
    assert SessionLossShape.NO_VALID_SESSION_ID.body() == (
        b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}'
    )
    assert SessionLossShape.NOT_FOUND_HTML.content_type == "text/html"
    assert SessionLossShape.NOT_FOUND_EMPTY.body() == b""
    assert str(SessionLossShape.INVALID_REQUEST) == (
        "400 with JSON-RPC -32600 'Invalid Request' (control: a genuinely bad request, not session loss)"
    )


@pytest.mark.asyncio
async def test_inside_sessions_expired_every_session_is_unknown(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as old:
        with fake_mcp_server.sessions_expired():
            assert (await seen(old.call_tool("echo", {"text": "a"}))).code == NOT_FOUND_CODE
            fresh = await attempt(fake_mcp_server.url, echo("b"))  # even a new session meets it
            assert fresh[0].ok
            assert fresh[1].code == NOT_FOUND_CODE
    after = await attempt(fake_mcp_server.url, echo("c"))
    assert [r.ok for r in after] == [True, True]
    texts = [e.text for e in fake_mcp_server.journal.events]
    assert any(t.startswith("sessions_expired() began: dropped") for t in texts)


# --- strict servers -------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_strict_server_refuses_initialize_with_a_session_id(fake_mcp_server: FakeMCPServer) -> None:
    strict = fake_mcp_server.strict_initialize()
    async with httpx.AsyncClient(timeout=5) as client:
        session_id = await raw_initialize(client, fake_mcp_server.url)
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
        again = await raw_call(client, fake_mcp_server.url, session_id, "initialize", params)
        fake_mcp_server.drop_session()
        stale = await raw_call(client, fake_mcp_server.url, session_id, "initialize", params)
    assert (again.status_code, again.json()["error"]) == (
        400,
        {"code": -32600, "message": "Invalid Request: Server already initialized"},
    )
    assert stale.status_code == 400
    assert stale.json()["error"]["message"] == "Bad Request: initialize must not carry Mcp-Session-Id"
    assert strict.fired == 2


@pytest.mark.asyncio
async def test_an_sdk_client_re_initializing_meets_the_strict_server(fake_mcp_server: FakeMCPServer) -> None:
    strict = fake_mcp_server.strict_initialize()
    results = await attempt(fake_mcp_server.url, lambda session: session.initialize())
    if MCP1:  # 1.x really re-sends initialize, with its session id (protocol.md §6 item 28)
        assert "HTTPStatusError" in leaf_names(results[-1])
        assert strict.fired == 1
    else:  # 2.x returns the cached result and sends nothing (§6 item 20): a strict server never notices
        assert [r.ok for r in results] == [True, True]
        assert strict.fired == 0
