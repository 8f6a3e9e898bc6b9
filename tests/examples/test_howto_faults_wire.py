"""How-to: streams, connections, statuses and malformed answers, one test each (docs/faults.md)."""

from __future__ import annotations

import asyncio

import pytest
from _howto_sdk import SDKError, sdk_session

from pytest_fake_mcp import Outcome
from pytest_fake_mcp.client import ReusingSessionClient, SessionClosedError, SessionOpenError


# --8<-- [start:cut-stream]
@pytest.mark.asyncio
async def test_a_stream_cut_before_the_answer_is_an_error_not_a_hang(fake_mcp_server):
    fake_mcp_server.on("tools/call").cut_stream()  # 200 SSE headers, then EOF; the tool never runs
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=1) as client:
        with pytest.raises(SDKError):  # mcp 2.x: at once; mcp 1.x: at its read timeout
            await client.call_tool("echo", {"text": "a"})
        await client.call_tool("echo", {"text": "b"})

    assert fake_mcp_server.get_request(method="tools/call", faulted=True).outcome is Outcome.CUT
    assert fake_mcp_server.executions("echo", {"text": "a"}) == []


# --8<-- [end:cut-stream]


# --8<-- [start:cut-after-call]
@pytest.mark.asyncio
async def test_a_call_whose_answer_was_lost_is_not_run_again_silently(fake_mcp_server):
    fake_mcp_server.on("tools/call").cut_stream(after_call=True)  # the tool runs; its answer never arrives
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=1) as client:
        with pytest.raises(SDKError):  # the caller hears of it and decides; no silent retry
            await client.call_tool("echo", {"text": "pay"})

    (run,) = fake_mcp_server.executions("echo", {"text": "pay"})  # ran exactly once
    assert run.delivered is False


# --8<-- [end:cut-after-call]


# --8<-- [start:cut-event-ids]
@pytest.mark.asyncio
async def test_a_cut_after_an_event_id_makes_the_client_try_to_resume(fake_mcp_server):
    fake_mcp_server.on("tools/call").cut_stream(after_call=True, event_ids=True)  # a priming `id:` event first
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=1.5) as client:
        with pytest.raises(SDKError):  # the fake keeps no events to replay: the resume fails too
            await client.call_tool("echo", {"text": "a"})

    call = fake_mcp_server.get_request(method="tools/call")
    resumes = [get for get in fake_mcp_server.get_requests(http_method="GET") if get.last_event_id]
    assert {get.last_event_id for get in resumes} == {f"{call.seq}-0"}  # GET + Last-Event-ID of that stream


# --8<-- [end:cut-event-ids]


# --8<-- [start:get-refused]
@pytest.mark.asyncio
async def test_a_server_without_the_get_stream_still_answers_calls(fake_mcp_server):
    fake_mcp_server.on(http_method="GET").respond(405, body=None)  # POST-only servers refuse the stream
    async with sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("echo", {"text": "a"})

    assert result.content[0].text == "a"
    assert fake_mcp_server.get_requests(http_method="GET")[0].status == 405


# --8<-- [end:get-refused]


# --8<-- [start:end-stream]
@pytest.mark.asyncio
async def test_a_get_stream_ended_at_once_is_reopened(fake_mcp_server):
    fake_mcp_server.on(http_method="GET").end_stream()  # 200, then EOF
    reopened = fake_mcp_server.on(http_method="GET").after(1).hold_stream()
    async with sdk_session(fake_mcp_server.url):
        await reopened.wait_fired()  # the SDK client opened it again (about a second later)
    fake_mcp_server.mark_client_closed()

    assert len(fake_mcp_server.get_requests(http_method="GET")) == 2
    fake_mcp_server.assert_no_requests_after_close()  # the reconnect loop ended with the client


# --8<-- [end:end-stream]


# --8<-- [start:hold-stream]
@pytest.mark.asyncio
async def test_a_silent_get_stream_is_stopped_with_its_session(fake_mcp_server):
    held = fake_mcp_server.on(http_method="GET").hold_stream()  # 200, silent, open until teardown
    async with ReusingSessionClient(fake_mcp_server.url, read_timeout=2) as client:
        await client.call_tool("echo", {"text": "a"})
        await held.wait_fired()
        fake_mcp_server.drop_session()
        await client.call_tool("echo", {"text": "b"})  # the open stream does not hide the 404

    old_stream = fake_mcp_server.get_requests(http_method="GET")[0]
    assert old_stream.outcome is Outcome.DISCONNECTED  # the client stopped it when it retired the session
    fake_mcp_server.assert_initialize_count(2)


