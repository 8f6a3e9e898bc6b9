"""The runner (_listener.py, _server.py): the port we bind, leases from the factory, a clean stop, any test flavour.

Every client here is a real SDK ``ClientSession`` over loopback; pytester runs cover the pytest-asyncio
modes and loop scopes and ``-n 2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import pathlib
import socket
import threading
from typing import Any

import anyio
import httpx
import pytest

from _sdk import read_until_ended, sdk_session
from pytest_fake_mcp import FakeMCPOptions, FakeMCPServer, FakeMCPServerFactory, LifecycleError, VerificationError
from pytest_fake_mcp._fake._app import FakeMCPApp
from pytest_fake_mcp._host._listener import Listener, running_listeners

# pytester runs in this process and forgets every module first imported during a run. httpx and httpx2
# import their cores lazily and map the cores' exceptions by class, so the cores load here, first.
importlib.import_module("httpcore")
with contextlib.suppress(ImportError):  # httpx2 exists with mcp 2.x only
    importlib.import_module("httpcore2")

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
PROC_NET_TCP = pathlib.Path("/proc/net/tcp")
INNER_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

ROUNDTRIP = """
import asyncio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def roundtrip(url):
    async with asyncio.timeout(10), streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
"""


async def echo(url: str, value: str = "hi") -> str:
    async with sdk_session(url) as session:
        result = await session.call_tool("echo", {"text": value})
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket in LISTEN on ``port``, from /proc/net/tcp (hex, little-endian IPv4)."""
    found = set()
    for line in PROC_NET_TCP.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("fake-mcp:")]


# --- binding -------------------------------------------------------------------------------------------


@pytest.mark.skipif(not PROC_NET_TCP.exists(), reason="reads listening sockets from Linux /proc/net/tcp")
def test_server_listens_on_loopback_only(fake_mcp_server: FakeMCPServer) -> None:
    port = int(fake_mcp_server.origin.rsplit(":", 1)[1])

    assert fake_mcp_server.origin == f"http://127.0.0.1:{port}"
    assert fake_mcp_server.url == f"http://127.0.0.1:{port}/mcp"
    assert listening_addresses(port) == {"127.0.0.1"}


def test_start_binds_the_port_itself_so_a_taken_port_fails_at_once() -> None:
    """No probe-then-bind: start() binds in the caller's thread; a taken port raises there, nothing left running."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listener = Listener(FakeMCPApp(), port=port)
        with pytest.raises(OSError, match="Address already in use"):
            listener.start()

    assert not listener.running
    assert f"fake-mcp:{port}" not in server_threads()


def test_start_twice_is_refused_with_the_state() -> None:
    listener = Listener(FakeMCPApp())
    listener.start()
    try:
        with pytest.raises(
            LifecycleError, match=r"Cannot start the listener: already RUNNING at http://127\.0\.0\.1:\d+"
        ):
            listener.start()
    finally:
        listener.stop()


# --- the factory ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_several_servers_in_one_test_through_the_factory(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    with fake_mcp_server_factory.lease(flavour="mcp1", json_response=True) as other:
        other.add_tool("shout", lambda text: text.upper())
        async with asyncio.timeout(10):
            assert await echo(fake_mcp_server.url, "one") == "one"
            async with sdk_session(other.url) as session:
                shouted = await session.call_tool("shout", {"text": "two"})

        assert other.url != fake_mcp_server.url
        assert shouted.content[0].text == "TWO"  # type: ignore[union-attr]
        assert other.options.flavour == "mcp1"
        assert fake_mcp_server.options.flavour == "mcp2"
        assert "shout" not in fake_mcp_server._app.catalog.tools
        assert {e.response_format for e in other.get_requests(kind="request")} == {"json"}
        assert {e.response_format for e in fake_mcp_server.get_requests(kind="request")} == {"sse"}
        assert len(other.sessions) == len(fake_mcp_server.sessions) == 1


def test_lease_verifies_its_server_when_the_block_ends(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    def boom() -> str:
        raise KeyError("missing")

    # The end of the lease block is what raises, so the whole block sits inside pytest.raises.
    with pytest.raises(VerificationError, match=r"raised 1 error\(s\) while answering"):  # noqa: PT012, SIM117
        with fake_mcp_server_factory.lease() as server:
            server.add_tool("boom", boom)
            asyncio.run(boom_call(server.url))


async def boom_call(url: str) -> None:
    async with asyncio.timeout(10), sdk_session(url) as session:
        with contextlib.suppress(Exception):
            await session.call_tool("boom", {})


def test_lease_takes_options_or_keywords_not_both(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    with (
        pytest.raises(LifecycleError, match=r"lease\(\) takes a FakeMCPOptions or keyword options, not both"),
        fake_mcp_server_factory.lease(FakeMCPOptions(), flavour="mcp1"),
    ):
        pass


@pytest.mark.asyncio
async def test_a_pooled_listener_stopped_while_idle_is_never_leased_again() -> None:
    factory = FakeMCPServerFactory()
    try:
        with factory.lease() as first:
            pass
        assert running_listeners().count(first._listener) == 1
        first._listener.stop()  # as a test changing asyncio's shapes does (tests/test_compat_asyncio.py)
        assert first._listener not in running_listeners()
        with factory.lease() as second:
            assert second is not first
            async with asyncio.timeout(10):
                assert await echo(second.url) == "hi"
        assert factory.started == 2
    finally:
        factory.close()


@pytest.mark.asyncio
async def test_stopping_leaves_no_thread_socket_or_task_even_with_a_stream_open() -> None:
    threads_before = set(threading.enumerate())
    factory = FakeMCPServerFactory()
    with factory.lease() as server:
        url, origin, app = server.url, server.origin, server._app
        port = int(origin.rsplit(":", 1)[1])
        loop = app.loop
        async with asyncio.timeout(10):
            assert await echo(url) == "hi"
    assert factory.started == 1
    assert f"fake-mcp:{port}" in server_threads()

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    async with asyncio.timeout(10), httpx.AsyncClient(timeout=5) as client:
        opened = await client.post(url, json=initialize, headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        async with client.stream("GET", url, headers=headers) as stream:
            assert stream.status_code == 200
            factory.close()  # blocks this loop while the server thread stops; the stream is ours to read after
            assert await read_until_ended(stream) == b""
        with pytest.raises(httpx.ConnectError):
            await client.get(url)

    assert set(threading.enumerate()) == threads_before
    assert loop is not None
    assert loop.is_closed()
    assert asyncio.all_tasks(loop) == set()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


# --- any kind of test --------------------------------------------------------------------------------------


def test_works_from_a_sync_test(fake_mcp_server: FakeMCPServer) -> None:
    assert asyncio.run(echo(fake_mcp_server.url)) == "hi"
    assert fake_mcp_server.figures.initialize_count == 1


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(
            "trio",
            id="trio",
            # Under trio the SDK client's own async generators (httpx SSE readers it cancels at exit) are
            # finalized with a ResourceWarning; they are the client's, not the fake's.
            marks=pytest.mark.filterwarnings(
                "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
            ),
        ),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.mark.anyio
async def test_works_from_an_anyio_test(fake_mcp_server: FakeMCPServer, anyio_backend: str) -> None:
    with anyio.fail_after(10):
        assert await echo(fake_mcp_server.url) == "hi"
    assert [e.status for e in fake_mcp_server.get_requests(tool="echo")] == [200]


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_works_under_pytest_asyncio_in_every_mode_and_loop_scope(pytester: pytest.Pytester, mode: str) -> None:
    marked = "" if mode == "auto" else '@pytest.mark.asyncio(loop_scope="function")\n'
    pytester.makepyfile(
        ROUNDTRIP
        + f"""
