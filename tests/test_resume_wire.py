"""The event store on the wire (``event_store=True``): ids, priming, retry:, and the replay of a GET with
Last-Event-ID, byte for byte as the SDK servers with an event store answer (docs/resumable-streams.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from pytest_fake_mcp import FakeMCPServer, ScriptError
from pytest_fake_mcp._wire._options import FakeMCPOptions

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def chatty(server: FakeMCPServer) -> None:
    def chat(ctx: Any) -> str:
        ctx.log("info", "one")
        ctx.log("info", "two")
        return "done"

    server.add_tool("chat", chat)


def open_session(client: httpx.Client, url: str, version: str) -> dict[str, str]:
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    r = client.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": version}
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def events_of(body: bytes) -> list[dict[str, str]]:
    out = []
    for block in body.split(b"\r\n\r\n"):
        if not block or block.startswith(b":"):
            continue
        fields: dict[str, str] = {}
        for line in block.split(b"\r\n"):
            name, _, value = line.decode().partition(": ")
            fields[name] = value
        out.append(fields)
    return out


def json_of(event: dict[str, str]) -> Any:
    return json.loads(event["data"])


def call(client: httpx.Client, url: str, headers: dict[str, str], rid: int = 3) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "chat", "arguments": {}}}
    return client.post(url, headers=headers, json=body)


@pytest.mark.fake_mcp_server(event_store=True, retry_interval=500)
def test_at_2025_11_25_an_answer_opens_with_a_priming_event_with_retry(fake_mcp_server: FakeMCPServer) -> None:
    chatty(fake_mcp_server)
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        body = call(client, fake_mcp_server.url, headers).content
    assert re.fullmatch(
        rf"id: {UUID}\r\ndata: \r\nretry: 500\r\n\r\n"
        rf"id: {UUID}\r\nevent: message\r\ndata: .*one.*\r\n\r\n"
        rf"id: {UUID}\r\nevent: message\r\ndata: .*two.*\r\n\r\n"
        rf"id: {UUID}\r\nevent: message\r\ndata: .*done.*\r\n\r\n",
        body.decode(),
    )


@pytest.mark.fake_mcp_server(event_store=True)
@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
def test_before_2025_11_25_events_carry_ids_and_no_priming(fake_mcp_server: FakeMCPServer, version: str) -> None:
    chatty(fake_mcp_server)
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, version)
        body = call(client, fake_mcp_server.url, headers).content
    events = events_of(body)
    assert [set(e) for e in events] == [{"id", "event", "data"}] * 3
    assert all(re.fullmatch(UUID, e["id"]) for e in events)


@pytest.mark.fake_mcp_server(event_store=True)
def test_without_retry_interval_the_priming_event_has_no_retry_line(fake_mcp_server: FakeMCPServer) -> None:
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        body = client.post(fake_mcp_server.url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert re.fullmatch(rf"id: {UUID}\r\ndata: \r\n\r\nid: {UUID}\r\nevent: message\r\ndata: .*\r\n\r\n", body.text)


def test_the_default_has_no_ids_and_answers_last_event_id_with_500(fake_mcp_server: FakeMCPServer) -> None:
    chatty(fake_mcp_server)
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        body = call(client, fake_mcp_server.url, headers).content
        get = client.get(fake_mcp_server.url, headers={**headers, "last-event-id": "x"})
    assert b"id:" not in body
    assert (get.status_code, get.headers["content-type"], get.text) == (
        500,
        "text/plain; charset=utf-8",
        "Internal Server Error",
    )


@pytest.mark.fake_mcp_server(event_store=True, retry_interval=250)
@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
def test_a_resume_replays_the_events_after_the_id_then_stays_open(fake_mcp_server: FakeMCPServer, version: str) -> None:
    chatty(fake_mcp_server)
    with httpx.Client(timeout=httpx.Timeout(5.0, read=0.5)) as client:
        headers = open_session(client, fake_mcp_server.url, version)
        sent = events_of(call(client, fake_mcp_server.url, headers).content)
        first = sent[0]["id"]
        get_headers = {"accept": "text/event-stream", **{k: v for k, v in headers.items() if k.startswith("mcp-")}}
        with client.stream("GET", fake_mcp_server.url, headers={**get_headers, "last-event-id": first}) as replay:
            head = (replay.status_code, dict(replay.headers))
            chunks: list[bytes] = []
            with pytest.raises(httpx.ReadTimeout):  # it stays open, as the SDK's replay stream does
                chunks.extend(replay.iter_raw())
            body = b"".join(chunks)
    assert head[0] == 200
    assert [(k, v) for k, v in head[1].items() if k not in ("date", "server", "transfer-encoding")] == [
        ("cache-control", "no-cache, no-transform"),
        ("connection", "keep-alive"),
        ("content-type", "text/event-stream"),
        ("mcp-session-id", headers["mcp-session-id"]),
        ("x-accel-buffering", "no"),
    ]
    replayed = events_of(body)
    messages = [e for e in replayed if e.get("event") == "message"]
    assert messages == [e for e in sent if e.get("event") == "message" and e["id"] != first]
    if version == "2025-11-25":  # the priming event is not replayed; a fresh one follows the replay
        assert [set(e) for e in replayed[len(messages) :]] == [{"id", "data", "retry"}]
        assert replayed[-1]["retry"] == "250"
        assert replayed[-1]["id"] not in {e["id"] for e in sent}
    else:
        assert len(replayed) == len(messages)
    resume = fake_mcp_server.get_requests(http_method="GET")[-1]
    assert [m.get("id") for m in resume.response_messages] == [m.get("id") for m in map(json_of, messages)]


@pytest.mark.fake_mcp_server(event_store=True)
def test_an_unknown_last_event_id_gets_an_empty_stream_at_once(fake_mcp_server: FakeMCPServer) -> None:
    with httpx.Client(timeout=2.0) as client:
        headers = open_session(client, fake_mcp_server.url, "2025-06-18")
        get = client.get(fake_mcp_server.url, headers={**headers, "last-event-id": "nope"})
    assert (get.status_code, get.headers["content-type"], get.content) == (200, "text/event-stream", b"")


@pytest.mark.fake_mcp_server(event_store=True)
def test_the_modern_era_resumes_nothing_get_is_405(fake_mcp_server: FakeMCPServer) -> None:
    with httpx.Client() as client:
        get = client.get(
            fake_mcp_server.url,
            headers={"accept": "text/event-stream", "mcp-protocol-version": "2026-07-28", "last-event-id": "x"},
        )
    assert (get.status_code, get.headers["allow"], get.content) == (405, "POST", b"")


@pytest.mark.fake_mcp_server(event_store=True, json_response=True)
def test_json_answers_carry_no_ids(fake_mcp_server: FakeMCPServer) -> None:
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        r = client.post(fake_mcp_server.url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert r.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.parametrize(
    ("options", "fix"),
    [
        ({"retry_interval": 100}, "needs event_store=True"),
        ({"event_store": True, "retry_interval": -1}, "whole milliseconds"),
        ({"event_store": True, "retry_interval": 0.5}, "whole milliseconds"),
    ],
)
def test_bad_retry_intervals_name_the_fix(options: dict[str, Any], fix: str) -> None:
    with pytest.raises(ScriptError, match=fix):
        FakeMCPOptions(**options)


@pytest.mark.fake_mcp_server(event_store=True, json_response=True)
def test_a_cut_after_events_on_a_server_answering_json_fails_at_its_line(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"answers POSTs as JSON \(json_response=True\): there is no event"):
        fake_mcp_server.on("tools/call").cut_after_events(1)
    fake_mcp_server.on(http_method="GET").partial_replay(keep=1).optional()  # the store is on: scripted


def test_a_partial_replay_without_the_store_fails_at_its_line_naming_it(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"no replay to break off.*fake_mcp_server\(event_store=True\)"):
        fake_mcp_server.on(http_method="GET").partial_replay(keep=1)
    fake_mcp_server.on("tools/call").cut_after_events(1).optional()  # an SSE server: scripted
    fake_mcp_server.on(http_method="GET").refuse_replay(503).optional()  # answers instead: needs no store


@pytest.mark.fake_mcp_server(event_store=True)
def test_a_resume_while_the_method_runs_gets_its_later_events_live(fake_mcp_server: FakeMCPServer) -> None:
    gate = fake_mcp_server.gate()

    async def slow(ctx: Any) -> str:
        ctx.log("info", "one")
        await gate.wait()
        ctx.log("info", "two")
        return "done"

    fake_mcp_server.add_tool("chat", slow)
    fake_mcp_server.on("tools/call").cut_after_events(1)
    with httpx.Client(timeout=httpx.Timeout(5.0)) as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        sent = events_of(call(client, fake_mcp_server.url, headers).content)  # priming, "one", then EOF
        get = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        get["mcp-protocol-version"] = "2025-11-25"
        with client.stream("GET", fake_mcp_server.url, headers={**get, "last-event-id": sent[-1]["id"]}) as replay:
            chunks = replay.iter_raw()
            first = next(chunks)  # nothing missed yet: a fresh priming event, and the stream waits
            gate.open()
            rest = b""
            for chunk in chunks:
                rest += chunk
                if b'"id":3' in rest:
                    break
    assert [set(e) for e in events_of(first)] == [{"id", "data"}]
    live = [json_of(e) for e in events_of(rest)]
    assert [m.get("params", {}).get("data") for m in live] == ["two", None]
    assert live[-1]["result"]["content"][0]["text"] == "done"
    assert [set(e) for e in sent] == [{"id", "data"}, {"id", "event", "data"}]


@pytest.mark.fake_mcp_server(event_store=True)
def test_cut_stream_event_ids_sends_the_stores_priming_event_not_its_own(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").cut_stream(after_call=True, event_ids=True)
    with httpx.Client() as client:
        headers = open_session(client, fake_mcp_server.url, "2025-11-25")
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "a"}},
        }
        cut = client.post(fake_mcp_server.url, headers=headers, json=body).content
    assert re.fullmatch(rf"id: {UUID}\r\ndata: \r\n\r\n", cut.decode())  # one priming event, the store's
