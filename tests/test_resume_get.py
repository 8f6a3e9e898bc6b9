"""The standalone GET stream with the event store on (``event_store=True``, _fake/_standalone.py): what it stores,
its resume byte for byte as the SDK servers answer it (measured on mcp 2.3 and 1.30), real SDK clients of both lines
resuming it after ``on(http_method="GET").cut_after_events(1)``, and ``assert_resumed`` judging it
(docs/resumable-streams.md#get-stream)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from _sdk import sdk_session
from pytest_fake_mcp import FakeMCPServer

STORE = pytest.mark.fake_mcp_server(event_store=True, list_changed=True, retry_interval=250)
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
CHANGED = '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
BOUND = 10.0


@contextlib.asynccontextmanager
async def raw_session(url: str, version: str) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """A handshake session opened by hand: the client and the headers of a GET on it."""
    async with httpx.AsyncClient(timeout=BOUND) as client:
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        answer = await client.post(url, headers=HEADERS, json=body)
        sid = answer.headers["mcp-session-id"]
        posting = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": version}
        await client.post(url, headers=posting, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client, {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": version}


def events_of(body: bytes) -> list[dict[str, str]]:
    """The SSE events of ``body`` as field dicts (ping comments left out)."""
    out = []
    for block in body.split(b"\r\n\r\n"):
        if block and not block.startswith(b":"):
            out.append(dict(line.decode().partition(": ")[::2] for line in block.split(b"\r\n")))
    return out


class Reader:
    """The events a stream carried so far, read on demand (bounded)."""

    def __init__(self, stream: httpx.Response) -> None:
        self.chunks = stream.aiter_raw()
        self.body = b""

    async def events(self, count: int) -> list[dict[str, str]]:
        """Every event so far, once there are at least ``count``."""
        async with asyncio.timeout(BOUND):
            while len(events_of(self.body)) < count:
                self.body += await anext(self.chunks)
        return events_of(self.body)


async def cut_get_stream(server: FakeMCPServer, client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """Open the GET stream, which a fault cuts after its first event (a change of the tools); its event's id."""
    server.on(http_method="GET").cut_after_events(1)
    async with client.stream("GET", server.url, headers=headers) as stream:
        await server.wait_for_get_streams()
        server.add_tool("first", lambda: "1")
        body = b""
        async with asyncio.timeout(BOUND):
            async for chunk in stream.aiter_raw():  # to the end: the fault ends the stream after the event
                body += chunk
    (event,) = events_of(body)
    assert re.fullmatch(UUID, event["id"])
    assert event["data"] == CHANGED
    assert list(event) == ["id", "event", "data"]  # a plain GET stream gets no priming event
    return event["id"]


# --- the wire, as a real SDK server with an event store answers ----------------------------------------------


