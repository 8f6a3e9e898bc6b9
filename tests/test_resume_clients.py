"""Resumable streams met by real SDK clients of both lines (they resume on their own, protocol.md §4), the
replay faults, and ``assert_resumed`` firing and passing (docs/resumable-streams.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from _fault_helpers import HEADERS, MCP1, attempt, raw_call, raw_initialize, text_of
from pytest_fake_mcp import FakeMCPServer, ScriptError

STORE = pytest.mark.fake_mcp_server(event_store=True, retry_interval=20)


def chatty(server: FakeMCPServer) -> None:
    async def chat(ctx: Any) -> str:
        ctx.log("info", "one")
        await asyncio.sleep(0)
        ctx.log("info", "two")
        return "done"

    server.add_tool("chat", chat)


def chat(session: Any) -> Any:
    return session.call_tool("chat", {})


def resumes(server: FakeMCPServer) -> list[Any]:
    return [e for e in server.get_requests(http_method="GET") if e.last_event_id]


@STORE
@pytest.mark.asyncio
async def test_a_cut_after_the_first_event_is_resumed_and_the_result_arrives(fake_mcp_server: FakeMCPServer) -> None:
    chatty(fake_mcp_server)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    results = await attempt(fake_mcp_server.url, chat)
    assert text_of(results[1].result) == "done"
    fake_mcp_server.assert_resumed()
    fake_mcp_server.assert_tool_ran("chat", times=1)
    assert [run.delivered for run in fake_mcp_server.executions("chat")] == [True]  # by the replay
    (resume,) = resumes(fake_mcp_server)
    assert resume.status == 200
    call = fake_mcp_server.get_requests(method="tools/call")[0]
    assert [m.get("id") for m in resume.response_messages] == [None, call.rpc_id]  # "two", then the result


@STORE
@pytest.mark.asyncio
async def test_a_cut_before_the_result_is_resumed_from_the_priming_event(fake_mcp_server: FakeMCPServer) -> None:
    """cut_stream(after_call=True) with the store on: the priming event's id is enough to resume from."""
    fake_mcp_server.on("tools/call").cut_stream(after_call=True)
    results = await attempt(fake_mcp_server.url, lambda s: s.call_tool("echo", {"text": "a"}))
    assert text_of(results[1].result) == "a"
    fake_mcp_server.assert_resumed()
    fake_mcp_server.assert_tool_ran("echo", times=1)


@STORE
@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["refuse", "partial"])
async def test_one_failed_replay_is_resumed_again(fake_mcp_server: FakeMCPServer, fault: str) -> None:
    """Refused once (503), or broken off after one event: both lines resume again, and the call succeeds."""
    chatty(fake_mcp_server)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    gets = fake_mcp_server.on(http_method="GET")
    fired = gets.refuse_replay(503) if fault == "refuse" else gets.partial_replay(keep=1)
    results = await attempt(fake_mcp_server.url, chat)
    assert text_of(results[1].result) == "done"
    assert fired.fired == 1
    first, second = resumes(fake_mcp_server)
    assert (first.status, second.status) == (503 if fault == "refuse" else 200, 200)
    if fault == "partial":  # it resumes from the last event the broken replay gave it
        assert second.last_event_id != first.last_event_id
    else:
        assert second.last_event_id == first.last_event_id
    fake_mcp_server.assert_resumed()
    fake_mcp_server.assert_tool_ran("chat", times=1)


@STORE
@pytest.mark.asyncio
async def test_every_replay_refused_the_clients_give_up(fake_mcp_server: FakeMCPServer) -> None:
    """2.x: two attempts, then -32000; 1.x: two attempts, then silence until the caller's read timeout."""
    chatty(fake_mcp_server)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    fake_mcp_server.on(http_method="GET").always().refuse_replay(503)
    results = await attempt(fake_mcp_server.url, chat, read_s=1.0)
    assert len(resumes(fake_mcp_server)) == 2
    assert [run.delivered for run in fake_mcp_server.executions("chat")] == [False]
    if MCP1:
        assert results[1].code == 408
    else:
        assert (results[1].code, results[1].message) == (
            -32000,
            "SSE stream ended and reconnection attempts were exhausted",
        )


@STORE
@pytest.mark.asyncio
async def test_every_replay_broken_off_the_clients_resume_until_their_timeout(fake_mcp_server: FakeMCPServer) -> None:
    """A replay that answers 200 and ends resets the clients' attempt count: they resume every retry interval."""
    chatty(fake_mcp_server)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    fake_mcp_server.on(http_method="GET").always().partial_replay(keep=0)
    results = await attempt(fake_mcp_server.url, chat, read_s=0.5)
    assert results[1].code == (408 if MCP1 else -32001)
    assert len(resumes(fake_mcp_server)) > 2


# --- assert_resumed: firing and passing ----------------------------------------------------------------


