"""Changing tool lists mid-test (_fake/_announce.py, _oracles/_lists.py): the catalog's add/replace/remove, the
list_changed notification on each GET stream as a real server sends it, and the two list-change oracles, driven by
real SDK clients (whichever line this virtualenv has) and the reference client over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from _sdk import INNER_ARGS, MCP2, sdk_session
from pytest_fake_mcp import FakeMCPServer, ScriptError
from pytest_fake_mcp.client import ReusingSessionClient

ANNOUNCING = pytest.mark.fake_mcp_server(list_changed=True)
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@contextlib.asynccontextmanager
async def raw_session(url: str) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str], dict[str, Any]]]:
    """A handshake session opened by hand: the client, the session's headers, the initialize result."""
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(url, headers=HEADERS, json=INITIALIZE)
        result = json.loads(answer.text.split("data: ", 1)[1])["result"]
        headers = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client, headers, result


async def first_event(url: str, client: httpx.AsyncClient, headers: dict[str, str], server: FakeMCPServer) -> bytes:
    """Open the session's GET stream, remove tool ``echo`` once it is open, and return the first bytes it carries."""
    async with client.stream("GET", url, headers=headers) as stream:
        await server.wait_for_get_streams()
        server.remove_tool("echo")
        async with asyncio.timeout(10):
            return await anext(stream.aiter_raw())


# --- the wire: what a real server sends, and the default unchanged ------------------------------------


