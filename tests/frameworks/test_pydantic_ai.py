"""Recipe: testing a Pydantic AI agent's MCP toolset against the fake (docs/frameworks/pydantic_ai.md).

Pydantic AI 2.x connects to MCP servers with ``pydantic_ai.mcp.MCPToolset``, built on FastMCP's ``Client`` (the
1.x ``MCPServerStreamableHTTP`` was removed in 2.0). The agent runs here are LLM-free: a ``FunctionModel`` scripts
the model's turns. Not installed, the module skips; CI installs tests/frameworks/requirements-pydantic_ai.txt in a
venv of its own and sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (each snippet region carries its own imports, as the page shows it)
from __future__ import annotations

from _frameworks import assert_measured, require_framework

pydantic_ai_mcp = require_framework("pydantic_ai.mcp", "pydantic_ai")

# --8<-- [start:pydantic-ai-model]
import asyncio

import pytest
from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel


def echo_then_answer(messages, info):
    """The LLM, scripted: call the MCP tool `echo` with the prompt (again after a failed call, as a model
    would), then answer with what the tool returned."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart) and part.outcome == "success":
            return ModelResponse(parts=[TextPart(part.model_response_str())])
    prompt = next(p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[ToolCallPart("echo", {"text": prompt})])


# --8<-- [end:pydantic-ai-model]


# --8<-- [start:pydantic-ai-reuse]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")  # under the default "dual", FastMCP 4 opens no session
async def test_agent_runs_share_one_session(fake_mcp_server, mcp_http_clients):
    agent = Agent(FunctionModel(echo_then_answer), toolsets=[MCPToolset(fake_mcp_server.url)])
    async with asyncio.timeout(10), agent:  # the agent's block holds the toolset's session open
        assert (await agent.run("one")).output == "one"
        assert (await agent.run("two")).output == "two"

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_tool_ran("echo", times=2)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)


# --8<-- [end:pydantic-ai-reuse]


# --8<-- [start:pydantic-ai-per-run]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_without_the_agents_block_each_run_opens_its_own_session(fake_mcp_server, mcp_http_clients):
    agent = Agent(FunctionModel(echo_then_answer), toolsets=[MCPToolset(fake_mcp_server.url)])
    async with asyncio.timeout(10):
        await agent.run("one")  # each run enters the toolset itself: connect, call, DELETE
        await agent.run("two")

    fake_mcp_server.assert_sessions(created=2, ended_by={"delete": 2})
    mcp_http_clients.assert_created(2, talked_to=fake_mcp_server.url)  # and an HTTP client per run
    mcp_http_clients.assert_all_closed()


# --8<-- [end:pydantic-ai-per-run]


# --8<-- [start:pydantic-ai-lost-session]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_agent_recovers_only_when_its_block_is_entered_again(fake_mcp_server, mcp_http_clients):
    agent = Agent(FunctionModel(echo_then_answer), toolsets=[MCPToolset(fake_mcp_server.url)])
    async with asyncio.timeout(10):
        async with agent:
            await agent.run("before")
            fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
            for _ in range(2):  # the toolset keeps the dead id: every run in this block fails
                with capture_run_messages() as messages, pytest.raises(UnexpectedModelBehavior, match="max retries"):
                    await agent.run("after")
                retried = [p.content for m in messages for p in m.parts if getattr(p, "outcome", "") == "retried"]
                assert retried == ["Session not found"]  # the 404 reached the model as a tool error to retry
        async with agent:  # leaving the block and entering it again opens a new session
            result = await agent.run("again")

    assert result.output == "again"
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    calls = [e.status for e in fake_mcp_server.journal if e.rpc_method == "tools/call"]
    assert calls == [200, 404, 404, 404, 404, 200]  # each failed run: the call and the model's retry
    mcp_http_clients.assert_created(2)  # one HTTP client per `async with agent:`


# --8<-- [end:pydantic-ai-lost-session]


# --8<-- [start:pydantic-ai-close]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_leaving_the_agents_block_deletes_the_session_and_closes_the_http_client(
    fake_mcp_server, mcp_http_clients
):
    toolset = MCPToolset(fake_mcp_server.url)
    agent = Agent(FunctionModel(echo_then_answer), toolsets=[toolset])

    async def work_that_fails():
        async with asyncio.timeout(10), agent:
            await agent.run("one")
            raise RuntimeError("the caller failed")  # the block is left by an exception

    with pytest.raises(RuntimeError, match="the caller failed"):
        await work_that_fails()

    assert not toolset.is_running
    fake_mcp_server.assert_all_sessions_closed()  # the DELETE was sent
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})
    mcp_http_clients.assert_all_closed()


# --8<-- [end:pydantic-ai-close]


# --8<-- [start:pydantic-ai-modern]
@pytest.mark.asyncio
async def test_agent_on_a_modern_server_probes_once_and_sends_no_session_id(fake_mcp_server, mcp_http_clients):
    agent = Agent(FunctionModel(echo_then_answer), toolsets=[MCPToolset(fake_mcp_server.url)])
    async with asyncio.timeout(10), agent:  # the default era="dual": FastMCP 4 goes modern (2026-07-28)
        await agent.run("one")
        await agent.run("two")

    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_no_session_ids()
    fake_mcp_server.assert_initialize_count(0)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:pydantic-ai-modern]


# --8<-- [start:pydantic-ai-contract]
import contextlib
from typing import ClassVar

from pytest_fake_mcp.contract import SessionReuseSuite


class ToolsetCalls:
    """The suite's `call_tool(name, arguments)`, mapped to the toolset's own `direct_call_tool`."""

    def __init__(self, toolset):
        self.toolset = toolset

    async def call_tool(self, name, arguments):
        return await self.toolset.direct_call_tool(name, arguments)


@contextlib.asynccontextmanager
async def open_toolset(url):
    # "error": raise what the server said (the default, "retry", hands it to the model); a 2 s bound on a call
    async with MCPToolset(url, tool_error_behavior="error", read_timeout=2) as toolset:
        yield ToolsetCalls(toolset)


class TestPydanticAIContract(SessionReuseSuite):
    eras = ("handshake", "modern")
    client_timeout = 2.0  # the toolset's read_timeout above

    known_failures: ClassVar[dict[str, str]] = {
        "test_lost_session_is_reopened_once_and_the_call_retried": (
            "MCPToolset keeps the dead session id: the call that met the 404 raises and so does every later call, "
            "until the toolset is left and entered again"
        ),
    }

    @pytest.fixture
    def open_client(self):
        return open_toolset


# --8<-- [end:pydantic-ai-contract]


def test_the_observed_facts_name_the_versions_measured_here() -> None:
    """tests/frameworks/observed/pydantic_ai.toml (the verification table's row) was measured on this release."""
    observed = assert_measured("pydantic_ai", "pydantic-ai-slim")
    assert observed["client"] == "MCPToolset"
    assert hasattr(pydantic_ai_mcp, observed["client"])
