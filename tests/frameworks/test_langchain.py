"""Recipe: an agent built on LangChain's MCP adapters (docs/frameworks/langchain.md).

langchain-mcp-adapters turns an MCP server's tools into LangChain tools that any LangChain or LangGraph agent calls
with ``tool.ainvoke(...)``. It has two forms: ``MultiServerMCPClient.get_tools()``, whose tools open a session of
their own for every call (by design, as its docstring says), and ``client.session(name)``, an ``async with`` that
keeps one session for the tools loaded on it (``load_mcp_tools(session)``). It supports mcp 1.x only (0.3.2
requires ``mcp<2``), so it speaks the handshake era alone: against the fake's default ``era="dual"`` it meets
sessions with no pin.

Install: ``pip install -e '.[test]' -r tests/frameworks/requirements-langchain.txt``. Not installed, the module
skips; CI sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (the framework's imports, and mcp 1.x's McpError, follow the check that it is installed)
from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any, ClassVar

import httpx
import pytest

from _frameworks import assert_measured, require_framework

require_framework("langchain_mcp_adapters.client", "langchain")  # it imports langchain_mcp_adapters.tools

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import McpError

from pytest_fake_mcp.contract import SessionReuseSuite


def text_of(output: Any) -> str:
    """The text of a LangChain tool's output: a string, or a list of content blocks."""
    if isinstance(output, str):
        return output
    return "".join(block["text"] for block in output if block.get("type") == "text")


# --8<-- [start:langchain-get-tools]
@pytest.mark.asyncio
async def test_get_tools_opens_a_session_per_call(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    async with asyncio.timeout(10):
        [echo] = [tool for tool in await client.get_tools() if tool.name == "echo"]
        first = await echo.ainvoke({"text": "one"})  # what an agent does with the model's tool call
        second = await echo.ainvoke({"text": "two"})

    assert (text_of(first), text_of(second)) == ("one", "two")
    # get_tools() and each call: initialize, the request, DELETE; a new session and HTTP client every time.
    fake_mcp_server.assert_initialize_count(3)
    fake_mcp_server.assert_sessions(created=3, ended_by={"delete": 3})
    mcp_http_clients.assert_created(3, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-get-tools]


# --8<-- [start:langchain-get-tools-loss]
@pytest.mark.asyncio
async def test_get_tools_meets_a_loss_only_inside_a_call(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    async with asyncio.timeout(10):
        [echo] = [tool for tool in await client.get_tools() if tool.name == "echo"]
        assert fake_mcp_server.drop_session() == []  # between calls there is no session to lose
        fake_mcp_server.on("tools/call").drop_session()  # so lose the next call's own session under it
        with pytest.raises(McpError, match="Session terminated"):  # that call fails: it is not retried
            await echo.ainvoke({"text": "lost"})
        after = await echo.ainvoke({"text": "after"})  # the next call opens a session of its own

    assert text_of(after) == "after"
    assert fake_mcp_server.executions("echo", {"text": "lost"}) == []  # the refused call never ran
    fake_mcp_server.assert_sessions(created=3, ended_by={"dropped": 1, "delete": 2})
    fake_mcp_server.assert_no_stale_session_ids()  # the lost session's only DELETE is the allowed one
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-get-tools-loss]


# --8<-- [start:langchain-session]
@pytest.mark.asyncio
async def test_a_session_block_keeps_one_session(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    async with asyncio.timeout(10), client.session("fake") as session:
        [echo] = [tool for tool in await load_mcp_tools(session) if tool.name == "echo"]
        await echo.ainvoke({"text": "one"})
        await echo.ainvoke({"text": "two"})

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})  # leaving the block sent the DELETE
    fake_mcp_server.assert_all_sessions_closed()
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-session]


# --8<-- [start:langchain-session-loss]
@pytest.mark.asyncio
async def test_a_session_block_never_recovers_from_a_lost_session(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    async with asyncio.timeout(10):
        async with client.session("fake") as session:
            [echo] = [tool for tool in await load_mcp_tools(session) if tool.name == "echo"]
            await echo.ainvoke({"text": "before"})
            [dead] = fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
            for text in ("after 1", "after 2"):  # the session keeps the dead id: every call in the block fails
                with pytest.raises(McpError, match="Session terminated"):
                    await echo.ainvoke({"text": text})
        async with client.session("fake") as session:  # only a new block opens a new session
            [echo] = [tool for tool in await load_mcp_tools(session) if tool.name == "echo"]
            again = await echo.ainvoke({"text": "again"})

    assert text_of(again) == "again"
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    refused = [(e.rpc_method or e.http_method, e.session_id) for e in fake_mcp_server.get_requests(status=404)]
    assert refused == [("tools/call", dead), ("tools/call", dead), ("DELETE", dead)]
    with pytest.raises(AssertionError, match="1 exchange carried a session id it should not have"):
        fake_mcp_server.assert_no_stale_session_ids()  # the second failed call sent the dead id again
    mcp_http_clients.assert_created(2, talked_to=fake_mcp_server.url)  # one per block
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-session-loss]


