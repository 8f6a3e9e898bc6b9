"""The in-process fake: the real SDK (mcp 1.x on httpx, 2.x on httpx2) on the controlled loop, no socket, no thread."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import importlib
import pickle
import threading
from typing import Any

import pytest

from contract_clients import ReferenceClient
from pytest_fake_mcp._client._reusing import _sdk
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._race import NondeterminismError, PriorityChooser, run_controlled


async def _sdk_session_call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """The SDK's own ClientSession over streamable HTTP, with the HTTP client the SDK builds itself."""
    sdk = _sdk()
    async with sdk.streamable_http_client(url) as streams, sdk.client_session(streams[0], streams[1]) as session:
        await session.initialize()
        return await session.call_tool(tool, arguments)


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_the_sdk_client_session_talks_to_the_in_process_fake_on_the_controlled_loop() -> None:
    threads = threading.active_count()
    with InProcessFake() as fake:
        result = run_controlled(lambda: _sdk_session_call(fake.url, "echo", {"text": "hi"}))
        assert result.error is None, result.error
        assert _text(result.value) == "hi"
        assert result.leftover_tasks == []
        assert result.loop_errors == []
        fake.server.assert_initialize_count(1)
        kinds = [(e.http_method, e.rpc_method) for e in fake.server.journal.exchanges]
        assert kinds[0] == ("POST", "initialize")
        assert ("POST", "tools/call") in kinds
        assert ("DELETE", None) in kinds
    assert threading.active_count() == threads


def test_the_get_stream_stays_open_until_the_client_closes_it() -> None:
    with InProcessFake() as fake:
        result = run_controlled(lambda: _sdk_session_call(fake.url, "echo", {"text": "x"}))
        assert result.error is None
        streams = fake.server.get_requests(http_method="GET")
        assert len(streams) == 1
        # It was still open while the call ran: it ended only when the session closed.
        call = fake.server.get_request(method="tools/call")
        assert call is not None
        assert streams[0].ended is not None
        assert call.ended is not None
        assert streams[0].ended >= call.ended


def test_sse_answers_stream_notifications_before_the_result() -> None:
    with InProcessFake() as fake:

        async def slow(ctx: Any) -> str:
            ctx.log("info", "started")
            await asyncio.sleep(5)  # virtual: costs nothing
            ctx.log("info", "halfway")
            return "done"

        fake.server.add_tool("slow", slow)
        result = run_controlled(lambda: _sdk_session_call(fake.url, "slow", {}))
        assert result.error is None, result.error
        assert _text(result.value) == "done"
        assert result.virtual_time >= 5


def test_the_reference_client_reuses_its_session_in_process() -> None:
    with InProcessFake() as fake:

        async def main() -> None:
            client = ReferenceClient(fake.url)
            try:
                await asyncio.gather(*(client.call_tool("echo", {"text": str(i)}) for i in range(3)))
                await client.call_tool("echo", {"text": "again"})
            finally:
                await client.aclose()

        result = run_controlled(main, PriorityChooser([0, 1, 2, 3], [7]))
        assert result.error is None, result.error
        fake.server.assert_initialize_count(1)
        fake.server.assert_session_reused()
        fake.server.assert_all_sessions_closed()
        assert "initialize" in str(fake.server.journal)


def test_scripted_faults_work_in_process() -> None:
    with InProcessFake() as fake:
        fake.server.on("tools/call", tool="echo").respond(503)

        async def main() -> str:
            with pytest.raises(Exception) as info:
                await _sdk_session_call(fake.url, "echo", {"text": "x"})
            return repr(info.value)

        result = run_controlled(main)
        assert result.error is None, result.error
        assert [e.status for e in fake.server.get_requests(method="tools/call")] == [503]
        fake.server._verify()


def test_session_loss_is_answered_404_in_process() -> None:
    with InProcessFake() as fake:

        async def main() -> None:
            client = ReferenceClient(fake.url)
            try:
                await client.call_tool("echo", {"text": "1"})
                fake.server.drop_session()
                await client.call_tool("echo", {"text": "2"})
            finally:
                await client.aclose()

        result = run_controlled(main)
        assert result.error is None, result.error
        assert 404 in [e.status for e in fake.server.journal.exchanges]
        fake.server.assert_initialize_count(2)
        fake.server.assert_no_stale_session_ids()


def test_a_client_built_before_the_fake_opened_is_routed_too() -> None:
    http = importlib.import_module(_sdk().http_module)

    async def main(url: str) -> int:
        async with http.AsyncClient() as client:
            response = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            return int(response.status_code)

    with InProcessFake() as fake:
        result = run_controlled(lambda: main(fake.url))
    assert result.error is None, result.error
    assert result.value in (400, 404, 200)  # whatever the fake answers, it answered in-process


def test_other_origins_are_not_routed_and_a_real_socket_is_refused() -> None:
    http = importlib.import_module(_sdk().http_module)

    async def main() -> None:
        async with http.AsyncClient() as client:
            await client.get("http://127.0.0.1:9/elsewhere")

    with InProcessFake(), pytest.raises(NondeterminismError, match="real socket"):
        run_controlled(main)


def test_the_in_process_fake_also_answers_on_stock_asyncio() -> None:
    with InProcessFake() as fake:
        result = asyncio.run(_sdk_session_call(fake.url, "echo", {"text": "stock"}))
    assert _text(result) == "stock"