async def cut_then(server: FakeMCPServer, *, resend: bool, resume: bool, replay_breaks: bool = False) -> None:
    """A plain-HTTP client meets a cut after the first event, then re-sends the call and/or resumes
    (``replay_breaks``: the replay ends before the answer)."""
    chatty(server)
    server.on("tools/call").cut_after_events(1)
    if replay_breaks:
        server.on(http_method="GET").partial_replay(keep=0)
    async with httpx.AsyncClient(timeout=5.0) as client:
        sid = await raw_initialize(client, server.url)
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "chat", "arguments": {}}}
        cut = await client.post(server.url, json=body, headers=headers)
        last = [line for line in cut.text.split("\r\n") if line.startswith("id: ")][-1][4:]
        if resume:
            get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            async with client.stream("GET", server.url, headers={**get, "last-event-id": last}) as replay:
                async for chunk in replay.aiter_text():
                    if '"id":7' in chunk:
                        break
        if resend:
            await raw_call(client, server.url, sid, "tools/call", {"name": "chat", "arguments": {}}, rid=8)


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_passes_for_a_plain_resume(fake_mcp_server: FakeMCPServer) -> None:
    await cut_then(fake_mcp_server, resend=False, resume=True)
    fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_fires_on_a_client_that_sends_the_call_again(fake_mcp_server: FakeMCPServer) -> None:
    await cut_then(fake_mcp_server, resend=True, resume=False)
    with pytest.raises(AssertionError, match=r"never resumed.*sent again as #") as failure:
        fake_mcp_server.assert_resumed()
    assert "ran it twice" in str(failure.value)
    fake_mcp_server.assert_tool_ran("chat", times=2)


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_fires_on_a_resend_after_a_resume_that_broke_off(fake_mcp_server: FakeMCPServer) -> None:
    await cut_then(fake_mcp_server, resend=True, resume=True, replay_breaks=True)
    with pytest.raises(AssertionError, match=r"resumed by GET #.*sent again as #"):
        fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_passes_when_the_same_call_comes_after_the_resume_answered(
    fake_mcp_server: FakeMCPServer,
) -> None:
    # The resume delivered the answer: the same call afterwards is the client's next call, not a re-send.
    await cut_then(fake_mcp_server, resend=True, resume=True)
    fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_fires_when_nothing_was_cut(fake_mcp_server: FakeMCPServer) -> None:
    results = await attempt(fake_mcp_server.url, lambda s: s.call_tool("echo", {"text": "a"}))
    assert results[1].ok
    with pytest.raises(AssertionError, match="nothing to resume"):
        fake_mcp_server.assert_resumed()


def test_assert_resumed_without_the_store_names_the_option(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"fake_mcp_server\(event_store=True\)"):
        fake_mcp_server.assert_resumed()


def test_replay_faults_on_a_post_name_the_fix(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"on\(http_method='GET'\)\.refuse_replay"):
        fake_mcp_server.on("tools/call").refuse_replay()
    with pytest.raises(ScriptError, match="keep=1"):
        fake_mcp_server.on(http_method="GET").partial_replay(keep=-1)
    with pytest.raises(ScriptError, match=r"400\.\.599"):
        fake_mcp_server.on(http_method="GET").refuse_replay(200)
    with pytest.raises(ScriptError, match="cut_after_events"):
        fake_mcp_server.on("tools/call").cut_after_events(-1)


@STORE
@pytest.mark.asyncio
@pytest.mark.parametrize("reset", [False, True], ids=["eof", "reset"])
async def test_a_cut_right_after_the_priming_event_is_resumed(fake_mcp_server: FakeMCPServer, reset: bool) -> None:
    chatty(fake_mcp_server)
    cut = fake_mcp_server.on("tools/call").cut_after_events(0, reset=reset)
    results = await attempt(fake_mcp_server.url, chat)
    assert text_of(results[1].result) == "done"
    assert str(cut) in fake_mcp_server.get_request(method="tools/call").faults
    fake_mcp_server.assert_resumed()


def test_the_replay_faults_refuse_the_modern_era(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match="modern era"):
        fake_mcp_server.on("tools/call", era="modern").cut_after_events(1)
    with pytest.raises(ScriptError, match="GET is 405"):
        fake_mcp_server.on(http_method="GET", era="modern").refuse_replay()


@pytest.mark.asyncio
async def test_without_the_store_a_cut_after_an_event_is_not_resumable(fake_mcp_server: FakeMCPServer) -> None:
    """No ids, so nothing to resume: the call fails as any SSE cut does (2.x at once, 1.x at its read timeout)."""
    chatty(fake_mcp_server)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    results = await attempt(fake_mcp_server.url, chat, read_s=0.5)
    assert results[1].code == (408 if MCP1 else -32000)
    assert resumes(fake_mcp_server) == []
    assert [run.delivered for run in fake_mcp_server.executions("chat")] == [False]