@STORE
@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_a_resume_replays_what_was_sent_while_no_get_was_open_then_carries_the_stream(
    fake_mcp_server: FakeMCPServer, version: str
) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, version) as (client, headers):
        first = await cut_get_stream(fake_mcp_server, client, headers)
        fake_mcp_server.add_tool("second", lambda: "2")  # no GET stream open: stored all the same
        fake_mcp_server.add_tool("third", lambda: "3")
        async with client.stream("GET", url, headers={**headers, "last-event-id": first}) as resumed:
            head = [(k, v) for k, v in resumed.headers.items() if k not in ("date", "server", "transfer-encoding")]
            primed = version == "2025-11-25"
            reader = Reader(resumed)
            replayed = await reader.events(3 if primed else 2)
            await fake_mcp_server.wait_for_get_streams()  # the resume is now the session's GET stream
            fake_mcp_server.add_tool("fourth", lambda: "4")
            live = (await reader.events(len(replayed) + 1))[-1]
            conflict = await client.get(url, headers=headers)
            again = await client.get(url, headers={**headers, "last-event-id": first})
    assert (resumed.status_code, head) == (
        200,
        [
            ("cache-control", "no-cache, no-transform"),
            ("connection", "keep-alive"),
            ("content-type", "text/event-stream"),
            ("mcp-session-id", headers["mcp-session-id"]),
            ("x-accel-buffering", "no"),
        ],
    )
    missed = replayed[:2]
    assert [e["data"] for e in missed] == [CHANGED, CHANGED]
    assert all(re.fullmatch(UUID, e["id"]) for e in missed)
    if primed:  # the resumed GET becomes the session's stream: a fresh priming event, with retry:
        assert replayed[2] == {"id": replayed[2]["id"], "data": "", "retry": "250"}
    assert live["data"] == CHANGED
    assert re.fullmatch(UUID, live["id"])
    assert conflict.status_code == 409  # a plain GET while the resumed one is the session's stream
    assert conflict.json()["error"]["message"] == "Conflict: Only one SSE stream is allowed per session"
    # A second resume meanwhile replays the same events (the priming event is not replayed) and ends.
    assert again.status_code == 200
    assert [e["id"] for e in events_of(again.content)] == [e["id"] for e in [*missed, live]]
    fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_a_resume_while_the_get_stream_is_open_replays_and_ends(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, "2025-11-25") as (client, headers), client.stream("GET", url, headers=headers) as get:
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("first", lambda: "1")
        fake_mcp_server.add_tool("second", lambda: "2")
        first, second = await Reader(get).events(2)
        replay = await client.get(url, headers={**headers, "last-event-id": first["id"]})
    assert (replay.status_code, replay.content) == (
        200,
        f"id: {second['id']}\r\nevent: message\r\n".encode() + (f"data: {CHANGED}\r\n\r\n".encode()),
    )


@STORE
@pytest.mark.asyncio
async def test_another_sessions_get_stream_id_replays_nothing(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, "2025-11-25") as (client, headers):
        first = await cut_get_stream(fake_mcp_server, client, headers)
        fake_mcp_server.add_tool("second", lambda: "2")
        async with raw_session(url, "2025-11-25") as (other, other_headers):
            answer = await other.get(url, headers={**other_headers, "last-event-id": first})
    assert (answer.status_code, answer.content) == (200, b"")


@pytest.mark.fake_mcp_server(list_changed=True)
@pytest.mark.asyncio
async def test_without_the_store_the_get_stream_has_no_ids(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, "2025-11-25") as (client, headers), client.stream("GET", url, headers=headers) as get:
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("first", lambda: "1")
        (event,) = await Reader(get).events(1)
    assert event == {"event": "message", "data": CHANGED}
    # The headers of a real server's GET stream, with a store or without (mcp 2.3 and 1.30, and the lowest pins):
    assert [(k, v) for k, v in get.headers.items() if k not in ("date", "server", "transfer-encoding")] == [
        ("cache-control", "no-cache, no-transform"),
        ("connection", "keep-alive"),
        ("content-type", "text/event-stream"),
        ("mcp-session-id", headers["mcp-session-id"]),
        ("x-accel-buffering", "no"),
    ]


# --- real SDK clients (the installed line) ----------------------------------------------------------------