import pytest


{marked}async def test_function_loop(fake_mcp_server):
    await roundtrip(fake_mcp_server.url)


@pytest.mark.asyncio(loop_scope="module")
async def test_module_loop(fake_mcp_server):
    await roundtrip(fake_mcp_server.url)


@pytest.mark.asyncio(loop_scope="session")
async def test_session_loop(fake_mcp_server):
    await roundtrip(fake_mcp_server.url)
    assert len(fake_mcp_server.journal.exchanges) >= 4
"""
    )
    pytester.makeini(INNER_INI)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest", "-o", f"asyncio_mode={mode}")
    result.assert_outcomes(passed=3)


def test_works_under_xdist_with_a_listener_per_worker(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    out = pytester.path / "urls"
    out.mkdir()
    pytester.makepyfile(
        ROUNDTRIP
        + f"""
import os
import pytest


@pytest.mark.parametrize("n", range(4))
def test_roundtrip(fake_mcp_server, fake_mcp_server_factory, n):
    asyncio.run(roundtrip(fake_mcp_server.url))
    assert fake_mcp_server.figures.initialize_count == 1
    assert fake_mcp_server_factory.started == 1
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with open(os.path.join({str(out)!r}, f"{{worker}}-{{n}}"), "w") as f:
        f.write(fake_mcp_server.url)
"""
    )
    pytester.makeini(INNER_INI)
    # The hypothesis plugin costs each worker seconds to import and plays no part here.
    result = pytester.runpytest("-n", "2", "-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=4)
    by_worker: dict[str, set[str]] = {}
    for path in out.iterdir():
        by_worker.setdefault(path.name.split("-")[0], set()).add(path.read_text())
    urls = [url for worker_urls in by_worker.values() for url in worker_urls]
    assert all(len(worker_urls) == 1 for worker_urls in by_worker.values()), by_worker  # one listener per worker
    assert len(set(urls)) == len(urls)  # on different ports


def test_a_server_stopped_under_its_lease_is_not_leased_again() -> None:
    factory = FakeMCPServerFactory()
    try:
        with factory.lease() as first:
            first._listener.stop()  # as a down() that could not re-bind its port leaves it
        with factory.lease() as second:
            assert second is not first
            assert factory.started == 2
    finally:
        factory.close()


# --- one write per answer ----------------------------------------------------------------------------------


class _WriteLog:
    """The connection's own transport, every write kept (everything else is the transport's)."""

    def __init__(self, transport: asyncio.Transport, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


def _log_writes(monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """Every write the listener's connections make from now on: one list per connection, in order."""
    from pytest_fake_mcp._host import _listener

    connections: list[list[bytes]] = []
    batching = _listener._BatchingTransport

    def logged(transport: asyncio.Transport) -> object:
        connections.append([])
        return batching(_WriteLog(transport, connections[-1]))

    monkeypatch.setattr(_listener, "_BatchingTransport", logged)
    return connections


