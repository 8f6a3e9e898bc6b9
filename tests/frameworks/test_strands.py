"""Recipe: an agent built on Strands Agents (docs/frameworks/strands.md).

Strands' MCP client is ``strands.tools.mcp.MCPClient``, given a transport factory (here the SDK's
``streamable_http_client``). It runs the MCP session on a background thread with an event loop of its own, so it
is a *sync* context manager with sync calls (``call_tool_sync``, ``list_tools_sync``): ``with client:`` opens one
session, every call inside reuses it, and leaving the block ends it. The agent run uses a scripted ``Model``: no
model provider, no credentials, no network. The tests are plain sync tests, as a Strands user writes them.

strands-agents 1.62 requires ``mcp>=1.23,<2.2``: the pin is the newest 2.x line it admits (2.1, on httpx2). On
mcp 2.x it negotiates the era (``server/discover`` first), so against the fake's default ``era="dual"`` it goes
modern and has no session: the session tests pin ``era="handshake"``, and the modern-era test shows the default.

Install: ``pip install -e '.[test]' -r tests/frameworks/requirements-strands.txt``. Not installed, the module
skips; CI sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (each snippet region carries its own imports, as the page shows it)
from __future__ import annotations

from typing import Any

from _frameworks import assert_measured, require_framework

require_framework("strands.tools.mcp", "strands")


def test_the_observed_facts_are_of_the_installed_release() -> None:
    """tests/frameworks/observed/strands.toml (the verification table's row) names the release these tests ran."""
    assert_measured("strands", "strands-agents")  # the SDK pin admits patch releases of the measured line


# --8<-- [start:strands-setup]
from datetime import timedelta

import pytest
from mcp.client.streamable_http import streamable_http_client
from strands.tools.mcp import MCPClient

BOUND = timedelta(seconds=10)  # each call's read timeout: a sync call cannot be wrapped in asyncio.timeout


def mcp_client(url: str) -> MCPClient:
    return MCPClient(lambda: streamable_http_client(url), startup_timeout=10)


# --8<-- [end:strands-setup]


# --8<-- [start:strands-reuse]
@pytest.mark.fake_mcp_server(era="handshake")  # under the default "dual", Strands on mcp 2.x opens no session
def test_strands_client_keeps_one_session(fake_mcp_server, mcp_http_clients):
    with mcp_client(fake_mcp_server.url) as client:  # opens the session, on Strands' own thread
        first = client.call_tool_sync("call-1", "echo", {"text": "one"}, read_timeout_seconds=BOUND)
        second = client.call_tool_sync("call-2", "echo", {"text": "two"}, read_timeout_seconds=BOUND)

    assert [r["content"][0]["text"] for r in (first, second)] == ["one", "two"]
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})  # leaving the block sent the DELETE
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:strands-reuse]


# --8<-- [start:strands-lost-session]
@pytest.mark.fake_mcp_server(era="handshake")
def test_strands_client_recovers_only_when_the_block_is_entered_again(fake_mcp_server, mcp_http_clients):
    client = mcp_client(fake_mcp_server.url)
    with client:
        client.call_tool_sync("call-1", "echo", {"text": "before"}, read_timeout_seconds=BOUND)
        [dead] = fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
        for n in (2, 3):  # no exception: an error result for the model, every call in this block
            lost = client.call_tool_sync(f"call-{n}", "echo", {"text": "after"}, read_timeout_seconds=BOUND)
            assert lost["status"] == "error"
            assert lost["content"] == [{"text": "Tool execution failed: Session not found"}]
    with client:  # leaving the block and entering it again opens a new session
        again = client.call_tool_sync("call-4", "echo", {"text": "again"}, read_timeout_seconds=BOUND)

    assert again["content"][0]["text"] == "again"
    calls = [e for e in fake_mcp_server.journal if e.rpc_method == "tools/call"]
    assert [(e.status, e.session_id == dead) for e in calls] == [(200, True), (404, True), (404, True), (200, False)]
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    with pytest.raises(AssertionError, match="1 exchange carried a session id it should not have"):
        fake_mcp_server.assert_no_stale_session_ids()  # the second failed call sent the dead id again
    mcp_http_clients.assert_created(2)  # one HTTP client per `with client:`
    mcp_http_clients.assert_all_closed()