def noting(heard: list[asyncio.Event]) -> Any:
    """An SDK ``message_handler`` setting the next of ``heard`` at each ``notifications/tools/list_changed``."""
    count = iter(heard)

    async def handle(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            next(count).set()

    return handle


@STORE
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["ended", "reset", "first-resume-refused"])
async def test_an_sdk_client_resumes_its_cut_get_stream_and_gets_what_it_missed(
    fake_mcp_server: FakeMCPServer, how: str
) -> None:
    """Both lines: the GET stream ends (or is reset) after its event; the client waits 1 s (a plain GET stream
    gives no ``retry:``), GETs with the last id it saw, and gets the change made meanwhile. A refused resume (503)
    is tried again with the same id."""
    fake_mcp_server.on(http_method="GET").cut_after_events(1, reset=how == "reset")
    refused = how == "first-resume-refused"
    if refused:
        fake_mcp_server.on(http_method="GET").refuse_replay(503)
    first, second = heard = [asyncio.Event(), asyncio.Event()]
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url, message_handler=noting(heard)):
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("first", lambda: "1")
        await first.wait()
        fake_mcp_server.add_tool("second", lambda: "2")  # the client is away: its GET stream was cut
        await second.wait()
    _, *resumes = fake_mcp_server.get_requests(http_method="GET")
    assert all(e.last_event_id for e in resumes)
    resume = resumes[-1]
    assert (resume.status, resume.last_event_id) == (200, resumes[0].last_event_id)
    assert resume.response_messages[0]["method"] == "notifications/tools/list_changed"
    if refused:
        assert [e.status for e in resumes] == [503, 200]
    fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_a_broken_off_get_stream_replay_is_resumed_again_from_its_last_event(
    fake_mcp_server: FakeMCPServer,
) -> None:
    """``partial_replay(keep=1)`` on a GET stream's resume: one missed event, then the end; resuming from that one
    brings the other and the stream."""
    url = fake_mcp_server.url
    async with raw_session(url, "2025-11-25") as (client, headers):
        first = await cut_get_stream(fake_mcp_server, client, headers)
        fake_mcp_server.on(http_method="GET").partial_replay(keep=1)
        fake_mcp_server.add_tool("second", lambda: "2")
        fake_mcp_server.add_tool("third", lambda: "3")
        broken = events_of((await client.get(url, headers={**headers, "last-event-id": first})).content)
        async with client.stream("GET", url, headers={**headers, "last-event-id": broken[-1]["id"]}) as again:
            rest = await Reader(again).events(2)
    assert [e["data"] for e in broken] == [CHANGED]
    assert [e["data"] for e in rest] == [CHANGED, ""]  # the third change, then a priming event: the stream
    assert rest[0]["id"] != broken[0]["id"]
    fake_mcp_server.assert_resumed()


# --- assert_resumed on a GET stream: firing and passing ------------------------------------------------------


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_fires_on_a_client_that_reopens_its_get_stream_without_last_event_id(
    fake_mcp_server: FakeMCPServer,
) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, "2025-11-25") as (client, headers):
        await cut_get_stream(fake_mcp_server, client, headers)
        fake_mcp_server.add_tool("second", lambda: "2")  # lost to a client that does not resume
        async with client.stream("GET", url, headers=headers):
            await fake_mcp_server.wait_for_get_streams()
    with pytest.raises(AssertionError, match=r"GET stream: never resumed.*reopened without Last-Event-ID as #"):
        fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_fires_on_a_client_that_never_reopens_its_get_stream(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with raw_session(fake_mcp_server.url, "2025-06-18") as (client, headers):
        await cut_get_stream(fake_mcp_server, client, headers)
    with pytest.raises(AssertionError, match=r"GET stream: never resumed \(no GET named its events\); not reopened"):
        fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_assert_resumed_passes_for_a_client_that_resumes_its_get_stream(fake_mcp_server: FakeMCPServer) -> None:
    url = fake_mcp_server.url
    async with raw_session(url, "2025-06-18") as (client, headers):
        first = await cut_get_stream(fake_mcp_server, client, headers)
        fake_mcp_server.add_tool("second", lambda: "2")
        async with client.stream("GET", url, headers={**headers, "last-event-id": first}) as resumed:
            (missed,) = await Reader(resumed).events(1)
    assert json.loads(missed["data"])["method"] == "notifications/tools/list_changed"
    fake_mcp_server.assert_resumed()


@STORE
@pytest.mark.asyncio
async def test_a_get_stream_cut_before_any_event_gave_nothing_to_resume(fake_mcp_server: FakeMCPServer) -> None:
    """``cut_after_events(0)`` on a GET ends it after the headers: no id reached the client (no priming event
    on a GET), so ``assert_resumed`` finds nothing to judge."""
    fake_mcp_server.on(http_method="GET").cut_after_events(0)
    async with raw_session(fake_mcp_server.url, "2025-11-25") as (client, headers):
        cut = await client.get(fake_mcp_server.url, headers=headers)
    assert (cut.status_code, cut.content) == (200, b"")
    with pytest.raises(AssertionError, match="nothing to resume"):
        fake_mcp_server.assert_resumed()
