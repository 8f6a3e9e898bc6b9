"""How-to: resumable streams, the event store and its faults (docs/resumable-streams.md)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from _howto_sdk import sdk_session
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


# --8<-- [start:resume]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(event_store=True, retry_interval=50)
async def test_client_resumes_a_cut_stream(fake_mcp_server):
    async def report(ctx, pages: int) -> str:
        for page in range(pages):
            ctx.log("info", f"page {page}")
            await asyncio.sleep(0)
        return f"{pages} pages"

    fake_mcp_server.add_tool("report", report)
    fake_mcp_server.on("tools/call").cut_after_events(1)  # the stream ends after "page 0"

    async with sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("report", {"pages": 3})

    assert result.content[0].text == "3 pages"
    fake_mcp_server.assert_resumed()  # a GET with Last-Event-ID, and no second tools/call
    fake_mcp_server.assert_tool_ran("report", times=1)
    (resume,) = [e for e in fake_mcp_server.get_requests(http_method="GET") if e.last_event_id]
    assert [m.get("params", {}).get("data") for m in resume.response_messages[:2]] == ["page 1", "page 2"]


# --8<-- [end:resume]


# --8<-- [start:refused]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(event_store=True, retry_interval=50)
@pytest.mark.parametrize("replay", ["refused", "partial"])
async def test_client_resumes_again_after_a_failed_replay(fake_mcp_server, replay):
    fake_mcp_server.on("tools/call").cut_stream(after_call=True)  # the tool ran; its result is in the store
    resumes = fake_mcp_server.on(http_method="GET")  # counts only GETs that carry Last-Event-ID
    if replay == "refused":
        resumes.refuse_replay(503)
    else:
        resumes.partial_replay(keep=0)

    async with sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("echo", {"text": "once"})

    assert result.content[0].text == "once"
    first, second = [e for e in fake_mcp_server.get_requests(http_method="GET") if e.last_event_id]
    assert (first.status, second.status) == (503 if replay == "refused" else 200, 200)
    fake_mcp_server.assert_resumed()


# --8<-- [end:refused]


# --8<-- [start:wire]
@pytest.mark.fake_mcp_server(event_store=True, retry_interval=250)
def test_what_the_stream_looks_like(fake_mcp_server):
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    with httpx.Client() as client:
        opened = client.post(
            fake_mcp_server.url,
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        )
    priming, answer = opened.text.split("\r\n\r\n")[:2]
    assert priming.startswith("id: ")
    assert priming.endswith("\r\ndata: \r\nretry: 250")  # 2025-11-25 and later: a priming event first
    assert answer.startswith("id: ")  # every event carries the id a resume names


# --8<-- [end:wire]


# --8<-- [start:get-stream]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(event_store=True, list_changed=True)
async def test_client_resumes_its_get_stream(fake_mcp_server):
    changes = asyncio.Queue()

    async def on_message(message):  # mcp 1.x wraps a notification in .root
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            changes.put_nowait(message)

    fake_mcp_server.on(http_method="GET").cut_after_events(1)  # the GET stream ends after its first event

    async with (
        asyncio.timeout(10),
        streamable_http_client(fake_mcp_server.url) as streams,
        ClientSession(streams[0], streams[1], message_handler=on_message) as session,
    ):
        await session.initialize()
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("first", lambda: "1")  # announced on the GET stream, which is then cut
        await changes.get()
        fake_mcp_server.add_tool("second", lambda: "2")  # no GET stream is open: the store keeps it
        await changes.get()  # the client resumed its GET stream, and the replay brought it

    fake_mcp_server.assert_resumed()  # resumed with Last-Event-ID, not reopened without it


# --8<-- [end:get-stream]
