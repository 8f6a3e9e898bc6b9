"""Popular Python MCP clients on a lost session: FastMCP's ``Client`` and langchain-mcp-adapters' tools.

Each drives the ``fake_mcp_server`` fixture over real loopback; the fake forgets the session under it
(``drop_session()`` or ``restart()``) and the journal shows what the client did next. What they do is written up
in docs/verification.md ("What popular clients do when the server forgets the session").

The clients come with the ``interop`` extra (FastMCP, both SDK lines) and ``interop-mcp1`` (langchain-mcp-adapters,
whose releases support mcp 1.x only). Not installed, a test skips; CI installs them and sets
``FAKE_MCP_REQUIRE_INTEROP=1``, which turns the skip into a failure.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from types import ModuleType
from typing import Any

import pytest

from _sdk import MCP2, SDKError
from pytest_fake_mcp import FakeMCPServer

REQUIRE = "FAKE_MCP_REQUIRE_INTEROP"
TRIGGERS = ["drop_session", "restart"]
DEAD_SESSION = "Session not found" if MCP2 else "Session terminated"
"""What the SDK's transport raises on a 404 for the session: 2.x passes the server's message on, 1.x its own."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip (fail under ``FAKE_MCP_REQUIRE_INTEROP=1``) naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not installed ({exc}); run: pip install -e '.[{extra}]'"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def lose_the_session(server: FakeMCPServer, trigger: str) -> None:
    if trigger == "restart":
        server.restart()
    else:
        server.drop_session()


def posts(server: FakeMCPServer) -> list[tuple[str | None, int | None, str | None]]:
    """(JSON-RPC method, status, session id sent) of every POST and DELETE, in order (the GET stream races them)."""
    return [
        (e.rpc_method or e.http_method, e.status, e.session_id)
        for e in server.journal.exchanges
        if e.http_method != "GET"
    ]


# --- FastMCP ----------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.fake_mcp_server(era="handshake")  # a server with sessions: FastMCP 4 falls back to initialize
async def test_fastmcp_client_keeps_the_dead_session_id_and_fails_every_call_until_reopened(
    fake_mcp_server: FakeMCPServer, trigger: str
) -> None:
    fastmcp = require("fastmcp", "interop")
    client = fastmcp.Client(fake_mcp_server.url)
    failures: list[str] = []
    async with asyncio.timeout(15):
        async with client:
            before = await client.call_tool("echo", {"text": "before"})
            [opened] = fake_mcp_server.live_sessions
            lose_the_session(fake_mcp_server, trigger)
            for text in ("after 1", "after 2"):
                with pytest.raises(SDKError) as raised:
                    await client.call_tool("echo", {"text": text})
                failures.append(str(raised.value))
            assert client.is_connected()  # it still counts itself connected
            assert client.transport.get_session_id() == opened.id  # and still holds the dead id
        async with client:  # only leaving and entering the client again opens a new session
            again = await client.call_tool("echo", {"text": "again"})

    assert (before.content[0].text, again.content[0].text) == ("before", "again")
    assert failures == [DEAD_SESSION, DEAD_SESSION]
    wire = posts(fake_mcp_server)
    dead = opened.id
    assert [w for w in wire if w[2] == dead and w[1] == 404] == [
        ("tools/call", 404, dead),
        ("tools/call", 404, dead),
        ("DELETE", 404, dead),  # on leaving the block: a DELETE of the dead id
    ]
    # One initialize per `async with client`: none between the loss and leaving the block.
    [first, second] = fake_mcp_server.get_requests(method="initialize")
    failed = fake_mcp_server.get_requests(status=404)
    assert first.seq < min(e.seq for e in failed)
    assert max(e.seq for e in failed) < second.seq


@pytest.mark.asyncio
@pytest.mark.skipif(not MCP2, reason="FastMCP 3 (the mcp 1.x line) speaks only the handshake era")
async def test_fastmcp_4_speaks_the_stateless_era_and_has_no_session_to_lose(fake_mcp_server: FakeMCPServer) -> None:
    fastmcp = require("fastmcp", "interop")
    async with asyncio.timeout(15), fastmcp.Client(fake_mcp_server.url) as client:
        before = await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.restart()
        after = await client.call_tool("echo", {"text": "after"})

    assert (before.content[0].text, after.content[0].text) == ("before", "after")
    assert fake_mcp_server.sessions == ()
    assert fake_mcp_server.get_requests(method="initialize") == []
    assert {e.era for e in fake_mcp_server.journal.exchanges} == {"modern"}


# --- langchain-mcp-adapters ---------------------------------------------------------------------------------------

ONLY_MCP1 = pytest.mark.skipif(
    MCP2, reason="langchain-mcp-adapters supports mcp 1.x only (0.3.2 requires mcp<2; 0.3.1 fails to import on 2.x)"
)


def _adapter_client(url: str) -> Any:
    adapters = require("langchain_mcp_adapters.client", "interop-mcp1")
    return adapters.MultiServerMCPClient({"fake": {"url": url, "transport": "streamable_http"}})


def _text(output: Any) -> str:
    """The text of a LangChain tool's output: a string, or a list of content blocks."""
    if isinstance(output, str):
        return output
    return "".join(block["text"] for block in output if block.get("type") == "text")


@ONLY_MCP1
@pytest.mark.asyncio
@pytest.mark.parametrize("trigger", TRIGGERS)
async def test_langchain_tools_open_a_session_per_call_so_a_lost_session_is_never_met(
    fake_mcp_server: FakeMCPServer, trigger: str
) -> None:
    client = _adapter_client(fake_mcp_server.url)
    async with asyncio.timeout(15):
        echo = {tool.name: tool for tool in await client.get_tools()}["echo"]  # no LLM: invoke the tool directly
        before = await echo.ainvoke({"text": "before"})
        lose_the_session(fake_mcp_server, trigger)
        after = await echo.ainvoke({"text": "after"})

    assert (_text(before), _text(after)) == ("before", "after")
    # get_tools() and each call: initialize, the call, DELETE, every time on a new session.
    assert fake_mcp_server.figures.initialize_count == 3
    assert [s.end_reason for s in fake_mcp_server.sessions] == ["delete", "delete", "delete"]
    assert fake_mcp_server.get_requests(status=404) == []


@ONLY_MCP1
@pytest.mark.asyncio
@pytest.mark.parametrize("trigger", TRIGGERS)
async def test_langchain_tools_on_an_explicit_session_keep_the_dead_id_and_fail_every_call(
    fake_mcp_server: FakeMCPServer, trigger: str
) -> None:
    tools = require("langchain_mcp_adapters.tools", "interop-mcp1")
    client = _adapter_client(fake_mcp_server.url)
    failures: list[str] = []
    async with asyncio.timeout(15):
        async with client.session("fake") as session:
            echo = {tool.name: tool for tool in await tools.load_mcp_tools(session)}["echo"]
            before = await echo.ainvoke({"text": "before"})
            [opened] = fake_mcp_server.live_sessions
            lose_the_session(fake_mcp_server, trigger)
            for text in ("after 1", "after 2"):
                with pytest.raises(SDKError) as raised:
                    await echo.ainvoke({"text": text})
                failures.append(str(raised.value))

    assert _text(before) == "before"
    assert failures == [DEAD_SESSION, DEAD_SESSION]
    dead = opened.id
    assert [w for w in posts(fake_mcp_server) if w[1] == 404] == [
        ("tools/call", 404, dead),
        ("tools/call", 404, dead),
        ("DELETE", 404, dead),
    ]
    assert fake_mcp_server.figures.initialize_count == 1
