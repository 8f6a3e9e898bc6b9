"""Recipe: an agent built on Google's Agent Development Kit (docs/frameworks/google_adk.md).

ADK's MCP client is ``McpToolset`` (``MCPToolset`` is its deprecated alias) with ``StreamableHTTPConnectionParams``:
``get_tools()`` turns the server's tools into ADK tools an ``LlmAgent`` calls with ``tool.run_async(...)``; the
toolset keeps one pooled session for every tool it handed out and ``close()`` ends it (a ``Runner`` leaving its
``async with`` closes its agents' toolsets). The agent run here uses a scripted ``BaseLlm``: no model, no API key.

ADK 2.13 admits mcp 1.x and 2.x; the pin is the 2.x line. Its ``MCP_MODERN_PROTOCOL`` feature is off by default,
so against the fake's default ``era="dual"`` it sends ``initialize`` and meets sessions with no era pin; the
modern-era test turns the feature on (``ADK_ENABLE_MCP_MODERN_PROTOCOL=1``).

Install: ``pip install -e '.[test]' -r tests/frameworks/requirements-google_adk.txt``. Not installed, the module
skips; CI sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (each snippet region carries its own imports, as the page shows it)
from __future__ import annotations

from typing import Any

from _frameworks import assert_measured, require_framework

require_framework("google.adk.tools.mcp_tool", "google_adk")


def test_the_observed_facts_are_of_the_installed_release() -> None:
    """tests/frameworks/observed/google_adk.toml (the verification table's row) names the release these tests ran."""
    assert_measured("google_adk", "google-adk")  # the SDK pin admits patch releases of the measured line


# --8<-- [start:adk-setup]
import asyncio

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
from google.adk.tools.tool_context import ToolContext


@pytest.fixture(autouse=True)
def no_google_credentials_probe(monkeypatch):
    """ADK looks for Google credentials (mTLS) before each new MCP session, which asks the GCE metadata server."""
    monkeypatch.setenv("GOOGLE_API_USE_CLIENT_CERTIFICATE", "false")


async def adk_tool_context() -> ToolContext:
    """What ADK hands a tool in an agent run; enough to call the toolset's tools yourself."""
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="test", user_id="user")
    invocation = InvocationContext(
        session_service=sessions, invocation_id="test", agent=LlmAgent(name="agent"), session=session
    )
    return ToolContext(invocation)


# --8<-- [end:adk-setup]


# --8<-- [start:adk-reuse]
@pytest.mark.asyncio  # ADK's modern protocol is off by default: it sends initialize even to the default "dual" fake
async def test_adk_toolset_keeps_one_session(fake_mcp_server, mcp_http_clients):
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=fake_mcp_server.url))
    context = await adk_tool_context()
    try:
        async with asyncio.timeout(10):
            [echo] = [tool for tool in await toolset.get_tools() if tool.name == "echo"]
            first = await echo.run_async(args={"text": "one"}, tool_context=context)
            second = await echo.run_async(args={"text": "two"}, tool_context=context)
    finally:
        await toolset.close()

    assert [r["content"][0]["text"] for r in (first, second)] == ["one", "two"]
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()  # tools/list and both calls in one session
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})  # close() sent the DELETE
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:adk-reuse]


# --8<-- [start:adk-lost-session]
@pytest.mark.asyncio
async def test_adk_toolset_never_recovers_a_lost_session_until_closed(fake_mcp_server, mcp_http_clients):
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=fake_mcp_server.url))
    context = await adk_tool_context()
    try:
        async with asyncio.timeout(10):
            [echo] = [tool for tool in await toolset.get_tools() if tool.name == "echo"]
            await echo.run_async(args={"text": "before"}, tool_context=context)
            [dead] = fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
            for _ in range(2):  # no exception: the tool returns an error for the model, every time
                lost = await echo.run_async(args={"text": "after"}, tool_context=context)
                assert lost == {"error": "MCP tool execution failed: Session not found"}
            await toolset.close()  # the only way out: close() ends the pooled session...
            again = await echo.run_async(args={"text": "again"}, tool_context=context)  # ...the next call reopens
    finally:
        await toolset.close()

    assert again["content"][0]["text"] == "again"
    calls = [e for e in fake_mcp_server.journal if e.rpc_method == "tools/call"]
    assert [(e.status, e.session_id == dead) for e in calls] == [(200, True), (404, True), (404, True), (200, False)]
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    with pytest.raises(AssertionError, match="1 exchange carried a session id it should not have"):
        fake_mcp_server.assert_no_stale_session_ids()  # the second failed call sent the dead id again
    mcp_http_clients.assert_created(2)  # one HTTP client per session
    mcp_http_clients.assert_all_closed()


# --8<-- [end:adk-lost-session]


# --8<-- [start:adk-close]
@pytest.mark.asyncio
async def test_adk_toolset_close_ends_the_session_and_its_http_client(fake_mcp_server, mcp_http_clients):
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=fake_mcp_server.url))
    async with asyncio.timeout(10):
        await toolset.get_tools()  # opens the session
        await toolset.close()
    fake_mcp_server.mark_client_closed()

    fake_mcp_server.assert_all_sessions_closed()  # the DELETE was sent
    mcp_http_clients.assert_all_closed()
    fake_mcp_server.assert_no_requests_after_close()  # nothing trails close(): no GET stream reconnecting


