"""The list-change oracles on 2026-07-28 clients (_oracles/_lists.py): no session, so a call is judged by what can
be attributed soundly (docs/changing-tools.md#which-client-sent-a-call). Driven by mcp 2.x's ``Client`` and the
reference client where the SDK line has the era, and by a raw HTTP client (a deliberately broken one, on both
lines: the fake serves the era with ``flavour="mcp2"`` whatever SDK is installed) over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from _sdk import MCP2
from pytest_fake_mcp import FakeMCPServer, ScriptError
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp.client import ReusingSessionClient

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs mcp 2.x's Client: mcp 1.x's client speaks only the handshake"
)
ANNOUNCING = pytest.mark.fake_mcp_server(list_changed=True)
RAW = pytest.mark.fake_mcp_server(list_changed=True, flavour="mcp2")
STALE = "came before the client listed the tools again"
UNTOLD = "reached no subscriptions/listen stream"
TOLD = "handle notifications/tools/list_changed"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}


class RawModernClient:
    """A 2026-07-28 client written by hand on one ``httpx.AsyncClient``: it lists once and calls from that list."""

    def __init__(self, url: str, http: httpx.AsyncClient) -> None:
        self.url = url
        self.http = http
        self.ids = itertools.count(1)

    async def send(self, method: str, params: dict[str, Any] | None = None, name: str | None = None) -> Any:
        headers = {**HEADERS, "mcp-method": method, **({"mcp-name": name} if name else {})}
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": {**(params or {}), "_meta": META}}
        answer = await self.http.post(self.url, headers=headers, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]

    async def call(self, tool: str, **arguments: Any) -> Any:
        return await self.send("tools/call", {"name": tool, "arguments": arguments}, name=tool)

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[bytes]]:
        """A ``subscriptions/listen`` stream (its own connection while open), yielded once acknowledged."""
        body = {
            "jsonrpc": "2.0",
            "id": "listen-1",
            "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
        }
        headers = {**HEADERS, "mcp-method": "subscriptions/listen"}
        async with self.http.stream("POST", self.url, headers=headers, json=body) as stream:
            chunks = stream.aiter_raw()
            assert b"notifications/subscriptions/acknowledged" in await anext(chunks)
            yield chunks


@contextlib.asynccontextmanager
async def raw_client(url: str) -> AsyncIterator[RawModernClient]:
    async with asyncio.timeout(20), httpx.AsyncClient(timeout=10) as http:
        client = RawModernClient(url, http)
        await client.send("server/discover")
        yield client


def relisted_failure(server: FakeMCPServer, **kwargs: Any) -> str:
    with pytest.raises(AssertionError) as failure:
        server.assert_relisted_after_changes(**kwargs)
    return str(failure.value)


# --- a deliberately broken client: it keeps its first list (both SDK lines) ---------------------------------


@RAW
@pytest.mark.asyncio
async def test_a_modern_call_on_a_connection_that_lived_through_the_change_is_caught(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with raw_client(fake_mcp_server.url) as client:
        await client.send("tools/list")
        fake_mcp_server.add_tool("search", lambda q, limit=1: f"v2 {q}")
        await client.call("search", q="x")
    (call,) = fake_mcp_server.get_requests(method="tools/call")
    assert call.era == "modern"
    assert call.session_id is None
    message = relisted_failure(fake_mcp_server)
    assert f"1 call of a changed tool {STALE}" in message
    assert "tool 'search' replaced after exchange #2 (on no listen stream); no tools/list since" in message
    assert UNTOLD in message  # the client was never told: the hint says so, and how to tell it
    assert f"#{call.seq}" in message


@RAW
@pytest.mark.asyncio
async def test_a_modern_client_that_hears_the_change_and_calls_from_its_old_list_is_caught(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with raw_client(fake_mcp_server.url) as client, client.listen() as events:
        await client.send("tools/list")
        await client.call("search", q="x")  # on a second connection: the listen stream holds the first
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        async with asyncio.timeout(10):
            assert b"notifications/tools/list_changed" in await anext(events)
        await client.call("search", q="y")  # heard it, did not list again
    message = relisted_failure(fake_mcp_server)
    assert STALE in message
    assert "(announced on 1 listen stream)" in message
    assert TOLD in message
    assert "docs/failure-modes.md#l01" in message


@RAW
@pytest.mark.asyncio
async def test_a_modern_client_that_lists_again_after_hearing_passes(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with raw_client(fake_mcp_server.url) as client, client.listen() as events:
        await client.send("tools/list")
        await client.call("search", q="x")
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        async with asyncio.timeout(10):
            assert b"notifications/tools/list_changed" in await anext(events)
        await client.send("tools/list")
        await client.call("search", q="y")
    fake_mcp_server.assert_relisted_after_changes()
    fake_mcp_server.assert_relisted_after_changes(single_client=True)


@RAW
@pytest.mark.asyncio
async def test_a_modern_call_of_a_removed_tool_is_caught_and_told_why(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("old", lambda: "old")
    async with raw_client(fake_mcp_server.url) as client:
        await client.send("tools/list")
        fake_mcp_server.remove_tool("old")
        result = await client.call("old")
    assert result["isError"] is True
    with pytest.raises(AssertionError) as failure:
        fake_mcp_server.assert_no_removed_tool_calls()
    message = str(failure.value)
    assert "The client called 1 time a tool removed before the call: 'old'." in message
    assert "tool 'old' removed after exchange #2 (on no listen stream)" in message
    assert "the removal reached no subscriptions/listen stream" in message


@RAW
@pytest.mark.asyncio
async def test_a_modern_client_that_drops_the_removed_tool_passes(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("old", lambda: "old")
    async with raw_client(fake_mcp_server.url) as client, client.listen() as events:
        await client.send("tools/list")
        fake_mcp_server.remove_tool("old")
        async with asyncio.timeout(10):
            await anext(events)
        listed = await client.send("tools/list")
        assert [tool["name"] for tool in listed["tools"]] == ["echo"]
        await client.call("echo", text="hi")
    fake_mcp_server.assert_no_removed_tool_calls()
    fake_mcp_server.assert_relisted_after_changes()  # echo never changed: nothing to list again for


# --- what cannot be attributed: an error naming why, never a verdict ------------------------------------------


@RAW
@pytest.mark.asyncio
async def test_a_call_on_a_connection_opened_after_the_change_cannot_be_judged_without_single_client(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with raw_client(fake_mcp_server.url) as client, client.listen() as events:
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        async with asyncio.timeout(10):
            await anext(events)
        await client.call("search", q="y")  # a new connection: the listen stream holds the one used before
    connections = {e.connection for e in fake_mcp_server.journal if e.http_method == "POST"}
    assert len(connections) == 2
    with pytest.raises(ScriptError, match=r"cannot judge #\d+ tools/call 'search'.*single_client=True"):
        fake_mcp_server.assert_relisted_after_changes()
    # the test knows one client spoke: said so, the call is judged
    assert STALE in relisted_failure(fake_mcp_server, single_client=True)


@RAW
@pytest.mark.asyncio
async def test_in_process_each_http_client_is_one_connection_so_its_calls_are_judged(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with InProcessFake(fake_mcp_server.options) as fake:
        server = fake.open_server()
        server.add_tool("search", lambda q: f"v1 {q}")
        async with raw_client(server.url) as client, client.listen() as events:
            server.add_tool("search", lambda q: f"v2 {q}")
            async with asyncio.timeout(10):
                await anext(events)
            await client.call("search", q="y")  # over a socket this would be a new connection: not judged
        assert len({e.connection for e in server.journal}) == 1
        with pytest.raises(AssertionError, match=STALE):
            server.assert_relisted_after_changes()


@RAW
@pytest.mark.asyncio
async def test_single_client_is_refused_where_two_clients_probed(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with raw_client(fake_mcp_server.url) as first:
        await first.send("tools/list")
    fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
    async with raw_client(fake_mcp_server.url) as second:
        await second.call("search", q="x")
    with pytest.raises(ScriptError, match=r"single_client=True\): 2 server/discover probes arrived"):
        fake_mcp_server.assert_relisted_after_changes(single_client=True)
    with pytest.raises(ScriptError, match=r"single_client='yes' must be True or False"):
        fake_mcp_server.assert_relisted_after_changes(single_client="yes")  # type: ignore[arg-type]


# --- mcp 2.x's Client (the 2026-07-28 era: mcp 1.x has none) ---------------------------------------------


@needs_mcp2
@ANNOUNCING
@pytest.mark.asyncio
async def test_the_mcp2_client_that_relists_on_its_listen_event_passes(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    fake_mcp_server.add_tool("old", lambda: "old")
    async with asyncio.timeout(20), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            fake_mcp_server.add_tool("search", lambda q, limit=1: f"v2 {q}")
            fake_mcp_server.remove_tool("old")
            await anext(subscription)  # ToolsListChanged (the two changes may come as one event)
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("search", {"q": "y", "limit": 2})
    assert names == {"echo", "search"}
    assert result.content[0].text == "v2 y"  # type: ignore[union-attr]
    assert {e.era for e in fake_mcp_server.journal if e.rpc_method} == {"modern"}
    fake_mcp_server.assert_relisted_after_changes()
    fake_mcp_server.assert_relisted_after_changes(single_client=True)
    fake_mcp_server.assert_no_removed_tool_calls()


@needs_mcp2
@ANNOUNCING
@pytest.mark.asyncio
async def test_the_mcp2_client_does_not_list_again_on_its_own_and_is_caught(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    fake_mcp_server.add_tool("old", lambda: "old")
    async with asyncio.timeout(20), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("search", {"q": "x"})
            fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
            fake_mcp_server.remove_tool("old")
            await anext(subscription)
            await client.call_tool("search", {"q": "y"})  # the event evicts its cache; it lists only when asked
            removed = await client.call_tool("old", {})
    assert removed.is_error
    assert not fake_mcp_server.get_requests(method="tools/list")[1:]  # measured: no tools/list on its own
    message = relisted_failure(fake_mcp_server)
    assert f"2 calls of a changed tool {STALE}" in message
    assert "(announced on 1 listen stream)" in message
    with pytest.raises(AssertionError, match=r"(?s)a tool removed before the call: 'old'.*drop the removed ones"):
        fake_mcp_server.assert_no_removed_tool_calls()


@needs_mcp2
@ANNOUNCING
@pytest.mark.asyncio
async def test_the_mcp2_client_without_a_listen_stream_is_caught_and_told_it_could_not_know(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with asyncio.timeout(20), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        await client.call_tool("search", {"q": "y"})
    assert not fake_mcp_server.get_requests(method="subscriptions/listen")  # measured: it never listens unasked
    message = relisted_failure(fake_mcp_server)
    assert STALE in message
    assert UNTOLD in message


@needs_mcp2
@ANNOUNCING
@pytest.mark.asyncio
async def test_the_reference_client_in_the_modern_era_does_not_listen_and_is_told_so(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, mode="auto") as client:
        await client.call_tool("search", {"q": "x"})  # lists once, then calls
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        await client.call_tool("search", {"q": "y"})
    assert fake_mcp_server.get_request(method="tools/call", era="handshake") is None
    message = relisted_failure(fake_mcp_server)
    assert STALE in message
    assert UNTOLD in message


@needs_mcp2
@pytest.mark.asyncio
async def test_a_call_refused_for_stale_param_headers_then_resent_after_listing_passes(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client

    def ask(region: str) -> str:
        return f"{region} v1"

    def ask_routed(region: str) -> str:
        return f"{region} v2"

    fake_mcp_server.add_tool("ask", ask)
    async with asyncio.timeout(20), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        await client.call_tool("ask", {"region": "eu"})
        fake_mcp_server.add_tool("ask", ask_routed, param_headers={"region": "Region"})  # now mirrored
        result = await client.call_tool("ask", {"region": "eu"})  # 400 -32020, tools/list, resent: the spec's way
    assert result.content[0].text == "eu v2"  # type: ignore[union-attr]
    calls = [(e.rpc_method, e.status) for e in fake_mcp_server.journal if e.rpc_method in ("tools/call", "tools/list")]
    assert calls[-3:] == [("tools/call", 400), ("tools/list", 200), ("tools/call", 200)]
    fake_mcp_server.assert_relisted_after_changes()