# --8<-- [end:hold-stream]


# --8<-- [start:connection]
@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["reset_connection", "close_connection"])
async def test_a_dead_connection_fails_the_call_and_a_new_session_works(fake_mcp_server, fault):
    getattr(fake_mcp_server.on("tools/call", arguments={"text": "a"}), fault)()  # RST / FIN, no status line
    with pytest.raises(ExceptionGroup):  # the SDK's task group: httpx2/httpx ReadError (RST), RemoteProtocolError (FIN)
        async with sdk_session(fake_mcp_server.url) as session:
            await session.call_tool("echo", {"text": "a"})
    async with sdk_session(fake_mcp_server.url) as session:  # mcp 2.x's session is closed after it: open one
        result = await session.call_tool("echo", {"text": "b"})

    assert result.content[0].text == "b"
    assert fake_mcp_server.get_request(method="tools/call", faulted=True).status is None
    assert fake_mcp_server.executions("echo", {"text": "a"}) == []  # safe to retry: it never ran


# --8<-- [end:connection]


# --8<-- [start:down]
@pytest.mark.asyncio
async def test_a_first_connect_during_an_outage_is_retried_after_it(fake_mcp_server):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        with fake_mcp_server.down(), pytest.raises(SessionOpenError):  # connections refused meanwhile
            await client.call_tool("echo", {"text": "a"})
        result = await client.call_tool("echo", {"text": "b"})  # the failure was not cached

    assert result.content[0].text == "b"
    fake_mcp_server.assert_initialize_count(1)  # the refused attempt never reached the server


# --8<-- [end:down]


# --8<-- [start:respond]
@pytest.mark.asyncio
async def test_a_5xx_is_surfaced_not_taken_for_session_loss(fake_mcp_server):
    fake_mcp_server.on("tools/call", arguments={"text": "a"}).respond(503)  # a JSON-RPC error body, -32603
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=2) as client:
        with pytest.raises((SDKError, SessionClosedError)):  # mcp 1.x: a 5xx tears the transport down
            await client.call_tool("echo", {"text": "a"})
        await client.call_tool("echo", {"text": "b"})

    assert [call.status for call in fake_mcp_server.get_requests(method="tools/call")] == [503, 200]
    assert fake_mcp_server.executions("echo", {"text": "a"}) == []


# --8<-- [end:respond]


# --8<-- [start:respond-initialize]
@pytest.mark.asyncio
async def test_a_failed_first_connect_is_tried_again(fake_mcp_server):
    fake_mcp_server.on("initialize").respond(503)  # the first handshake fails
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        with pytest.raises(SessionOpenError):
            await client.call_tool("echo", {"text": "a"})
        await client.call_tool("echo", {"text": "b"})  # a new handshake, not the cached failure

    assert [init.status for init in fake_mcp_server.get_requests(method="initialize")] == [503, 200]


# --8<-- [end:respond-initialize]


# --8<-- [start:malformed]
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["bad-json", "wrong-content-type", "truncated"])
async def test_a_malformed_answer_is_an_error_and_the_session_goes_on(fake_mcp_server, kind):
    fake_mcp_server.on("tools/call", arguments={"text": "a"}).malformed(kind)  # the tool ran; its answer is broken
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url, read_timeout=1) as client:
        with pytest.raises(SDKError):  # mcp 2.x: a parse error at once; mcp 1.x: its read timeout
            await client.call_tool("echo", {"text": "a"})
        await client.call_tool("echo", {"text": "b"})

    assert fake_mcp_server.figures.tool_executions == {"echo": 2}


# --8<-- [end:malformed]


# --8<-- [start:bogus-session-id]
@pytest.mark.asyncio
async def test_a_session_id_on_an_error_answer_is_not_adopted(fake_mcp_server):
    fake_mcp_server.on("tools/call").bogus_session_id().respond(404)  # a 404 carrying an id never issued
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})  # 404: a new session, the call retried

    refused = fake_mcp_server.get_request(method="tools/call", status=404)
    assert fake_mcp_server.get_requests(session_id=refused.response_session_id) == []
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:bogus-session-id]
