"""How-to: change the tools during a test and check the client followed (docs/changing-tools.md)."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

needs_mcp2 = pytest.mark.skipif(
    int(importlib.metadata.version("mcp").split(".")[0]) < 2,
    reason="subscriptions/listen is the 2026-07-28 era: mcp 2.x's Client.listen()",
)


# --8<-- [start:relisting-client]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_the_client_lists_again_when_told_the_tools_changed(fake_mcp_server):
    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")
    fake_mcp_server.add_tool("legacy", lambda: "old")
    changed = asyncio.Event()

    async def on_message(message):  # the SDK's message_handler: notifications arrive here
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            changed.set()

    async with (
        asyncio.timeout(10),
        streamable_http_client(fake_mcp_server.url) as streams,
        ClientSession(streams[0], streams[1], message_handler=on_message) as session,
    ):
        await session.initialize()
        await session.list_tools()
        await fake_mcp_server.wait_for_get_streams()  # the SDK opens its GET stream in the background

        fake_mcp_server.add_tool("search", lambda query, limit=10: f"v2: {query}")  # replaces it
        fake_mcp_server.remove_tool("legacy")

        await changed.wait()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert "legacy" not in tools
        await session.call_tool("search", {"query": "mcp", "limit": 3})

    fake_mcp_server.assert_relisted_after_changes()
    fake_mcp_server.assert_no_removed_tool_calls()


# --8<-- [end:relisting-client]


# --8<-- [start:stale-client]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_a_client_that_calls_from_its_old_list_is_caught(fake_mcp_server):
    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")

    async with (
        asyncio.timeout(10),
        streamable_http_client(fake_mcp_server.url) as streams,
        ClientSession(streams[0], streams[1]) as session,  # no message_handler: the notification is ignored
    ):
        await session.initialize()
        await session.list_tools()
        await fake_mcp_server.wait_for_get_streams()
        fake_mcp_server.add_tool("search", lambda query: f"v2: {query}")
        await session.call_tool("search", {"query": "mcp"})

    with pytest.raises(AssertionError, match="came before the session listed the tools again"):
        fake_mcp_server.assert_relisted_after_changes()


# --8<-- [end:stale-client]


# --8<-- [start:silent-change]
@pytest.mark.asyncio
async def test_by_default_a_change_is_silent(fake_mcp_server):
    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")

    async with (
        asyncio.timeout(10),
        streamable_http_client(fake_mcp_server.url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        init = await session.initialize()
        assert init.capabilities.tools.model_dump(by_alias=True)["listChanged"] is False  # as MCPServer says
        fake_mcp_server.remove_tool("search")  # no notification: the client cannot know
        result = await session.call_tool("search", {"query": "mcp"})
        assert result.content[0].text == "Unknown tool: search"

    with pytest.raises(AssertionError, match="the removal was not announced"):
        fake_mcp_server.assert_no_removed_tool_calls()
    # without that assertion, the teardown would report the call, once: set
    # @pytest.mark.fake_mcp_server(fail_on_unknown_tool=False) if the test means the client to call it


# --8<-- [end:silent-change]


@needs_mcp2
# --8<-- [start:listen]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_a_modern_client_hears_of_a_change_on_its_listen_stream(fake_mcp_server):
    from mcp import Client

    fake_mcp_server.add_tool("legacy", lambda: "old")
    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:  # the 2026-07-28 era
        async with client.listen(tools_list_changed=True) as subscription:
            fake_mcp_server.remove_tool("legacy")
            await anext(subscription)  # ToolsListChanged
        tools = {tool.name for tool in (await client.list_tools()).tools}

    assert "legacy" not in tools


# --8<-- [end:listen]


@needs_mcp2
# --8<-- [start:modern-relisting]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_a_modern_client_lists_again_after_its_listen_event(fake_mcp_server):
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")
    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:  # the 2026-07-28 era: no session
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            fake_mcp_server.add_tool("search", lambda query, limit=10: f"v2: {query}")
            await anext(subscription)  # ToolsListChanged: the Client drops its cached list, no more
            await client.list_tools()  # so the caller lists again before it calls
            await client.call_tool("search", {"query": "mcp", "limit": 3})

    fake_mcp_server.assert_relisted_after_changes()


# --8<-- [end:modern-relisting]


@needs_mcp2
# --8<-- [start:modern-stale]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_a_modern_client_that_keeps_its_old_list_is_caught(fake_mcp_server):
    from mcp import Client

    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")
    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:
        await client.list_tools()
        await client.call_tool("search", {"query": "a"})
        fake_mcp_server.add_tool("search", lambda query: f"v2: {query}")
        await client.call_tool("search", {"query": "b"})  # no listen stream, no tools/list: from its old list

    with pytest.raises(AssertionError, match="came before the client listed the tools again"):
        fake_mcp_server.assert_relisted_after_changes()  # the hint: the change reached no listen stream


# --8<-- [end:modern-stale]


# --8<-- [start:reference-client]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(list_changed=True)
async def test_the_reference_client_lists_again_once_it_heard_the_change(fake_mcp_server):
    from pytest_fake_mcp.client import ReusingSessionClient

    fake_mcp_server.add_tool("search", lambda query: f"v1: {query}")
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("search", {"query": "mcp"})
        await fake_mcp_server.wait_for_get_streams()

        fake_mcp_server.add_tool("search", lambda query, limit=10: f"v2: {query}")
        await client.wait_for_tool_list_change()  # heard on its GET stream: the next call lists again first
        await client.call_tool("search", {"query": "mcp", "limit": 3})

    fake_mcp_server.assert_relisted_after_changes()


# --8<-- [end:reference-client]