def test_routing_is_removed_when_the_last_fake_closes() -> None:
    http = importlib.import_module(_sdk().http_module)
    before = http.AsyncHTTPTransport.__dict__.get("handle_async_request")
    with InProcessFake(), InProcessFake() as second:
        assert second.port == 2
        assert http.AsyncHTTPTransport.__dict__.get("handle_async_request") is not before
    assert http.AsyncHTTPTransport.__dict__.get("handle_async_request") is before


def test_a_renewed_fake_is_clean_and_answers_on_a_new_loop() -> None:
    with InProcessFake() as fake:
        first = run_controlled(lambda: _sdk_session_call(fake.url, "echo", {"text": "one"}))
        assert first.error is None, first.error
        fake.server.drop_session()
        assert fake.server.journal.exchanges
        server = fake.renew()
        assert server is fake.server
        assert server.journal.exchanges == ()
        assert server.live_sessions == ()
        assert fake.open_exchanges == 0
        second = run_controlled(lambda: _sdk_session_call(fake.url, "echo", {"text": "two"}))
        assert second.error is None, second.error
        assert _text(second.value) == "two"
        server.assert_initialize_count(1)


def test_a_caller_cancelled_before_the_answer_starts_disconnects_and_leaves_nothing_behind() -> None:
    http = importlib.import_module(_sdk().http_module)
    seen: list[str] = []

    def wrap(app: Any) -> Any:
        async def held(scope: Any, receive: Any, send: Any) -> None:
            await receive()  # the body
            seen.append((await receive())["type"])  # waits until the caller goes
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"late"})
            seen.append("answered late")

        return held

    async def main(url: str) -> bool:
        async with http.AsyncClient() as client:
            call = asyncio.create_task(client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            await asyncio.sleep(1)  # virtual: the request is in, its answer has not started
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await asyncio.sleep(1)
        return call.cancelled()

    with InProcessFake(wrap=wrap) as fake:
        result = run_controlled(lambda: main(fake.url))
        assert fake.open_exchanges == 0
    assert result.error is None, result.error
    assert result.value is True
    assert seen == ["http.disconnect", "answered late"]  # the late answer is dropped, not raised
    assert result.loop_errors == []
    assert result.leftover_tasks == []


_ANSWERS = {
    "json": (200, [(b"content-type", b"application/json")], b'{"a": 1}'),
    "charset named": (200, [(b"Content-Type", b"text/plain; Charset=ISO-8859-1")], "café".encode("latin-1")),
    "gzip": (200, [(b"content-type", b"text/plain"), (b"Content-Encoding", b"gzip")], gzip.compress(b"unzipped")),
    "encoding only in a value": (200, [(b"x-note", b"no content-encoding"), (b"content-type", b"text/plain")], b"ok"),
    "non-ASCII header": (200, [(b"content-type", b"text/plain"), (b"x-name", "café".encode())], b"ok"),
    "unknown status": (599, [(b"content-type", b"text/plain")], b"?"),
    "a header repeated": (200, [(b"content-type", b"text/plain"), (b"x-a", b"1"), (b"X-A", b"2")], b"ok"),
    "lines given as lists": (200, [[b"content-type", b"text/plain; charset=utf-8"], [b"x-a", b"1"]], b"ok"),
}


@pytest.mark.parametrize("answer", _ANSWERS, ids=list(_ANSWERS))
def test_an_in_process_answer_reads_as_the_same_answer_from_the_network(answer: str) -> None:
    """Status, reason, headers and their encoding, charset, decoding, pickling: as for an answer from the network."""
    http = importlib.import_module(_sdk().http_module)
    status, headers, body = _ANSWERS[answer]

    def wrap(app: Any) -> Any:
        async def answer_app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return answer_app

    async def main(url: str) -> Any:
        async with http.AsyncClient() as client:
            return await client.get(url)

    with InProcessFake(wrap=wrap) as fake:
        got = asyncio.run(main(fake.url))
    expected = http.Response(status, headers=headers, stream=http.ByteStream(body))
    expected.read()
    assert (got.status_code, got.reason_phrase, got.http_version) == (
        expected.status_code,
        expected.reason_phrase,
        expected.http_version,
    )
    assert got.headers.raw == expected.headers.raw
    assert got.headers.encoding == expected.headers.encoding
    assert (got.charset_encoding, got.encoding) == (expected.charset_encoding, expected.encoding)
    assert (got.content, got.text) == (expected.content, expected.text)
    copy = pickle.loads(pickle.dumps(got))
    assert type(copy) is http.Response
    assert (copy.status_code, copy.headers.raw, copy.text) == (got.status_code, got.headers.raw, got.text)


def test_a_request_reaches_the_fake_through_the_clients_own_transport_as_to_the_network() -> None:
    """Routing replaces the network transport only: a client's wrapping transport still runs; a mock is left alone."""
    http = importlib.import_module(_sdk().http_module)
    seen: list[str] = []

    class Wrapping(http.AsyncBaseTransport):  # type: ignore[misc]
        def __init__(self) -> None:
            self.network = http.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            seen.append(request.method)
            return await self.network.handle_async_request(request)

    async def main(url: str) -> tuple[int, int]:
        async with http.AsyncClient(transport=Wrapping()) as wrapped:
            via_network = (await wrapped.get(url)).status_code
        mock = http.MockTransport(lambda request: http.Response(299))
        async with http.AsyncClient(transport=mock) as mocked:
            return via_network, (await mocked.get(url)).status_code

    with InProcessFake() as fake:
        via_network, mocked = asyncio.run(main(fake.url))
        assert len(fake.server.journal.exchanges) == 1
    assert seen == ["GET"]
    assert via_network != 299
    assert mocked == 299