# --8<-- [end:strands-lost-session]


# --8<-- [start:strands-close]
@pytest.mark.fake_mcp_server(era="handshake")
def test_strands_client_leaves_nothing_behind(fake_mcp_server, mcp_http_clients):
    with mcp_client(fake_mcp_server.url) as client:
        client.list_tools_sync()
    fake_mcp_server.mark_client_closed()

    fake_mcp_server.assert_all_sessions_closed()  # the DELETE was sent before the block was left
    mcp_http_clients.assert_all_closed()
    fake_mcp_server.assert_no_requests_after_close()  # the background thread is gone: no GET stream reconnecting


# --8<-- [end:strands-close]


# --8<-- [start:strands-agent-run]
import json

from strands import Agent
from strands.models.model import Model


class ScriptedModel(Model):
    """A model that asks for ``echo`` once, then answers with what the tool said: an LLM-free agent run."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any) -> Any:
        results = [block["toolResult"] for block in messages[-1]["content"] if "toolResult" in block]
        yield {"messageStart": {"role": "assistant"}}
        if results:  # the tool answered: say what it said
            yield {"contentBlockDelta": {"delta": {"text": results[0]["content"][0]["text"]}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        else:  # ask for the MCP tool
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "call-1", "name": "echo"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"text": "hi"})}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}


@pytest.mark.fake_mcp_server(era="handshake")
def test_strands_agent_runs_share_one_session(fake_mcp_server, mcp_http_clients):
    agent = Agent(model=ScriptedModel(), tools=[mcp_client(fake_mcp_server.url)], callback_handler=None)
    try:
        answers = [str(agent("say hi")).strip() for _ in range(2)]  # the agent starts the client itself
    finally:
        agent.cleanup()  # stops the clients the agent started

    assert answers == ["hi", "hi"]
    fake_mcp_server.assert_tool_ran("echo", times=2)
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_all_sessions_closed()
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:strands-agent-run]


# --8<-- [start:strands-modern]
def test_strands_client_in_the_modern_era(fake_mcp_server, mcp_http_clients):  # the default era="dual"
    with mcp_client(fake_mcp_server.url) as client:
        for n in (1, 2):
            client.call_tool_sync(f"call-{n}", "echo", {"text": "hi"}, read_timeout_seconds=BOUND)

    fake_mcp_server.assert_no_session_ids()  # server/discover answered 2026-07-28: no session at all
    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_tool_ran("echo", times=2)
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:strands-modern]


# --8<-- [start:strands-contract]
import contextlib
from collections.abc import Iterator
from typing import ClassVar

from pytest_fake_mcp.contract import SessionReuseSuite


class ClientCaller:
    """The suite's ``call_tool(name, arguments)`` on ``call_tool_sync``; a failed call (not isError) raises."""

    def __init__(self, client: MCPClient) -> None:
        self.client = client
        self.calls = 0

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls += 1
        bound = timedelta(seconds=TestStrandsContract.client_timeout)
        result = self.client.call_tool_sync(f"call-{self.calls}", name, dict(arguments), read_timeout_seconds=bound)
        if "isError" not in result:  # Strands reports a failed call to the model as a result, not an exception
            raise RuntimeError(result["content"][0]["text"])
        return result


@contextlib.contextmanager
def open_mcp_client(url: str) -> Iterator[ClientCaller]:
    with mcp_client(url) as client:
        yield ClientCaller(client)


NEVER_RECOVERS = (
    "Strands keeps the dead session for the whole `with` block: the call that met the 404 and every later one "
    "return an error result (the SDK's error), no new session is opened until the block is entered again"
)


class TestStrandsContract(SessionReuseSuite):
    client_timeout = 2.0  # the adapter's read_timeout_seconds: runs the scenario of a tool slower than that
    known_failures: ClassVar[dict[str, str]] = {
        "test_lost_session_is_reopened_once_and_the_call_retried": NEVER_RECOVERS
    }

    @pytest.fixture
    def open_client(self):
        return open_mcp_client  # a sync context manager: the suite enters, calls and exits it in worker threads


# --8<-- [end:strands-contract]