async def _echo_through_a_listener(json_response: bool) -> None:
    """One session and one echo call through a listener of its own, stopped after."""
    listener = Listener(FakeMCPApp(FakeMCPOptions(json_response=json_response)))
    listener.start()
    try:
        async with asyncio.timeout(10):
            assert await echo(f"{listener.origin}/mcp") == "hi"
    finally:
        listener.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_each_answer_goes_out_in_one_write(monkeypatch: pytest.MonkeyPatch, json_response: bool) -> None:
    """Head, body and end of an answer are one write: one segment for the client to wait for, not three."""

    connections = _log_writes(monkeypatch)
    await _echo_through_a_listener(json_response)
    writes = [write for connection in connections for write in connection]

    answers = [w for w in writes if b'"jsonrpc"' in w]
    assert len(answers) >= 2, writes  # initialize and tools/call
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
        assert answer.endswith(b"}" if json_response else b"}\r\n\r\n\r\n0\r\n\r\n"), answer
    assert all(w.startswith(b"HTTP/1.1 ") for w in writes if b"HTTP/1.1 202" in w)


@pytest.mark.asyncio
async def test_an_answer_is_written_before_uvicorns_bookkeeping_for_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole answer leaves before uvicorn arms the keep-alive timer and readies h11 for the next request."""
    from pytest_fake_mcp._host import _listener

    # The class the listener's protocol extends: pytester runs in this process and may have made the suite
    # import uvicorn's module again since, so the name imported here could be another class object.
    base: Any = _listener._protocol_class().__bases__[0]  # uvicorn's H11Protocol
    complete = base.on_response_complete
    held: list[int] = []  # per response: the bytes of it still held back when uvicorn's bookkeeping began

    def noted(self: Any) -> None:
        held.append(sum(len(chunk) for chunk in self.transport._held))
        complete(self)

    monkeypatch.setattr(base, "on_response_complete", noted)
    await _echo_through_a_listener(json_response=True)

    # initialize, notifications/initialized, tools/call, DELETE (the GET stream may still be open): each answer
    # had left whole, nothing of it held, when its bookkeeping began.
    assert len(held) >= 3, held
    assert held == [0] * len(held), held


# --- h11's response head, the shorter way -------------------------------------------------------------------


def _head(connection_class: type, request: bytes, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    import h11

    conn = connection_class(h11.SERVER)
    conn.receive_data(request)
    while not isinstance(conn.next_event(), h11.Request):
        pass
    data = conn.send(h11.Response(status_code=status, headers=headers))
    assert data is not None
    return data + b"|" + repr((conn.our_state, conn.their_state)).encode()


_SIZED = [(b"content-type", b"application/json"), (b"content-length", b"2")]
_STREAMED = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


@pytest.mark.parametrize(
    ("request_line", "status", "headers"),
    [
        (b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n", 200, _SIZED),
        (b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n", 200, _STREAMED),
        (b"POST /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", 200, _SIZED),
        (b"POST /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", 200, _STREAMED),
        (b"POST /mcp HTTP/1.0\r\nhost: x\r\ncontent-length: 0\r\n\r\n", 200, _SIZED),
        (b"POST /mcp HTTP/1.0\r\nhost: x\r\ncontent-length: 0\r\n\r\n", 200, _STREAMED),
        (b"HEAD /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 200, _SIZED),
        (b"HEAD /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 200, _STREAMED),
        (b"GET /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 304, _SIZED),
        (b"GET /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 204, _STREAMED),
        (b"GET /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 200, [*_SIZED, (b"transfer-encoding", b"chunked")]),
        (b"GET /mcp HTTP/1.1\r\nhost: x\r\n\r\n", 200, [(b"content-length", b"0"), (b"connection", b"close")]),
    ],
    ids=[
        "sized",
        "streamed",
        "sized-close",
        "streamed-close",
        "sized-http1.0",
        "streamed-http1.0",
        "sized-head",
        "streamed-head",
        "304",
        "204",
        "both-framings",
        "close-given",
    ],
)
def test_the_listeners_h11_sends_the_same_head_as_h11(
    request_line: bytes, status: int, headers: list[tuple[bytes, bytes]]
) -> None:
    """The listener's h11 connection skips rebuilding a head it would not change; bytes and states are h11's own."""
    import h11

    from pytest_fake_mcp._host._listener import _connection_class

    ours = _connection_class()
    assert ours is not h11.Connection
    assert _head(ours, request_line, status, headers) == _head(h11.Connection, request_line, status, headers)
