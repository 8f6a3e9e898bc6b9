"""The journal (_journal.py): queries, frozen records, the fields of an exchange, reads during writes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import importlib
import re
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from _sdk import read_until_ended, sdk_session
from pytest_fake_mcp import Exchange, FakeMCPServer, Outcome, ScriptError

# pytester runs in this process and forgets every module first imported during a run. httpx and httpx2
# import their cores lazily and map the cores' exceptions by class, so the cores load here, first.
importlib.import_module("httpcore")
with contextlib.suppress(ImportError):  # httpx2 exists with mcp 2.x only
    importlib.import_module("httpcore2")


VERSION = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


async def two_sessions(url: str) -> None:
    """Session 1 lists and calls echo twice; session 2 calls echo once (no list: an implicit tools/list follows)."""
    async with asyncio.timeout(10), sdk_session(url) as first, sdk_session(url) as second:
        await first.list_tools()
        await first.call_tool("echo", {"text": "a"})
        await first.call_tool("echo", {"text": "b"})
        await second.call_tool("echo", {"text": "c"})


@pytest.mark.asyncio
async def test_get_requests_filters_on_every_given_field(fake_mcp_server: FakeMCPServer) -> None:
    await two_sessions(fake_mcp_server.url)
    first, second = (s.id for s in fake_mcp_server.sessions)

    calls = fake_mcp_server.get_requests(method="tools/call")
    assert [(c.session_id, c.request_body["params"]["arguments"]) for c in calls] == [
        (first, {"text": "a"}),
        (first, {"text": "b"}),
        (second, {"text": "c"}),
    ]
    assert fake_mcp_server.get_requests(tool="echo") == calls
    assert fake_mcp_server.get_requests(tool="echo", session_id=second) == calls[2:]
    assert [e.rpc_method for e in fake_mcp_server.get_requests(session_id=second, kind="request")] == [
        "tools/call",
        "tools/list",
    ]
    assert [e.session_id for e in fake_mcp_server.get_requests(http_method="get")] == [first, second]
    assert [e.session_id for e in fake_mcp_server.get_requests(http_method="DELETE", status=200)] == [second, first]
    assert len(fake_mcp_server.get_requests(session_id=None)) == 2  # the two initialize POSTs
    assert fake_mcp_server.get_requests(method="tools/call", tool="nope") == []
    assert fake_mcp_server.journal.get_requests(method="initialize") == fake_mcp_server.get_requests(
        method="initialize"
    )


@pytest.mark.asyncio
async def test_get_request_returns_the_one_match_or_none_and_refuses_several(fake_mcp_server: FakeMCPServer) -> None:
    await two_sessions(fake_mcp_server.url)
    first = fake_mcp_server.sessions[0].id

    assert fake_mcp_server.get_request(method="ping") is None
    only = fake_mcp_server.get_request(method="tools/list", session_id=first)
    assert only is not None
    assert only.session_id == first
    with pytest.raises(
        AssertionError, match=r"get_request\(method='initialize'\) matched 2 exchanges, expected at most 1"
    ):
        fake_mcp_server.get_request(method="initialize")


def test_get_request_failure_lists_the_matches_and_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx

        INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}}}

        def test_two_initializes(fake_mcp_server):
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            with httpx.Client(timeout=5) as client:
                for _ in range(2):
                    assert client.post(fake_mcp_server.url, json=INIT, headers=headers).status_code == 200
            fake_mcp_server.get_request(method="initialize")
        """
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    # The hypothesis plugin costs a pytester run ~2 s and plays no part here.
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>*fake_mcp_server.get_request(method="initialize")',
            "E *AssertionError: get_request(method='initialize') matched 2 exchanges, expected at most 1:",
            "E *  #1 POST /mcp initialize -> 200",
            "E *  #2 POST /mcp initialize -> 200",
            "E *Hint: use get_requests() to get all of them.",
        ]
    )


def test_unknown_filter_is_refused_with_the_known_names(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"unknown filter\(s\) \['metod'\]; known: \[.*'method'.*\]"):
        fake_mcp_server.get_requests(metod="initialize")  # type: ignore[call-arg]


@pytest.mark.asyncio
async def test_exchanges_are_frozen_records(fake_mcp_server: FakeMCPServer) -> None:
    await two_sessions(fake_mcp_server.url)
    exchange = fake_mcp_server.journal.exchanges[0]

    with pytest.raises(dataclasses.FrozenInstanceError):
        exchange.status = 500  # type: ignore[misc]
    with pytest.raises(TypeError):
        exchange.request_headers["accept"] = "*/*"  # type: ignore[index]
    assert isinstance(fake_mcp_server.journal.exchanges, tuple)
    assert fake_mcp_server.journal.exchanges[0] == exchange