# --8<-- [end:adk-close]


# --8<-- [start:adk-agent-run]
from collections.abc import AsyncGenerator

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types


class ScriptedModel(BaseLlm):
    """A model that asks for ``echo`` once, then answers with what the tool said: an LLM-free agent run."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = llm_request.contents[-1].parts or []
        answers = [part.function_response.response for part in parts if part.function_response]
        if answers:
            reply = types.Part(text=answers[0]["content"][0]["text"])
        else:
            reply = types.Part(function_call=types.FunctionCall(name="echo", args={"text": "hi"}))
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


async def ask(runner: InMemoryRunner, session_id: str, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    final = ""
    async for event in runner.run_async(user_id="user", session_id=session_id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            final = event.content.parts[0].text or ""
    return final


@pytest.mark.asyncio
async def test_adk_agent_runs_share_one_session_and_the_runner_closes_it(fake_mcp_server, mcp_http_clients):
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=fake_mcp_server.url))
    agent = LlmAgent(name="agent", model=ScriptedModel(), tools=[toolset])
    async with asyncio.timeout(20), InMemoryRunner(agent=agent, app_name="test") as runner:
        session = await runner.session_service.create_session(app_name="test", user_id="user")
        answers = [await ask(runner, session.id, "say hi") for _ in range(2)]

    assert answers == ["hi", "hi"]
    fake_mcp_server.assert_tool_ran("echo", times=2)
    fake_mcp_server.assert_initialize_count(1)  # each run lists the tools again, in the same session
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_all_sessions_closed()  # leaving the runner's block closed the toolset
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:adk-agent-run]


# --8<-- [start:adk-modern]
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:.*MCP_MODERN_PROTOCOL is enabled:UserWarning")  # ADK calls it experimental
async def test_adk_toolset_in_the_modern_era(fake_mcp_server, mcp_http_clients, monkeypatch):
    monkeypatch.setenv("ADK_ENABLE_MCP_MODERN_PROTOCOL", "1")  # off by default in ADK 2.13
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=fake_mcp_server.url))
    context = await adk_tool_context()
    try:
        async with asyncio.timeout(10):
            [echo] = [tool for tool in await toolset.get_tools() if tool.name == "echo"]
            for text in ("one", "two"):
                await echo.run_async(args={"text": text}, tool_context=context)
    finally:
        await toolset.close()

    fake_mcp_server.assert_no_session_ids()  # server/discover answered 2026-07-28: no session at all
    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_tool_ran("echo", times=2)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:adk-modern]


# --8<-- [start:adk-contract]
import contextlib
from collections.abc import AsyncIterator
from typing import ClassVar

from pytest_fake_mcp.contract import SessionReuseSuite


class ToolsetCaller:
    """The suite's ``call_tool(name, arguments)`` on ADK's tools; an ``{"error": ...}`` result raises."""

    def __init__(self, toolset: McpToolset, context: ToolContext) -> None:
        self.toolset, self.context = toolset, context
        self.tools: dict[str, Any] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.tools is None:  # listed once, as a caller holding the tools does
            self.tools = {tool.name: tool for tool in await self.toolset.get_tools()}
        result = await self.tools[name].run_async(args=dict(arguments), tool_context=self.context)
        if "error" in result:  # ADK reports a failed call to the model as a result, not an exception
            raise RuntimeError(result["error"])
        return result


@contextlib.asynccontextmanager
async def open_toolset(url: str) -> AsyncIterator[ToolsetCaller]:
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=url))
    try:
        yield ToolsetCaller(toolset, await adk_tool_context())
    finally:
        await toolset.close()  # what a Runner does when its `async with` is left


NEVER_RECOVERS = (
    "the SDK (mcp 2.x) raises the 404's own JSON-RPC error, and ADK takes only the SDK's fallback text "
    "'Session terminated' for session loss: it keeps the dead session, every later call meets the 404 until close()"
)
NEXT_CALL_RECOVERS = (
    "a 404 body that is not JSON-RPC makes the SDK raise 'Session terminated': ADK discards the session but does "
    "not retry the call (it never replays a tool call), so the call fails and the next one opens a new session"
)


LOSS = "test_lost_session_is_reopened_once_and_the_call_retried"


class TestGoogleAdkContract(SessionReuseSuite):
    known_failures: ClassVar[dict[str, str]] = {
        LOSS: NEVER_RECOVERS,  # every trigger, but for the 404s whose body is not JSON-RPC:
        f"{LOSS}[404-not_found_empty]": NEXT_CALL_RECOVERS,
        f"{LOSS}[404-not_found_text]": NEXT_CALL_RECOVERS,
        f"{LOSS}[404-not_found_html]": NEXT_CALL_RECOVERS,
        "test_aclose_during_the_first_initialize_leaves_no_session_open": (
            "close() during the first get_tools() DELETEs the session being opened, then get_tools() retries "
            "(retry_on_errors) and opens a new session after close(): nothing ever closes it or its HTTP client"
        ),
    }

    @pytest.fixture
    def open_client(self):
        return open_toolset


# --8<-- [end:adk-contract]
