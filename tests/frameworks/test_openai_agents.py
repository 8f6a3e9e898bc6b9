"""Recipe: testing an OpenAI Agents SDK agent's MCP server against the fake (docs/frameworks/openai_agents.md).

The OpenAI Agents SDK (``openai-agents``) connects to a streamable-HTTP MCP server with
``agents.mcp.MCPServerStreamableHttp``, on the mcp SDK's own client (``mcp.Client`` in its ``auto`` mode under mcp
2.x). The agent runs here are LLM-free: a ``Model`` subclass scripts the model's turns, and tracing is off, so
nothing leaves the machine and no API key is needed. Not installed, the module skips; CI installs
tests/frameworks/requirements-openai_agents.txt in a venv of its own and sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``,
which turns the skip into a failure.
"""

# ruff: noqa: E402
# (each snippet region carries its own imports, as the page shows it)
from __future__ import annotations

from typing import Any

from _frameworks import assert_measured, require_framework

agents_mcp = require_framework("agents.mcp", "openai_agents")


# --8<-- [start:openai-agents-model]
import asyncio
import json
import uuid

import pytest
from agents import Agent, RunConfig, Runner, Usage
from agents.items import ModelResponse
from agents.mcp import MCPServerStreamableHttp
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

NO_TRACING = RunConfig(tracing_disabled=True)  # traces would be exported to OpenAI: nothing leaves the test


class EchoThenAnswer(Model):
    """The LLM, scripted: call the MCP tool `echo` with the prompt, then answer with what the tool returned."""

    async def get_response(self, system_instructions, input, *args, **kwargs):
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        returned = [item["output"] for item in items if item.get("type") == "function_call_output"]
        if not returned:
            arguments = json.dumps({"text": items[0]["content"]})
            call = ResponseFunctionToolCall(
                type="function_call", call_id=uuid.uuid4().hex, name="echo", arguments=arguments
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        output = returned[-1]  # the tool's content blocks, or the text of an error
        text = output if isinstance(output, str) else "".join(block["text"] for block in output)
        content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
        answer = ResponseOutputMessage(
            id="answer", type="message", role="assistant", status="completed", content=content
        )
        return ModelResponse(output=[answer], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run Runner.run, not Runner.run_streamed")


# --8<-- [end:openai-agents-model]


# --8<-- [start:openai-agents-reuse]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")  # under the default "dual", mcp 2.x's Client opens no session
async def test_agent_runs_share_one_session(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), MCPServerStreamableHttp({"url": fake_mcp_server.url}) as server:
        agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])
        assert (await Runner.run(agent, "one", run_config=NO_TRACING)).final_output == "one"
        assert (await Runner.run(agent, "two", run_config=NO_TRACING)).final_output == "two"

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_tool_ran("echo", times=2)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    lists = [e for e in fake_mcp_server.journal if e.rpc_method == "tools/list"]
    assert len(lists) == 4  # the tools are listed at every model turn, unless cache_tools_list=True


# --8<-- [end:openai-agents-reuse]


# --8<-- [start:openai-agents-not-connected]
@pytest.mark.asyncio
async def test_a_server_never_entered_fails_the_run_before_any_request(fake_mcp_server):
    from agents.exceptions import UserError

    server = MCPServerStreamableHttp({"url": fake_mcp_server.url})  # no `async with`, no `connect()`
    agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])
    with pytest.raises(UserError, match="Server not initialized"):
        await asyncio.wait_for(Runner.run(agent, "one", run_config=NO_TRACING), 10)

    assert len(fake_mcp_server.journal) == 0  # the run does not connect on its own


# --8<-- [end:openai-agents-not-connected]


# --8<-- [start:openai-agents-lost-session]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_agent_recovers_only_when_the_server_block_is_entered_again(fake_mcp_server, mcp_http_clients):
    from mcp import MCPError  # mcp 2.x

    server = MCPServerStreamableHttp({"url": fake_mcp_server.url})
    agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])
    async with asyncio.timeout(10):
        async with server:
            await Runner.run(agent, "before", run_config=NO_TRACING)
            fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
            for _ in range(2):  # the server object keeps the dead id: every run in this block fails
                with pytest.raises(MCPError, match="Session not found"):
                    await Runner.run(agent, "after", run_config=NO_TRACING)
        async with server:  # leaving the block and entering it again opens a new session
            result = await Runner.run(agent, "again", run_config=NO_TRACING)

    assert result.final_output == "again"
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    refused = [e.rpc_method for e in fake_mcp_server.journal if e.status == 404 and e.rpc_method]
    assert refused == ["tools/list", "tools/list"]  # each failed run met the 404 listing the tools
    mcp_http_clients.assert_created(2)  # one HTTP client per `async with server:`