@pytest.mark.asyncio
async def test_a_completed_exchange_is_built_once_with_its_body_parsed(fake_mcp_server: FakeMCPServer) -> None:
    """The journal files an exchange as its values and raw body, and builds the record on the first read."""
    await two_sessions(fake_mcp_server.url)
    first = fake_mcp_server.journal.exchanges

    calls = [e for e in first if e.rpc_method == "tools/call"]
    assert [call.request_body["params"]["arguments"] for call in calls] == [{"text": "a"}, {"text": "b"}, {"text": "c"}]
    assert all(isinstance(e.request_body, dict) for e in first if e.http_method == "POST")


@pytest.mark.asyncio
async def test_exchange_fields_are_populated(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        await session.call_tool("echo", {"text": "hi"})
    session_id = fake_mcp_server.sessions[0].id
    server_port = int(fake_mcp_server.origin.rsplit(":", 1)[1])

    init = fake_mcp_server.get_request(method="initialize")
    call = fake_mcp_server.get_request(method="tools/call")
    assert init is not None
    assert call is not None
    assert (init.session_id, init.response_session_id, init.protocol_version) == (None, session_id, None)
    assert init.outcome is Outcome.COMPLETE
    assert init.ended is not None
    assert init.duration is not None
    assert init.duration >= 0
    assert init.started <= init.ended <= call.started

    assert call.http_method == "POST"
    assert call.path == "/mcp"
    assert (call.kind, call.rpc_method, call.target, call.tool) == ("request", "tools/call", "echo", "echo")
    assert call.rpc_id == init.rpc_id + 2
    assert (call.session_id, call.response_session_id, call.protocol_version) == (session_id, session_id, VERSION)
    assert (call.status, call.response_format, call.error_code) == (200, "sse", None)
    assert call.client is not None
    host, port = call.client
    assert host == "127.0.0.1"
    assert 0 < port != server_port
    assert call.connection == f"127.0.0.1:{port}"
    assert call.connection in fake_mcp_server.figures.connections
    assert call.request_headers["accept"].startswith("application/json, text/event-stream")
    assert call.request_headers["mcp-session-id"] == session_id
    assert call.request_body == {
        **call.request_body,
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
    }
    [answer] = call.response_messages
    assert answer["id"] == call.rpc_id
    assert answer["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert str(call) == f"#{call.seq} POST /mcp session={session_id[:8]} tools/call echo -> 200"


@pytest.mark.asyncio
async def test_an_exchange_still_open_at_reset_stays_out_of_the_new_journal(fake_mcp_server: FakeMCPServer) -> None:
    """A GET stream that outlives a test ends after the reset: it must not land in the next test's journal."""
    url = fake_mcp_server.url
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with asyncio.timeout(10), httpx.AsyncClient(timeout=5) as client:
        opened = await client.post(url, json=INITIALIZE, headers=headers)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        async with client.stream("GET", url, headers=session) as stream:
            assert stream.status_code == 200
            fake_mcp_server._reset()  # what the fixture does between tests; it ends the stream
            assert await read_until_ended(stream) == b""
        after = await client.post(url, json=INITIALIZE, headers=headers)

    assert [(e.seq, e.rpc_method, e.response_session_id) for e in fake_mcp_server.journal.exchanges] == [
        (1, "initialize", after.headers["mcp-session-id"])
    ]


@contextlib.contextmanager
def fast_thread_switching() -> Iterator[None]:
    """Switch threads far more often than the default 5 ms, so a torn read would show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def check_snapshot(exchanges: tuple[Exchange, ...], completed: set[int]) -> None:
    """Every snapshot is whole: seqs 1..n with no gap or duplicate, and a completed exchange stays completed."""
    __tracebackhide__ = True
    seqs = [e.seq for e in exchanges]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    now_complete = {e.seq for e in exchanges if e.outcome is Outcome.COMPLETE}
    assert completed <= now_complete, completed - now_complete
    completed |= now_complete


def test_journal_can_be_read_from_the_test_thread_while_the_server_writes(fake_mcp_server: FakeMCPServer) -> None:
    calls = 12
    releases: list[Callable[[], None]] = []

    async def slow(n: int) -> str:
        loop = asyncio.get_running_loop()
        go: asyncio.Future[None] = loop.create_future()
        releases.append(lambda: loop.call_soon_threadsafe(go.set_result, None))
        await go
        return str(n)

    fake_mcp_server.add_tool("slow", slow)

    async def client() -> list[str]:
        async with asyncio.timeout(20), sdk_session(fake_mcp_server.url) as session:
            await session.list_tools()
            results = await asyncio.gather(*(session.call_tool("slow", {"n": n}) for n in range(calls)))
            return [r.content[0].text for r in results]

    def release_all() -> None:
        while releases:
            releases.pop()()

    completed: set[int] = set()
    seen_in_flight = 0
    deadline = time.monotonic() + 20
    with fast_thread_switching(), concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(asyncio.run, client())
        try:
            while not future.done():
                assert time.monotonic() < deadline, "the client did not finish within 20 s"
                check_snapshot(fake_mcp_server.journal.exchanges, completed)
                str(fake_mcp_server.journal)
                held = fake_mcp_server.get_requests(tool="slow") if len(releases) == calls else []
                # Every handler is running, so every call is in the journal; its SSE headers go out a loop turn
                # after its handler starts (a handler done by then gets one write with the whole answer).
                if held and all(e.status is not None for e in held):
                    # Held calls show in flight, answered 200 with SSE headers so far.
                    assert [(e.outcome, e.status, e.response_format) for e in held] == [
                        (Outcome.IN_FLIGHT, 200, "sse")
                    ] * calls
                    seen_in_flight = len(held)
                    release_all()
        finally:
            release_all()
        results = future.result()

    assert sorted(results, key=int) == [str(n) for n in range(calls)]
    assert seen_in_flight == calls
    check_snapshot(fake_mcp_server.journal.exchanges, completed)


def test_a_journal_made_without_a_renderer_prints_one_line_per_exchange() -> None:
    from pytest_fake_mcp._record._journal import Journal

    journal = Journal(lambda: 0.0)
    exchange = Exchange(seq=journal.next_seq(), http_method="GET", path="/mcp", status=200)
    journal.begin(exchange.seq, lambda: exchange)
    journal.finish(exchange)
    assert str(journal) == "#1 GET /mcp other -> 200"


def test_a_filed_exchange_is_built_on_the_first_read_and_the_same_record_after() -> None:
    """Filing keeps the values and raw body; the first read builds the record, later reads return that object.

    (On a live server the client may return before the server files its last exchanges: a snapshot of one in
    flight is a new object on every read, even once its answer has ended, so this is checked on the journal.)
    """
    from pytest_fake_mcp._record._journal import EXCHANGE_FIELDS, Journal

    journal = Journal(lambda: 0.0)
    seq = journal.next_seq()
    in_flight = Exchange(seq=seq, http_method="POST", path="/mcp", status=200, started=1.0)
    journal.begin(seq, lambda: dataclasses.replace(in_flight))
    assert journal.exchanges[0] is not journal.exchanges[0]  # in flight: a fresh snapshot per read

    done = dataclasses.replace(in_flight, ended=2.0)
    values = tuple(getattr(done, name) for name in EXCHANGE_FIELDS)
    journal.file(seq, 1.0, values, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    first = journal.exchanges[0]
    assert first.request_body == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert first.ended == 2.0
    assert journal.exchanges[0] is first


def test_a_snapshot_is_whole_whatever_the_server_does_while_it_is_taken() -> None:
    """Exchanges that arrive (and even finish) while a reader takes a snapshot are all in it or all out of it.

    The test thread reads while the server's thread files; here the snapshot function of the exchange in flight
    plays that thread, beginning two exchanges and finishing the second one in the middle of the read.
    """
    from pytest_fake_mcp._record._journal import Journal

    journal = Journal(lambda: 0.0)

    def exchange(seq: int) -> Exchange:
        return Exchange(seq=seq, http_method="POST", path="/mcp", status=200)

    def server_runs_on() -> Exchange:
        if len(journal) == 1:  # the first read: two more requests arrive, the later one completes at once
            for _ in range(2):
                seq = journal.next_seq()
                journal.begin(seq, lambda seq=seq: exchange(seq))
            journal.finish(exchange(3))
        return exchange(1)

    journal.begin(journal.next_seq(), server_runs_on)
    assert [e.seq for e in journal.exchanges] == [1]  # taken before they arrived: neither is in it
    assert [e.seq for e in journal.exchanges] == [1, 2, 3]


# --- the deprecated readers of FakeMCPServer (issue 21: kept one release, then gone) --------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reader", "replacement"),
    [
        ("exchanges", "journal.exchanges"),
        ("initialize_count", "figures.initialize_count"),
        ("tool_executions", "figures.tool_executions"),
        ("max_in_flight", "figures.max_in_flight"),
        ("connections", "figures.connections"),
    ],
)
async def test_a_deprecated_reader_warns_and_gives_what_its_replacement_gives(
    fake_mcp_server: FakeMCPServer, reader: str, replacement: str
) -> None:
    await two_sessions(fake_mcp_server.url)
    expected = f"FakeMCPServer.{reader} is deprecated; use server.{replacement} instead"

    with pytest.warns(DeprecationWarning, match=re.escape(expected)) as caught:
        value = getattr(fake_mcp_server, reader)

    assert [w.filename for w in caught] == [__file__]  # the warning points at the user's line
    current: object = fake_mcp_server
    for name in replacement.split("."):
        current = getattr(current, name)
    assert value == current
    assert value  # the two sessions left something to read
