"""ReusingSessionClient and SessionCache against a REAL SDK server (tests/_real_server.py).

Wire assertions go through the small helpers below, so moving to the ``fake_mcp_server``
fixture means rewriting the helpers, not the tests.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from _real_server import RealServer, WireRecord, run_real_server
from pytest_fake_mcp._client._cache import SessionCache, current_run_id
from pytest_fake_mcp._client._reusing import (
    ReusingSessionClient,
    SessionClosedError,
    SessionLostError,
    SessionOpenError,
    _sdk,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

WAIT = 10.0  # every wait in these tests is bounded by this


# -- wire helpers (swap these for fake_mcp_server journal queries later) ---------------------------


def initializes(server: RealServer) -> list[WireRecord]:
    return server.records(rpc_method="initialize")


def deletes(server: RealServer) -> list[WireRecord]:
    return server.records(http_method="DELETE")


def requests_with_session(server: RealServer, session_id: str | None) -> list[WireRecord]:
    return [r for r in server.records() if r.session_id == session_id]


def assert_initialize_carries_no_session_id(server: RealServer) -> None:
    __tracebackhide__ = True
    carrying = [r for r in initializes(server) if r.session_id is not None]
    assert not carrying, f"initialize sent with a session id: {carrying}"


def assert_dead_id_not_sent_again(server: RealServer, dead: str | None, allowed: int) -> None:
    """The dead id reached the server only on the ``allowed`` requests that got the 404, never after."""
    __tracebackhide__ = True
    records = server.records()
    stale = [r for r in records if r.session_id == dead and r.status == 404]
    assert len(stale) == allowed, f"expected {allowed} requests answered 404 for {dead}, got {stale}"
    last_404 = stale[-1].seq if stale else -1
    later = [r for r in records if r.session_id == dead and r.seq > last_404]
    assert not later, f"dead session id {dead} sent again after its 404: {later}"
    assert not [r for r in deletes(server) if r.session_id == dead], "DELETE sent for a dead session id"


def assert_no_tasks_left() -> None:
    __tracebackhide__ = True
    left = asyncio.all_tasks() - {asyncio.current_task()}
    assert not left, f"tasks left behind: {left}"


def text(result: Any) -> str:
    return str(result.content[0].text)


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def new_http_client() -> Any:
    return _sdk().create_http_client()


async def drop(server: RealServer, session_id: str | None) -> None:
    assert session_id is not None
    assert await asyncio.to_thread(server.drop_session, session_id) == 200


@pytest.fixture(params=[False, True], ids=["sse", "json"])
def real_server(request: pytest.FixtureRequest) -> Iterator[RealServer]:
    with run_real_server(json_response=request.param) as server:
        yield server


@pytest.fixture
def sse_server() -> Iterator[RealServer]:
    with run_real_server() as server:
        yield server


# -- reuse -----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sequential_calls_reuse_one_session_and_one_http_client(real_server: RealServer) -> None:
    async with asyncio.timeout(WAIT):
        client = ReusingSessionClient(real_server.url)
        assert client.generation == 0
        assert client.session_id is None
        results = [await client.call_tool("echo", {"text": f"hi {i}"}) for i in range(3)]
        http = client.http_client
        await client.list_tools()
        assert client.http_client is http
        await client.aclose()

    assert [text(r) for r in results] == ["hi 0", "hi 1", "hi 2"]
    assert len(initializes(real_server)) == 1
    assert client.initialize_count == 1
    posts = [r for r in real_server.records(http_method="POST") if r.rpc_method != "initialize"]
    assert {r.session_id for r in posts} == {client.session_ids[0]}
    # The tool list is fetched before the first call, never after it (protocol.md §6 item 18).
    methods = [r.rpc_method for r in real_server.records(http_method="POST")]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    assert methods.count("tools/list") == 2  # the pre-list and the explicit list_tools()
    assert http.is_closed
    assert [r.session_id for r in deletes(real_server)] == list(client.session_ids)
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_concurrent_first_calls_share_one_initialize(sse_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        results = await asyncio.gather(*(client.call_tool("echo", {"text": str(i)}) for i in range(5)))

    assert sorted(text(r) for r in results) == ["0", "1", "2", "3", "4"]
    assert len(initializes(sse_server)) == 1
    assert len(sse_server.records(rpc_method="tools/list")) == 1
    assert len(sse_server.records(rpc_method="tools/call")) == 5
    assert_no_tasks_left()


# -- session loss ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_dropped_session_reinitializes_once_and_retries_the_call(real_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(real_server.url) as client:
        await client.call_tool("count")
        dead = client.session_id
        http = client.http_client
        await drop(real_server, dead)
        result = await client.call_tool("count")
        assert client.http_client is http
        assert client.generation == 2
        assert client.session_id not in (None, dead)

    assert text(result) == "2"
    assert real_server.executions("count") == 2  # retried once, never run twice
    assert len(initializes(real_server)) == 2
    assert_initialize_carries_no_session_id(real_server)
    assert_dead_id_not_sent_again(real_server, dead, allowed=1)
    assert [r.session_id for r in deletes(real_server)] == [client.session_ids[1]]
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_concurrent_calls_meeting_the_404_reinitialize_once(sse_server: RealServer) -> None:
    k = 5
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        await client.call_tool("count")
        dead = client.session_id
        await drop(sse_server, dead)
        # Hold the K calls at the server until all K are in flight on the dead id (F-BARRIER).
        sse_server.gate(rpc_method="tools/call", session_id=dead, parties=k)
        results = await asyncio.gather(*(client.call_tool("count") for _ in range(k)))

    assert len(results) == k
    assert not any(is_error(r) for r in results)
    assert sse_server.executions("count") == 1 + k
    assert len(initializes(sse_server)) == 2
    assert client.generation == 2
    assert_dead_id_not_sent_again(sse_server, dead, allowed=k)
    assert_no_tasks_left()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}', "application/json"),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}', "application/json"),
        (b"", None),
        (b"<html><body>Not Found</body></html>", "text/html"),
    ],
    ids=["sdk-32600", "ts-32001", "empty", "html"],
)
async def test_every_404_shape_counts_as_session_loss(
    sse_server: RealServer, body: bytes, content_type: str | None
) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        await client.call_tool("echo", {"text": "warm"})
        sse_server.reject(status=404, body=body, content_type=content_type, rpc_method="tools/call", times=1)
        result = await client.call_tool("echo", {"text": "again"})

    assert text(result) == "again"
    assert len(initializes(sse_server)) == 2
    assert_initialize_carries_no_session_id(sse_server)
    assert_dead_id_not_sent_again(sse_server, client.session_ids[0], allowed=1)
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_persistent_404_raises_session_lost_error_after_three_initializes(sse_server: RealServer) -> None:
    sse_server.reject(status=404, rpc_method="tools/call")
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        with pytest.raises(SessionLostError, match="lost 3 times in a row") as info:
            await client.call_tool("echo", {"text": "x"})

    assert len(initializes(sse_server)) == 3
    assert info.value.session_ids == client.session_ids
    assert len(set(client.session_ids)) == 3
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_404_on_initialize_is_an_open_error_not_a_reconnect_loop(sse_server: RealServer) -> None:
    url = sse_server.url.replace("/mcp", "/nope")
    async with asyncio.timeout(WAIT), ReusingSessionClient(url) as client:
        with pytest.raises(SessionOpenError, match="Could not open an MCP session"):
            await client.call_tool("echo", {"text": "x"})
        with pytest.raises(SessionOpenError):  # the next call tries again (no sticky failure)
            await client.call_tool("echo", {"text": "x"})

    assert len(initializes(sse_server)) == 2
    assert_no_tasks_left()


# -- no re-initialize on anything else ---------------------------------------------------------


@pytest.mark.asyncio
async def test_tool_error_result_does_not_reinitialize(real_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(real_server.url) as client:
        result = await client.call_tool("fail", {"reason": "nope"})
        after = await client.call_tool("echo", {"text": "ok"})

    assert is_error(result)
    assert text(after) == "ok"
    assert real_server.executions("fail") == 1
    assert len(initializes(real_server)) == 1
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_5xx_is_surfaced_not_retried_and_the_next_call_works(sse_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        await client.call_tool("count")
        sse_server.reject(status=500, body=b"Internal Server Error", content_type="text/plain", times=1)
        # 2.x: a per-call MCPError(-32603); 1.x: the transport is torn down (protocol.md §6 item 15).
        with pytest.raises((_sdk().error_type, SessionClosedError)):
            await client.call_tool("count")
        result = await client.call_tool("count")

    assert text(result) == "2"
    assert len(sse_server.records(rpc_method="tools/call")) == 3  # warm-up, the 500, the next call
    expected_sessions = 1 if _sdk().line == 2 else 2  # 1.x reopens on the next call
    assert len(initializes(sse_server)) == expected_sessions
    assert_no_tasks_left()


# -- aclose ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_aclose_deletes_live_sessions_only_and_closes_its_http_client(sse_server: RealServer) -> None:
    async with asyncio.timeout(WAIT):
        client = ReusingSessionClient(sse_server.url)
        await client.call_tool("count")
        dead = client.session_id
        await drop(sse_server, dead)
        await client.call_tool("count")
        http = client.http_client
        await client.aclose()
        await client.aclose()  # idempotent

    assert http.is_closed
    assert client.closed
    assert [r.session_id for r in deletes(sse_server)] == [client.session_ids[1]]
    assert client.deleted_session_ids == (client.session_ids[1],)
    with pytest.raises(RuntimeError, match="it is CLOSED; create a new ReusingSessionClient"):
        await client.call_tool("count")
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_passed_in_http_client_is_reused_and_never_closed(sse_server: RealServer) -> None:
    http = new_http_client()
    try:
        async with asyncio.timeout(WAIT):
            client = ReusingSessionClient(sse_server.url, http_client=http)
            await client.call_tool("echo", {"text": "a"})
            await drop(sse_server, client.session_id)
            await client.call_tool("echo", {"text": "b"})
            assert client.http_client is http
            await client.aclose()
        assert not http.is_closed
        assert http.event_hooks["response"] == []  # our hook is removed again
    finally:
        await http.aclose()
    assert len(deletes(sse_server)) == 1
    assert_no_tasks_left()


def test_headers_with_a_passed_in_client_is_rejected_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"set them on your own client instead"):
        ReusingSessionClient("http://127.0.0.1:1/mcp", http_client=object(), headers={"a": "b"})


@pytest.mark.asyncio
async def test_aclose_from_a_different_task_than_the_opener(sse_server: RealServer) -> None:
    client = ReusingSessionClient(sse_server.url)
    async with asyncio.timeout(WAIT):
        await asyncio.get_running_loop().create_task(client.call_tool("echo", {"text": "x"}))
        await asyncio.get_running_loop().create_task(client.aclose())

    assert [r.session_id for r in deletes(sse_server)] == list(client.session_ids)
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_aclose_during_initialize_leaves_no_session_open(sse_server: RealServer) -> None:
    gate = sse_server.gate(rpc_method="initialize")
    client = ReusingSessionClient(sse_server.url)
    async with asyncio.timeout(WAIT):
        opening = asyncio.get_running_loop().create_task(client.connect())
        await asyncio.to_thread(gate.wait_arrived, 1, WAIT)
        closing = asyncio.get_running_loop().create_task(client.aclose())
        gate.release()
        await closing
        with pytest.raises(RuntimeError, match="CLOSING"):
            await opening

    assert len(client.session_ids) == 1  # the handshake finished...
    assert [r.session_id for r in deletes(sse_server)] == list(client.session_ids)  # ...and was ended
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_calls_in_parallel_do_not_wait_on_each_other(sse_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), ReusingSessionClient(sse_server.url) as client:
        await client.call_tool("echo", {"text": "warm"})
        gate = sse_server.gate(rpc_method="tools/call", parties=2)  # needs both calls in flight at once
        results = await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("count"))
        sse_server.remove_gate(gate)

    assert text(results[0]) == "a"
    assert gate.arrived == 2
    assert_no_tasks_left()


# -- SessionCache ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cache_creates_one_client_per_key_under_concurrency(sse_server: RealServer) -> None:
    async with asyncio.timeout(WAIT), SessionCache() as cache:
        clients = await asyncio.gather(*(cache.get_or_create((sse_server.url, "run-1")) for _ in range(5)))
        other = await cache.get_or_create((sse_server.url, "run-2"))
        assert all(c is clients[0] for c in clients)
        assert other is not clients[0]
        assert cache.create_count == 2
        assert len(cache) == 2

    assert len(initializes(sse_server)) == 2
    assert len(deletes(sse_server)) == 2
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_cache_scope_is_shared_by_sub_agents_and_closed_by_the_root(sse_server: RealServer) -> None:
    cache = SessionCache()
    async with asyncio.timeout(WAIT):

        async def sub_agent() -> ReusingSessionClient:
            async with cache.scope() as run:  # inherits the root's run: closes nothing
                assert run == current_run_id()
                client = await cache.get(sse_server.url)
                await client.call_tool("count")
                return client

        async with cache.scope() as root_run:
            root = await cache.get(sse_server.url)
            subs = await asyncio.gather(sub_agent(), sub_agent())
            assert all(c is root for c in subs)
            assert not root.closed
        assert current_run_id() is None
        assert root.closed
        assert len(cache) == 0
        with pytest.raises(LookupError, match="wrap the agent run"):
            await cache.get(sse_server.url)
        await cache.aclose()

    assert root_run
    assert len(initializes(sse_server)) == 1
    assert len(deletes(sse_server)) == 1
    assert_no_tasks_left()


@pytest.mark.asyncio
async def test_cache_aclose_closes_a_creation_in_flight(sse_server: RealServer) -> None:
    gate = sse_server.gate(rpc_method="initialize")
    cache = SessionCache()
    async with asyncio.timeout(WAIT):
        getting = asyncio.get_running_loop().create_task(cache.get_or_create((sse_server.url, "r")))
        await asyncio.to_thread(gate.wait_arrived, 1, WAIT)
        closing = asyncio.get_running_loop().create_task(cache.aclose())
        gate.release()
        await closing
        client = await getting

    assert client.closed
    assert len(initializes(sse_server)) == 1
    assert [r.session_id for r in deletes(sse_server)] == list(client.session_ids)
    assert_no_tasks_left()