# --8<-- [start:langchain-error-status]
@pytest.mark.asyncio
async def test_an_error_status_ends_the_session_block(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    fake_mcp_server.on("tools/call").respond(500)

    async def agent_run():
        async with client.session("fake") as session:
            [echo] = [tool for tool in await load_mcp_tools(session) if tool.name == "echo"]
            with pytest.raises(asyncio.CancelledError):  # the call is cancelled by the transport, not failed
                await echo.ainvoke({"text": "x"})

    with pytest.raises(ExceptionGroup) as raised:  # the error comes out of the block instead
        await asyncio.wait_for(agent_run(), timeout=10)

    assert raised.group_contains(httpx.HTTPStatusError, match="500 Internal Server Error")
    fake_mcp_server.assert_sessions(created=1, live=1)  # no DELETE: the session is left open on the server
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-error-status]


# --8<-- [start:langchain-modern]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")  # a server that dropped the handshake: mcp 1.x cannot talk to it
async def test_a_server_of_the_stateless_era_refuses_the_adapters(fake_mcp_server, mcp_http_clients):
    client = MultiServerMCPClient({"fake": {"url": fake_mcp_server.url, "transport": "streamable_http"}})
    with pytest.raises(ExceptionGroup) as raised:  # the transport's task group fails on the 400
        async with asyncio.timeout(10), client.session("fake"):
            pass

    assert raised.group_contains(httpx.HTTPStatusError, match="400 Bad Request")
    [refused] = fake_mcp_server.get_requests(method="initialize")
    assert refused.status == 400
    mcp_http_clients.assert_all_closed()


# --8<-- [end:langchain-modern]


# --8<-- [start:langchain-contract]
BOUND = timedelta(seconds=5)


def connection(url):
    """The fake as the client's one server, with a bound on each request (mcp 1.x waits for ever by default)."""
    return {"fake": {"url": url, "transport": "streamable_http", "session_kwargs": {"read_timeout_seconds": BOUND}}}


class Tools:
    """The thin adapter: the suite's call_tool(name, arguments) is an agent's call of the LangChain tool."""

    def __init__(self, tools):
        self.tools = {tool.name: tool for tool in tools}

    async def call_tool(self, name, arguments):
        return await self.tools[name].ainvoke(arguments)


ERROR_STATUS_KILLS_THE_SESSION = (
    "a 4xx/5xx answer to tools/call crashes mcp 1.x's transport task group: the call is cancelled (CancelledError) "
    "instead of raising, the `async with client.session()` block raises ExceptionGroup(HTTPStatusError), and the "
    "session is left open on the server (no DELETE)"
)


class TestLangChainSessionContract(SessionReuseSuite):
    """`client.session(...)`: one session, entered and left by the suite on the scenario's own task."""

    client_timeout = BOUND.total_seconds()
    known_failures: ClassVar[dict[str, str]] = {
        "test_lost_session_is_reopened_once_and_the_call_retried": (
            "keeps the dead session id: every later call raises 'Session terminated'"
        ),
        "test_server_error_5xx_is_surfaced_without_reinitializing": ERROR_STATUS_KILLS_THE_SESSION,
        "test_invalid_request_400_is_not_session_loss": ERROR_STATUS_KILLS_THE_SESSION,
    }

    @pytest.fixture
    def open_client(self):
        @contextlib.asynccontextmanager
        async def open_client(url):
            client = MultiServerMCPClient(connection(url))
            async with client.session("fake") as session:
                yield Tools(await load_mcp_tools(session))

        return open_client


CALL_SESSION_LEFT_OPEN = (
    "a 4xx/5xx answer to tools/call crashes mcp 1.x's transport task group: the call raises "
    "ExceptionGroup(HTTPStatusError) and the session opened for it is left open on the server (no DELETE)"
)


class TestLangChainGetToolsContract(SessionReuseSuite):
    """`get_tools()`: a session per call, by design."""

    session_policy = "per_call"
    client_timeout = BOUND.total_seconds()
    known_failures: ClassVar[dict[str, str]] = {
        "test_server_error_5xx_is_surfaced_without_reinitializing": CALL_SESSION_LEFT_OPEN,
        "test_invalid_request_400_is_not_session_loss": CALL_SESSION_LEFT_OPEN,
    }

    @pytest.fixture
    def open_client(self):
        @contextlib.asynccontextmanager
        async def open_client(url):
            client = MultiServerMCPClient(connection(url))
            yield Tools(await client.get_tools())  # lists the tools on a session of its own

        return open_client


# --8<-- [end:langchain-contract]


def test_the_observed_facts_are_of_the_installed_versions() -> None:
    """tests/frameworks/observed/langchain.toml (the verification table's row) names what these tests ran on."""
    assert_measured("langchain", "langchain-mcp-adapters", mcp_line="major")  # the pin is mcp<2
