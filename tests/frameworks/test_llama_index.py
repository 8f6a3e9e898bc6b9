"""Recipe: an agent built on LlamaIndex's MCP tools (docs/frameworks/llama_index.md).

llama-index-tools-mcp's ``BasicMCPClient`` opens a session of its own for every request it makes (``list_tools``,
``call_tool``: ``initialize``, the request, DELETE), on one HTTP client it builds once and never closes; its
``McpToolSpec`` turns the server's tools into ``FunctionTool``s for any LlamaIndex agent. 0.6.0 is on the mcp 2.x
line and its ``ClientSession`` sends ``initialize``: against the fake's default ``era="dual"`` it opens sessions
with no pin.

Install: ``pip install -e '.[test]' -r tests/frameworks/requirements-llama_index.txt``. Not installed, the module
skips; CI sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (the snippet regions' imports follow the framework's, as the page shows them)
from __future__ import annotations

from _frameworks import assert_measured, require_framework

require_framework("llama_index.tools.mcp", "llama_index")

# --8<-- [start:llama-index-imports]
import asyncio
import contextlib
from typing import ClassVar

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec
from mcp import MCPError

from pytest_fake_mcp.contract import SessionReuseSuite

# --8<-- [end:llama-index-imports]

# llama-index-core's agent reads pydantic models with inspect.getmembers: pydantic answers with deprecation warnings.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecatedSince20", "ignore::pydantic.warnings.PydanticDeprecatedSince211"
)


# --8<-- [start:llama-index-agent]
def scripted_model(*texts):
    """A model with no LLM: it asks for echo(text) once per text, then answers "done"."""

    def respond(messages, **kwargs):
        done = sum(message.role == MessageRole.TOOL for message in messages)
        if done < len(texts):
            call = ToolCallBlock(tool_call_id=f"call-{done}", tool_name="echo", tool_kwargs={"text": texts[done]})
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content="done")

    return MockFunctionCallingLLM(response_generator=respond)


@pytest.mark.asyncio
async def test_the_agent_opens_a_session_per_call_on_one_http_client(fake_mcp_server, mcp_http_clients):
    client = BasicMCPClient(fake_mcp_server.url)
    try:
        tools = await McpToolSpec(client, allowed_tools=["echo"]).to_tool_list_async()
        agent = FunctionAgent(tools=tools, llm=scripted_model("one", "two"))
        async with asyncio.timeout(10):
            result = await agent.run("echo one, then two")
    finally:
        await client.http_client.aclose()  # BasicMCPClient has no close of its own: see the close test

    assert [call.tool_kwargs for call in result.tool_calls] == [{"text": "one"}, {"text": "two"}]
    # Listing the tools and each call: initialize, the request, DELETE, every time on a new session.
    fake_mcp_server.assert_initialize_count(3)
    fake_mcp_server.assert_sessions(created=3, ended_by={"delete": 3})
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)  # the sessions share one HTTP client


# --8<-- [end:llama-index-agent]


# --8<-- [start:llama-index-loss]
@pytest.mark.asyncio
async def test_a_lost_session_fails_only_the_call_it_was_lost_under(fake_mcp_server, mcp_http_clients):
    client = BasicMCPClient(fake_mcp_server.url)
    try:
        async with asyncio.timeout(10):
            await client.call_tool("echo", {"text": "before"})
            assert fake_mcp_server.drop_session() == []  # between calls there is no session to lose
            fake_mcp_server.on("tools/call").drop_session()  # so lose the next call's own session under it
            with pytest.raises(ExceptionGroup) as raised:  # not retried; the SDK's error comes wrapped, twice
                await client.call_tool("echo", {"text": "lost"})
            after = await client.call_tool("echo", {"text": "after"})  # the next call opens a new session
    finally:
        await client.http_client.aclose()

    assert raised.group_contains(MCPError, match="Session not found", depth=2)
    assert after.content[0].text == "after"
    assert fake_mcp_server.executions("echo", {"text": "lost"}) == []  # the refused call never ran
    fake_mcp_server.assert_sessions(created=3, ended_by={"dropped": 1, "delete": 2})
    fake_mcp_server.assert_no_stale_session_ids()


# --8<-- [end:llama-index-loss]


# --8<-- [start:llama-index-close]
@pytest.mark.asyncio
async def test_the_http_client_stays_open_until_the_test_closes_it(fake_mcp_server, mcp_http_clients):
    client = BasicMCPClient(fake_mcp_server.url)
    async with asyncio.timeout(10):
        await client.call_tool("echo", {"text": "one"})

    fake_mcp_server.assert_all_sessions_closed()  # each call's session was DELETEd as the call ended
    with pytest.raises(AssertionError, match="1 of 1 HTTP client"):
        mcp_http_clients.assert_all_closed()  # but the HTTP client it built in BasicMCPClient() is still open
    await client.http_client.aclose()  # nothing in llama-index closes it: its owner must
    mcp_http_clients.assert_all_closed()


# --8<-- [end:llama-index-close]


# --8<-- [start:llama-index-modern]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")  # a server that dropped the handshake
async def test_a_server_of_the_stateless_era_refuses_it(fake_mcp_server, mcp_http_clients):
    client = BasicMCPClient(fake_mcp_server.url)
    try:
        with pytest.raises(ExceptionGroup) as raised:  # its ClientSession sends initialize, never server/discover
            await asyncio.wait_for(client.call_tool("echo", {"text": "hi"}), timeout=10)
    finally:
        await client.http_client.aclose()

    assert raised.group_contains(MCPError, match="Unsupported protocol version", depth=2)
    assert fake_mcp_server.figures.discover_count == 0


# --8<-- [end:llama-index-modern]


# --8<-- [start:llama-index-contract]
CLOSED_UNDER_A_CALL = (
    "BasicMCPClient has no close: closing its HTTP client (what its owner must do) while a call's initialize is in "
    "flight leaves the session that initialize opened on the server, with no DELETE"
)


class TestLlamaIndexContract(SessionReuseSuite):
    """BasicMCPClient has call_tool(name, arguments) itself; the context only closes the HTTP client it leaves open."""

    session_policy = "per_call"
    client_timeout = 5.0
    known_failures: ClassVar[dict[str, str]] = {
        "test_aclose_during_the_first_initialize_leaves_no_session_open": CLOSED_UNDER_A_CALL,
    }

    @pytest.fixture
    def open_client(self):
        @contextlib.asynccontextmanager
        async def open_client(url):
            client = BasicMCPClient(url, timeout=int(self.client_timeout))
            try:
                yield client
            finally:
                await client.http_client.aclose()

        return open_client


# --8<-- [end:llama-index-contract]


def test_the_observed_facts_are_of_the_installed_versions() -> None:
    """tests/frameworks/observed/llama_index.toml (the verification table's row) names what these tests ran on."""
    assert_measured("llama_index", "llama-index-tools-mcp")
