"""The MCPHelper: explicit connect and close over two servers, closed in ``finally`` and from another task."""

from __future__ import annotations

import asyncio
import logging

import pytest
from clients.helper import MCPHelper, MCPServer
from clients.sdk import WAIT, is_error, text

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory, HTTPClientCounter, ToolError

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]


def serve_docs_and_web(docs: FakeMCPServer, web: FakeMCPServer) -> list[MCPServer]:
    """Two servers with a tool of the same name, and one tool each of their own."""
    docs.add_tool("search", lambda query: f"docs about {query}")
    docs.add_tool("resolve-library-id", lambda name: f"/org/{name}")
    web.add_tool("search", lambda query: f"web pages about {query}")
    return [MCPServer(id="docs", url=docs.url), MCPServer(id="web", url=web.url)]


# --8<-- [start:routing]
async def test_prefixed_tools_reach_their_own_server(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory, mcp_http_clients: HTTPClientCounter
) -> None:
    docs = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as web:
        helper = MCPHelper(serve_docs_and_web(docs, web))
        try:
            async with asyncio.timeout(WAIT):
                await helper.connect_mcp_async()
                tools = helper.tool_names
                library = await helper.call_mcp_tool("mcp_docs_resolve-library-id", {"name": "httpx"})
                from_docs = await helper.call_mcp_tool("mcp_docs_search", {"query": text(library)})
                from_web = await helper.call_mcp_tool("mcp_web_search", {"query": "httpx"})
        finally:
            await helper.close_mcp_async()

        assert tools == ["mcp_docs_resolve-library-id", "mcp_docs_search", "mcp_web_search"]
        assert (text(from_docs), text(from_web)) == ("docs about /org/httpx", "web pages about httpx")
        web.assert_tool_ran("search", times=1)
        web.assert_all_sessions_closed()
    docs.assert_tool_ran("search", times=1)
    docs.assert_tool_ran("resolve-library-id", times=1)
    docs.assert_all_sessions_closed()
    mcp_http_clients.assert_created(1)
    mcp_http_clients.assert_all_closed()
    # --8<-- [end:routing]


async def test_close_in_finally_after_a_failing_step_deletes_every_session(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    def search(query: str) -> str:
        raise ToolError(f"index offline, cannot search {query!r}")

    docs = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as web:
        servers = serve_docs_and_web(docs, web)
        web.add_tool("search", search)  # replaces the web search: this chain step fails
        helper = MCPHelper(servers)
        try:
            async with asyncio.timeout(WAIT):
                await helper.connect_mcp_async()
                result = await helper.call_mcp_tool("mcp_web_search", {"query": "httpx"})
                if is_error(result):
                    raise RuntimeError(text(result))
        except RuntimeError as error:
            failure = str(error)
        finally:
            await helper.close_mcp_async()

        assert failure == "index offline, cannot search 'httpx'"
        web.assert_all_sessions_closed()
    docs.assert_all_sessions_closed()


# --8<-- [start:cross-task]
async def test_close_from_another_task_deletes_every_session(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    docs = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as web:
        helper = MCPHelper(serve_docs_and_web(docs, web))
        async with asyncio.timeout(WAIT):
            await helper.connect_mcp_async()  # the app's startup, in this task
            await helper.call_mcp_tool("mcp_web_search", {"query": "httpx"})
            await asyncio.create_task(helper.close_mcp_async())  # its shutdown hook, in a task of its own

        web.assert_all_sessions_closed()
        web.assert_sessions(created=1, ended_by={"delete": 1})
    docs.assert_all_sessions_closed()
    this_task = asyncio.current_task()
    assert this_task is not None
    assert this_task.cancelling() == 0  # nothing is left to cancel this task later
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no "cancel scope in a different task"
    # --8<-- [end:cross-task]