@pytest.mark.asyncio
async def test_by_default_the_capabilities_say_no_list_changes_and_a_change_is_silent(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with raw_session(fake_mcp_server.url) as (client, headers, result):
        caps = result["capabilities"]
        assert caps["tools"] == {"listChanged": False}
        assert caps["prompts"] == {"listChanged": False}
        assert caps["resources"] == {"listChanged": False, "subscribe": False}
        async with client.stream("GET", fake_mcp_server.url, headers=headers):
            await fake_mcp_server.wait_for_get_streams()
            fake_mcp_server.remove_tool("echo")
            listed = await client.post(
                fake_mcp_server.url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            )
    assert '"tools":[]' in listed.text
    (get,) = fake_mcp_server.get_requests(http_method="GET")
    assert get.response_messages == ()  # nothing was sent on the GET stream
    assert [e.text for e in fake_mcp_server.journal.events] == [
        'list change: tool "echo" removed (not announced: list_changed=False)'
    ]


@ANNOUNCING
@pytest.mark.asyncio
async def test_announcing_says_list_changed_and_sends_the_notification_on_the_get_stream_as_mcp2_does(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with raw_session(fake_mcp_server.url) as (client, headers, result):
        caps = result["capabilities"]
        assert caps["tools"] == {"listChanged": True}
        assert caps["prompts"] == {"listChanged": True}
        assert caps["resources"] == {"listChanged": True, "subscribe": False}
        event = await first_event(fake_mcp_server.url, client, headers, fake_mcp_server)
    # measured from mcp 2.x's server: ctx.session.send_tool_list_changed() goes out on the GET stream
    assert event == b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\r\n\r\n'


@pytest.mark.fake_mcp_server(list_changed=True, flavour="mcp1")
@pytest.mark.asyncio
async def test_announcing_as_mcp1_writes_the_method_first_as_mcp1_does(fake_mcp_server: FakeMCPServer) -> None:
    async with raw_session(fake_mcp_server.url) as (client, headers, _):
        event = await first_event(fake_mcp_server.url, client, headers, fake_mcp_server)
    assert event == b'event: message\r\ndata: {"method":"notifications/tools/list_changed","jsonrpc":"2.0"}\r\n\r\n'


@ANNOUNCING
@pytest.mark.asyncio
async def test_a_change_made_by_a_tool_handler_goes_on_the_get_stream_not_the_calls(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("retire", lambda: fake_mcp_server.remove_tool("echo") or "retired")
    async with (
        raw_session(fake_mcp_server.url) as (client, headers, _),
        client.stream("GET", fake_mcp_server.url, headers=headers) as stream,
    ):
        await fake_mcp_server.wait_for_get_streams()
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "retire", "arguments": {}}}
        answer = await client.post(fake_mcp_server.url, headers=headers, json=call)
        async with asyncio.timeout(10):
            event = await anext(stream.aiter_raw())
    assert "list_changed" not in answer.text
    assert '"retired"' in answer.text
    assert b"notifications/tools/list_changed" in event


@ANNOUNCING
@pytest.mark.asyncio
async def test_each_list_has_its_own_notification(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_prompt("hello", "Say hello")
    fake_mcp_server.add_resource("file:///a.txt", "a")
    async with (
        raw_session(fake_mcp_server.url) as (client, headers, _),
        client.stream("GET", fake_mcp_server.url, headers=headers) as stream,
    ):
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.remove_prompt("hello")
        fake_mcp_server.remove_resource("file:///a.txt")
        seen = b""
        async with asyncio.timeout(10):
            async for chunk in stream.aiter_raw():
                seen += chunk
                if seen.count(b"\r\n\r\n") == 2:
                    break
    assert b"notifications/prompts/list_changed" in seen
    assert b"notifications/resources/list_changed" in seen


@ANNOUNCING
@pytest.mark.asyncio
async def test_a_session_without_a_get_stream_hears_nothing_as_with_a_real_server(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with raw_session(fake_mcp_server.url) as (client, headers, _):
        await client.post(fake_mcp_server.url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
        fake_mcp_server.remove_tool("echo")
    assert [e.text for e in fake_mcp_server.journal.events] == [
        'list change: tool "echo" removed (announced on 0 GET streams)'
    ]


# --- the catalog's changes at the test's line -----------------------------------------------------


def test_removing_what_is_not_served_names_what_is(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"remove_tool\('ecko'\): the fake serves no tool .*'echo'.*did you mean"):
        fake_mcp_server.remove_tool("ecko")
    with pytest.raises(ScriptError, match=r"remove_prompt\('p'\): .*register it first with add_prompt"):
        fake_mcp_server.remove_prompt("p")
    with pytest.raises(ScriptError, match=r"remove_resource\('file:///x'\)"):
        fake_mcp_server.remove_resource("file:///x")


def test_changes_before_the_first_request_are_set_up_not_changes(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("a", lambda: "a")
    fake_mcp_server.add_tool("a", lambda: "b")
    fake_mcp_server.remove_tool("a")
    assert fake_mcp_server.journal.events == ()


@pytest.mark.asyncio
async def test_add_tool_over_a_served_name_replaces_it(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("greet", lambda: "hello")
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url) as session:
        first = await session.call_tool("greet", {})
        fake_mcp_server.add_tool("greet", lambda name: f"hello {name}")
        second = await session.call_tool("greet", {"name": "ann"})
    assert first.content[0].text == "hello"  # type: ignore[union-attr]
    assert second.content[0].text == "hello ann"  # type: ignore[union-attr]
    assert [e.text for e in fake_mcp_server.journal.events] == [
        'list change: tool "greet" replaced (not announced: list_changed=False)'
    ]


# --- the oracles, with the SDK's ClientSession: one that relists, one that ignores the notification ---------


def relisting_handler(heard: asyncio.Event) -> Any:
    """An SDK ``message_handler`` noting ``notifications/tools/list_changed`` (the test then lists again)."""

    async def handle(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            heard.set()

    return handle


@ANNOUNCING
@pytest.mark.asyncio
async def test_relisted_and_no_removed_call_pass_for_a_client_that_relists(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    fake_mcp_server.add_tool("old", lambda: "old")
    heard = asyncio.Event()
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url, message_handler=relisting_handler(heard)) as s:
        await s.list_tools()
        await s.call_tool("search", {"q": "x"})
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("search", lambda q, limit=1: f"v2 {q}")
        fake_mcp_server.remove_tool("old")
        await heard.wait()
        names = {tool.name for tool in (await s.list_tools()).tools}
        assert names == {"echo", "search"}
        result = await s.call_tool("search", {"q": "y", "limit": 2})
    assert result.content[0].text == "v2 y"  # type: ignore[union-attr]
    fake_mcp_server.assert_relisted_after_changes()
    fake_mcp_server.assert_no_removed_tool_calls()


@ANNOUNCING
@pytest.mark.asyncio
async def test_relisted_fires_for_a_client_that_ignores_the_notification(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        await session.call_tool("search", {"q": "y"})
    with pytest.raises(AssertionError) as failure:
        fake_mcp_server.assert_relisted_after_changes()
    message = str(failure.value)
    assert "1 call of a changed tool came before the session listed the tools again" in message
    assert "tool 'search' replaced after exchange" in message
    assert "(announced)" in message
    assert "'search' changed; not listed since" in message
    assert "docs/failure-modes.md#l01" in message


@ANNOUNCING
@pytest.mark.asyncio
async def test_no_removed_call_fires_once_for_a_client_that_calls_from_memory(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("old", lambda: "old")
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.remove_tool("old")
        result = await session.call_tool("old", {})
    assert result.isError if not MCP2 else result.is_error  # type: ignore[attr-defined]
    with pytest.raises(AssertionError) as failure:
        fake_mcp_server.assert_no_removed_tool_calls()
    message = str(failure.value)
    assert "The client called 1 time a tool removed before the call: 'old'." in message
    assert "tool 'old' removed after exchange" in message
    assert "docs/failure-modes.md#l02" in message


def test_relisted_refuses_a_test_where_no_tool_changed(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(AssertionError, match="no tool changed during the test"):
        fake_mcp_server.assert_relisted_after_changes()


@pytest.mark.asyncio
async def test_an_unannounced_change_hints_at_list_changed(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("old", lambda: "old")
    async with asyncio.timeout(20), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        fake_mcp_server.remove_tool("old")
        await session.call_tool("old", {})
    with pytest.raises(AssertionError, match=r"(?s)was not announced.*list_changed=True"):
        fake_mcp_server.assert_no_removed_tool_calls()


def test_the_teardown_does_not_fail_a_call_of_a_removed_tool_as_unknown(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_inner=textwrap.dedent(
            """
            import asyncio
            import pytest
            from mcp import ClientSession
            from mcp.client.streamable_http import streamable_http_client

            @pytest.mark.asyncio
            async def test_calls_removed(fake_mcp_server):
                fake_mcp_server.add_tool("old", lambda: "old")
                async with asyncio.timeout(20), streamable_http_client(fake_mcp_server.url) as streams:
                    async with ClientSession(streams[0], streams[1]) as session:
                        await session.initialize()
                        fake_mcp_server.remove_tool("old")
                        await session.call_tool("old", {})
            """
        )
    )
    result = pytester.runpytest(*INNER_ARGS)
    # The test knew the tool, and the client could not know of an unannounced removal: no teardown failure
    # (assert_no_removed_tool_calls checks it when asked). A tool never served still fails it, as before.
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*a tool the fake does not serve*")


# --- the reference client -----------------------------------------------------------------------------------


@ANNOUNCING
@pytest.mark.asyncio
async def test_the_reference_client_lists_again_after_list_changed(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("search", {"q": "x"})
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        await client.wait_for_tool_list_change()
        assert client.tool_list_changes == 1
        await client.call_tool("search", {"q": "y"})
        await client.call_tool("search", {"q": "z"})  # listed once per change, not per call
    lists = fake_mcp_server.get_requests(method="tools/list")
    assert len(lists) == 2
    fake_mcp_server.assert_relisted_after_changes()


@pytest.mark.asyncio
async def test_waiting_for_a_list_change_nobody_announces_fails_bounded_with_the_fix(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "x"})
        fake_mcp_server.remove_tool("echo")  # not announced: list_changed is off
        with pytest.raises(
            AssertionError,
            match=r"heard 0 of 1 notifications/tools/list_changed within 0.2s.*"
            r"list_changed=True",
        ):
            await client.wait_for_tool_list_change(within=0.2)
        with pytest.raises(ValueError, match=r"count=0 must be an int >= 1"):
            await client.wait_for_tool_list_change(0)


@ANNOUNCING
@pytest.mark.asyncio
async def test_a_call_right_after_the_change_gets_the_hint_that_it_may_have_raced_the_notification(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("search", lambda q: f"v1 {q}")
    async with (
        asyncio.timeout(20),
        sdk_session(fake_mcp_server.url) as session,
    ):  # never lists again: each call is judged stale
        await session.list_tools()
        await session.call_tool("search", {"q": "x"})
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("search", lambda q: f"v2 {q}")
        await session.call_tool("search", {"q": "y"})  # the session's first POST since the change
        with pytest.raises(AssertionError, match="may have raced the notification"):
            fake_mcp_server.assert_relisted_after_changes()
        await session.call_tool("search", {"q": "z"})  # a second one: the client had time to hear it
    with pytest.raises(AssertionError) as failure:
        fake_mcp_server.assert_relisted_after_changes()
    assert "may have raced" not in str(failure.value)


@pytest.mark.asyncio
async def test_waiting_for_a_get_stream_no_client_opens_fails_bounded_with_the_reason(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with raw_session(fake_mcp_server.url):  # initialized, but no GET stream
        with pytest.raises(AssertionError, match=r"wait_for_get_streams\(1\): 0 GET stream\(s\) open after 0.2s"):
            await fake_mcp_server.wait_for_get_streams(within=0.2)
        with pytest.raises(ValueError, match=r"count=0 must be an int >= 1"):
            await fake_mcp_server.wait_for_get_streams(0)


# --- the 2026-07-28 era: subscriptions/listen (mcp 2.x) ---------------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN = {**HEADERS, "mcp-protocol-version": "2026-07-28"}
LISTEN = {
    "jsonrpc": "2.0",
    "id": "L1",
    "method": "subscriptions/listen",
    "params": {"notifications": {"toolsListChanged": True, "promptsListChanged": True}, "_meta": MODERN_META},
}


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("sse", marks=ANNOUNCING, id="sse"),
        pytest.param("json", marks=pytest.mark.fake_mcp_server(list_changed=True, json_response=True), id="json"),
    ],
)
@pytest.mark.asyncio
async def test_a_listen_stream_is_acknowledged_then_carries_the_change_as_mcp2_does(
    fake_mcp_server: FakeMCPServer, mode: str
) -> None:  # in JSON mode too: a listen answer is a stream, always

    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream(
            "POST", fake_mcp_server.url, headers={**MODERN, "mcp-method": "subscriptions/listen"}, json=LISTEN
        ) as stream,
        asyncio.timeout(10),
    ):
        chunks = stream.aiter_raw()
        acknowledged = await anext(chunks)
        fake_mcp_server.remove_tool("echo")
        changed = await anext(chunks)
    assert stream.status_code == 200
    assert stream.headers["content-type"] == "text/event-stream"
    # measured from mcp 2.x's MCPServer, byte for byte
    assert acknowledged == (
        b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":'
        b'{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"notifications":{"toolsListChanged":true,'
        b'"promptsListChanged":true}}}\r\n\r\n'
    )
    assert changed == (
        b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":'
        b'{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}}\r\n\r\n'
    )
    assert fake_mcp_server.journal.events[0].text == (
        'list change: tool "echo" removed (announced on 0 GET streams and 1 listen stream)'
    )


@pytest.mark.asyncio
async def test_by_default_listen_is_not_served_and_discover_says_no_list_changes(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        listen = await client.post(
            fake_mcp_server.url, headers={**MODERN, "mcp-method": "subscriptions/listen"}, json=LISTEN
        )
        discover = await client.post(
            fake_mcp_server.url,
            headers={**MODERN, "mcp-method": "server/discover"},
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}},
        )
    assert listen.status_code == 404
    assert discover.json()["result"]["capabilities"]["tools"] == {"listChanged": False}


@ANNOUNCING
@pytest.mark.skipif(not MCP2, reason="subscriptions/listen is the 2026-07-28 era: mcp 2.x's Client.listen()")
@pytest.mark.asyncio
async def test_the_mcp2_client_hears_a_change_on_its_listen_stream(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda q: q)
    async with asyncio.timeout(20), Client(fake_mcp_server.url) as client:
        assert client.server_capabilities.tools.list_changed is True  # type: ignore[union-attr]
        async with client.listen(tools_list_changed=True) as subscription:
            fake_mcp_server.remove_tool("search")
            event = await anext(subscription)
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert names == {"echo"}