# --8<-- [end:openai-agents-lost-session]


# --8<-- [start:openai-agents-lost-session-cached]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_with_cached_tools_a_lost_session_reaches_the_model_as_a_tool_error(fake_mcp_server):
    async with (
        asyncio.timeout(10),
        MCPServerStreamableHttp({"url": fake_mcp_server.url}, cache_tools_list=True) as server,
    ):
        agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])
        await Runner.run(agent, "before", run_config=NO_TRACING)
        fake_mcp_server.drop_session()
        result = await Runner.run(agent, "after", run_config=NO_TRACING)  # no exception: the run "succeeds"

    assert result.final_output == "An error occurred while running the tool. Please try again."
    calls = [e.status for e in fake_mcp_server.journal if e.rpc_method == "tools/call"]
    assert calls == [200, 404]  # the 404 was the tool's answer, as far as the model knows
    fake_mcp_server.assert_sessions(created=1, ended_by={"dropped": 1})  # and nothing reopened it


# --8<-- [end:openai-agents-lost-session-cached]


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_max_retry_attempts_resend_the_dead_session_id(fake_mcp_server: Any) -> None:
    """The page's claim: the SDK's own retries do not replace a session that answered 404 (its isolated session is
    for timed-out, 5xx and closed-connection calls only)."""
    from mcp import MCPError

    server = MCPServerStreamableHttp({"url": fake_mcp_server.url}, max_retry_attempts=2, retry_backoff_seconds_base=0)
    async with asyncio.timeout(10), server:
        await server.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()
        with pytest.raises(MCPError, match="Session not found"):
            await server.call_tool("echo", {"text": "after"})

    calls = [e.status for e in fake_mcp_server.journal if e.rpc_method == "tools/call"]
    assert calls == [200, 404, 404, 404]
    fake_mcp_server.assert_initialize_count(1)


# --8<-- [start:openai-agents-close]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_leaving_the_server_block_deletes_the_session_and_closes_the_http_client(
    fake_mcp_server, mcp_http_clients
):
    server = MCPServerStreamableHttp({"url": fake_mcp_server.url})
    agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])

    async def work_that_fails():
        async with asyncio.timeout(10), server:
            await Runner.run(agent, "one", run_config=NO_TRACING)
            raise RuntimeError("the caller failed")  # the block is left by an exception

    with pytest.raises(RuntimeError, match="the caller failed"):
        await work_that_fails()

    assert server.session is None
    fake_mcp_server.assert_all_sessions_closed()  # the DELETE was sent
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})
    mcp_http_clients.assert_all_closed()


# --8<-- [end:openai-agents-close]


# --8<-- [start:openai-agents-modern]
@pytest.mark.asyncio
async def test_agent_on_a_modern_server_probes_once_and_sends_no_session_id(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), MCPServerStreamableHttp({"url": fake_mcp_server.url}) as server:
        agent = Agent(name="assistant", model=EchoThenAnswer(), mcp_servers=[server])
        await Runner.run(agent, "one", run_config=NO_TRACING)  # the default era="dual": mcp 2.x goes modern
        await Runner.run(agent, "two", run_config=NO_TRACING)

    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_no_session_ids()
    fake_mcp_server.assert_initialize_count(0)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:openai-agents-modern]


# --8<-- [start:openai-agents-contract]
from typing import ClassVar

from pytest_fake_mcp.contract import SessionReuseSuite


class TestOpenAIAgentsContract(SessionReuseSuite):
    eras = ("handshake", "modern")
    client_timeout = 2.0  # client_session_timeout_seconds below
    overlap_timeout = 1.0  # below it: calls held longer than the client's own bound would time out first

    known_failures: ClassVar[dict[str, str]] = {
        "test_lost_session_is_reopened_once_and_the_call_retried": (
            "MCPServerStreamableHttp keeps the dead session id: the call that met the 404 raises and so does every "
            "later call, until the server object is left and entered again"
        ),
        "test_concurrent_calls_overlap_on_the_server": (
            "MCPServerStreamableHttp serialises its session's requests behind a lock"
        ),
    }

    @pytest.fixture
    def open_client(self):
        # `async with` connects and yields the server object, whose call_tool(name, arguments) is the suite's
        return lambda url: MCPServerStreamableHttp({"url": url}, client_session_timeout_seconds=2)


# --8<-- [end:openai-agents-contract]


def test_the_observed_facts_name_the_versions_measured_here() -> None:
    """tests/frameworks/observed/openai_agents.toml (the verification table's row) was measured on this release."""
    observed = assert_measured("openai_agents", "openai-agents")
    assert observed["client"] == "MCPServerStreamableHttp"
    assert hasattr(agents_mcp, observed["client"])
