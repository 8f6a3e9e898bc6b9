"""Wire faults met by real SDK clients: SSE cuts, GET stream modes, connection faults, down(), malformed answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _fault_helpers import MCP1, attempt, echo, sdk_session, seen, text_of
from pytest_fake_mcp import FakeMCPServer, Outcome, ScriptedFault

SSE_CUT_CODE = 408 if MCP1 else -32000
"""2.x fails fast when an SSE stream ends without a response; 1.x waits for its read timeout (protocol.md §6.16)."""


def leaf_names(results: list[Any]) -> set[str]:
    return {type(e).__name__ for e in results[-1].leaves}


def the_call(server: FakeMCPServer) -> Any:
    return server.get_requests(method="tools/call")[0]


# --- SSE cuts ------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("reset", [False, True], ids=["eof", "reset"])
async def test_a_stream_cut_before_the_call_runs_nothing(fake_mcp_server: FakeMCPServer, reset: bool) -> None:
    cut = fake_mcp_server.on("tools/call").cut_stream(reset=reset)
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), read_s=0.5)
    assert results[1].code == SSE_CUT_CODE
    assert results[2].ok
    call = the_call(fake_mcp_server)
    assert (call.status, call.outcome) == (200, Outcome.RESET if reset else Outcome.CUT)
    assert call.faults == (str(cut),)
    assert [e.arguments for e in fake_mcp_server.executions()] == [{"text": "b"}]  # 'a' never ran


@pytest.mark.asyncio
async def test_a_stream_cut_after_the_call_ran_loses_the_result(fake_mcp_server: FakeMCPServer) -> None:
    """R12: the side effect happened, the client never heard; a retry runs it twice."""
    fake_mcp_server.on("tools/call").cut_stream(after_call=True)
    results = await attempt(fake_mcp_server.url, echo("pay"), echo("pay"), read_s=0.5)
    assert results[1].code == SSE_CUT_CODE
    assert text_of(results[2].result) == "pay"
    runs = fake_mcp_server.executions("echo", {"text": "pay"})
    assert [run.delivered for run in runs] == [False, True]
    assert fake_mcp_server.figures.tool_executions == {"echo": 2}
    assert the_call(fake_mcp_server).response_messages == ()  # the journal shows what the client got: nothing


@pytest.mark.asyncio
async def test_a_cut_after_an_event_id_makes_the_client_try_to_resume(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").cut_stream(after_call=True, event_ids=True)
    resumed = fake_mcp_server.on(http_method="GET", has_session=True).after(1).optional().delay(0.001)
    results = await attempt(fake_mcp_server.url, echo("a"), read_s=1.5)
    assert not results[1].ok
    if not MCP1:
        assert results[1].message == "SSE stream ended and reconnection attempts were exhausted"
    resumes = [e for e in fake_mcp_server.get_requests(http_method="GET") if e.last_event_id is not None]
    assert resumes, fake_mcp_server.journal
    assert {e.last_event_id for e in resumes} == {f"{the_call(fake_mcp_server).seq}-0"}
    assert resumed.seen >= 1


# --- the standalone GET stream --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [405, 404, 403])
async def test_a_refused_get_stream_leaves_calls_working(fake_mcp_server: FakeMCPServer, status: int) -> None:
    refuse = fake_mcp_server.on(http_method="GET").respond(status, body=None)
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"))
    assert [r.ok for r in results] == [True, True, True]
    stream = fake_mcp_server.get_requests(http_method="GET")[0]
    assert (stream.status, stream.faults) == (status, (str(refuse),))


@pytest.mark.asyncio
async def test_a_get_stream_ended_at_once_is_reopened(fake_mcp_server: FakeMCPServer) -> None:
    """H04: a clean end of the GET stream makes the SDK clients reconnect (about 1 s later)."""
    fake_mcp_server.on(http_method="GET").end_stream()
    again = fake_mcp_server.on(http_method="GET").after(1).hold_stream()
    async with sdk_session(fake_mcp_server.url):
        await again.wait_fired()
    first, second = fake_mcp_server.get_requests(http_method="GET")[:2]
    assert (first.status, first.outcome) == (200, Outcome.COMPLETE)
    assert second.session_id == first.session_id


@pytest.mark.asyncio
async def test_a_held_get_stream_outlives_its_session(fake_mcp_server: FakeMCPServer) -> None:
    held = fake_mcp_server.on(http_method="GET").hold_stream()
    async with sdk_session(fake_mcp_server.url) as session:
        await held.wait_fired()
        fake_mcp_server.drop_session()
        assert (await seen(session.call_tool("echo", {"text": "a"}))).code == (32600 if MCP1 else -32600)
        stream = fake_mcp_server.get_requests(http_method="GET")[0]
        assert (stream.status, stream.outcome) == (200, Outcome.IN_FLIGHT)


# --- status on any request ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_5xx_on_initialize_then_recovery(fake_mcp_server: FakeMCPServer) -> None:
    """H07: the first connect fails; a client that tries again gets in."""
    fake_mcp_server.on("initialize").respond(503)
    failed = await attempt(fake_mcp_server.url)
    assert not failed[-1].ok
    if MCP1:
        assert "HTTPStatusError" in leaf_names(failed)
    else:
        assert {e.error.code for e in failed[-1].leaves if hasattr(e, "error")} == {-32603}
    assert [r.ok for r in await attempt(fake_mcp_server.url, echo("a"))] == [True, True]
    assert [e.status for e in fake_mcp_server.get_requests(method="initialize")] == [503, 200]


@pytest.mark.asyncio
@pytest.mark.parametrize("body", ["jsonrpc", "none"])
async def test_a_status_with_or_without_a_jsonrpc_body(fake_mcp_server: FakeMCPServer, body: str) -> None:
    if body == "jsonrpc":
        fake_mcp_server.on("tools/call").respond(502, code=-32000, message="upstream down")
    else:
        fake_mcp_server.on("tools/call").respond(502, body=None)
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"))
    if MCP1:  # any non-404 error status tears the 1.x transport down (protocol.md §6 item 15)
        assert "HTTPStatusError" in leaf_names(results)
    else:
        expected = (-32000, "upstream down") if body == "jsonrpc" else (-32603, "Server returned an error response")
        assert (results[1].code, results[1].message) == expected
        assert results[2].ok
    call = the_call(fake_mcp_server)
    assert (call.status, call.response_format) == (502, "json" if body == "jsonrpc" else "empty")


# --- connection faults ----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["reset_connection", "close_connection"])
async def test_a_connection_fault_kills_the_call(fake_mcp_server: FakeMCPServer, how: str) -> None:
    fault: ScriptedFault = getattr(fake_mcp_server.on("tools/call"), how)()
    results = await attempt(fake_mcp_server.url, echo("a"))
    expected = "ReadError" if how == "reset_connection" else "RemoteProtocolError"
    assert expected in leaf_names(results)
    call = the_call(fake_mcp_server)
    assert call.status is None
    assert call.outcome is (Outcome.RESET if how == "reset_connection" else Outcome.CUT)
    assert call.faults == (str(fault),)
    assert fake_mcp_server.executions() == []


@pytest.mark.asyncio
async def test_down_refuses_connections_then_comes_back_on_the_same_url(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with sdk_session(url) as session:
        await session.call_tool("echo", {"text": "a"})
        old = fake_mcp_server.live_sessions[0].id
        with fake_mcp_server.down():
            refused = await attempt(url)
            assert "ConnectError" in leaf_names(refused)
        assert fake_mcp_server.url == url
        after = await seen(session.call_tool("echo", {"text": "b"}))  # same URL, empty session table
        assert after.code == (32600 if MCP1 else -32600)
    assert [r.ok for r in await attempt(url, echo("c"))] == [True, True]
    assert old not in [s.id for s in fake_mcp_server.live_sessions]
    texts = [e.text for e in fake_mcp_server.journal.events]
    assert any(t.startswith("down(): port ") for t in texts)
    assert any(t.startswith("down() ended: up again on port ") for t in texts)


@pytest.mark.asyncio
async def test_going_down_resets_a_call_in_flight(fake_mcp_server: FakeMCPServer) -> None:
    held = fake_mcp_server.on("tools/call").hang()
    task = asyncio.create_task(attempt(fake_mcp_server.url, echo("a")))
    await held.wait_fired()
    with fake_mcp_server.down():
        results = await task
    assert leaf_names(results) & {"ReadError", "RemoteProtocolError"}
    call = the_call(fake_mcp_server)
    assert call.outcome is Outcome.RESET
    assert call.faults == (str(held), "down(): the server went away")


# --- malformed answers ----------------------------------------------------------------------------------

MALFORMED = {
    # kind: (2.x code, 1.x code); 1.x drops what it cannot parse and times out (408)
    "bad-json": (-32700, 408),
    "wrong-content-type": (-32600, 408),
    "truncated": (-32000, 408),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_a_malformed_answer_reaches_the_client(fake_mcp_server: FakeMCPServer, kind: str) -> None:
    fault = fake_mcp_server.on("tools/call").malformed(kind)  # type: ignore[arg-type]
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), read_s=0.5)
    assert results[1].code == MALFORMED[kind][1 if MCP1 else 0]
    assert results[2].ok
    assert the_call(fake_mcp_server).faults == (str(fault),)
    assert len(fake_mcp_server.executions()) == 2  # the tool ran; only its answer was broken


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(json_response=True)
async def test_an_answer_with_a_wrong_id_never_completes_the_call(fake_mcp_server: FakeMCPServer) -> None:
    """In JSON mode the id is all a client has (in SSE mode the SDK clients map the stream to the request)."""
    fake_mcp_server.on("tools/call").malformed("wrong-id")
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), read_s=0.3)
    assert results[1].code == (408 if MCP1 else -32001)
    assert results[2].ok
    call = the_call(fake_mcp_server)
    assert call.response_messages[0]["id"] == call.rpc_id + 1000


@pytest.mark.asyncio
async def test_a_bogus_session_id_on_an_error_answer_is_not_adopted(fake_mcp_server: FakeMCPServer) -> None:
    """H06: the SDK clients take the session id from the initialize answer only."""
    bogus = fake_mcp_server.on("tools/call").bogus_session_id().respond(404)
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"))
    assert [r.ok for r in results] == [True, False, True]
    refused, answered = fake_mcp_server.get_requests(method="tools/call")
    assert refused.response_session_id is not None
    assert refused.response_session_id.startswith("bogus")
    assert answered.session_id == refused.session_id != refused.response_session_id
    assert str(bogus) in refused.faults
