"""``ctx.request()``: a handler's request to the client, answered, refused or never answered, under
``fake-mcp serve`` and inside the ``fake_mcp_server`` fixture; and resource subscriptions, off unless a catalog
turns them on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp import types

from _sdk import SDKError, sdk_session
from _served import serve
from pytest_fake_mcp import FakeMCPServer, JSONRPCError
from pytest_fake_mcp._fake._catalog import Context, ServerRequests
from pytest_fake_mcp._wire._errors import ScriptError

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _context(sent: list[dict[str, Any]], registry: ServerRequests | None) -> Context:
    ctx = Context(session_id="s-1", state={}, request_id=1, progress_token=None, emit=sent.append)
    if registry is not None:
        ctx.bind_server_requests(registry)
    return ctx


@pytest.mark.asyncio
async def test_request_returns_the_result_of_the_answer_with_its_id() -> None:
    sent: list[dict[str, Any]] = []
    registry = ServerRequests()
    task = asyncio.ensure_future(_context(sent, registry).request("ping", {"x": 1}))
    await asyncio.sleep(0)  # one step of the task: it emits the request, then waits for the answer
    [message] = sent
    assert message == {"jsonrpc": "2.0", "id": message["id"], "method": "ping", "params": {"x": 1}}
    assert not registry.deliver("s-2", {"jsonrpc": "2.0", "id": message["id"], "result": {}})  # another session
    assert registry.deliver("s-1", {"jsonrpc": "2.0", "id": message["id"], "result": {"ok": True}})
    assert await asyncio.wait_for(task, 5) == {"ok": True}
    assert not registry.deliver("s-1", {"jsonrpc": "2.0", "id": message["id"], "result": {}})  # answered already


@pytest.mark.asyncio
async def test_request_raises_the_clients_error() -> None:
    sent: list[dict[str, Any]] = []
    registry = ServerRequests()
    task = asyncio.ensure_future(_context(sent, registry).request("sampling/createMessage"))
    await asyncio.sleep(0)  # one step of the task: it emits the request, then waits for the answer
    registry.deliver("s-1", {"jsonrpc": "2.0", "id": sent[0]["id"], "error": {"code": -32600, "message": "no"}})
    with pytest.raises(JSONRPCError, match="-32600: no"):
        await asyncio.wait_for(task, 5)


@pytest.mark.asyncio
async def test_request_without_an_answer_times_out_with_a_message() -> None:
    registry = ServerRequests()
    with pytest.raises(TimeoutError, match=r"did not answer elicitation/create \(id 1\) within 0.01s"):
        await _context([], registry).request("elicitation/create", answer_within=0.01)
    assert not registry.deliver("s-1", {"jsonrpc": "2.0", "id": 1, "result": {}})  # forgotten


@pytest.mark.asyncio
async def test_request_needs_a_registry() -> None:
    with pytest.raises(ScriptError, match="cannot send requests to the client"):
        await _context([], None).request("ping")


@pytest.mark.asyncio
async def test_a_client_that_refuses_sampling_makes_the_tool_call_a_json_rpc_error() -> None:
    # The SDK client without a sampling_callback answers sampling/createMessage with an error.
    with serve("--profile", "conformance") as served:
        async with sdk_session(served.url) as session:
            with pytest.raises(SDKError, match="Sampling not supported"):
                await session.call_tool("test_sampling", {"prompt": "hi"})


async def _ask_for_a_summary(text: str, ctx: Context) -> str:
    answer = await ctx.request(
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 20},
        answer_within=5,
    )
    return f"summary: {answer['content']['text']}"


async def _summarise(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    [message] = params.messages
    text = message.content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=text.upper()), model="stub-model"
    )


@pytest.mark.asyncio
async def test_the_fixture_routes_the_clients_answer_back_to_the_waiting_handler(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("summarise", _ask_for_a_summary)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url, sampling_callback=_summarise) as session:
        first = await session.call_tool("summarise", {"text": "one"})
        second = await session.call_tool("summarise", {"text": "two"})

    assert [first.content[0].text, second.content[0].text] == ["summary: ONE", "summary: TWO"]  # type: ignore[union-attr]
    # Each request went out on its call's SSE stream; each answer came back as a POST of its own, answered 202.
    answers = fake_mcp_server.get_requests(kind="response")
    assert [(e.status, e.response_messages) for e in answers] == [(202, ()), (202, ())]
    assert [e.request_body["result"]["content"]["text"] for e in answers] == ["ONE", "TWO"]  # type: ignore[call-overload, index]
    [call, _] = fake_mcp_server.get_requests(method="tools/call")
    [asked, result] = call.response_messages
    assert asked["method"] == "sampling/createMessage"
    assert answers[0].rpc_id == asked["id"]
    assert result["result"]["content"] == [{"type": "text", "text": "summary: ONE"}]


@pytest.mark.asyncio
async def test_inside_the_fixture_a_client_that_refuses_makes_the_tool_call_a_json_rpc_error(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.add_tool("summarise", _ask_for_a_summary)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:  # no sampling_callback
        with pytest.raises(SDKError, match="Sampling not supported"):
            await session.call_tool("summarise", {"text": "one"})

    [refusal] = fake_mcp_server.get_requests(kind="response")
    assert refusal.status == 202
    assert isinstance(refusal.request_body, dict)
    assert "error" in refusal.request_body


def test_subscriptions_are_off_by_default_and_on_in_the_conformance_profile() -> None:
    subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "test://x"}}
    answers = {}
    for profile in ("default", "conformance"):
        with serve("--profile", profile) as served, httpx.Client(timeout=10) as client:
            opened = client.post(
                served.url, json=INIT, headers={**HEADERS, "accept": "application/json, text/event-stream"}
            )
            capabilities = _sse_json(opened.text)["result"]["capabilities"]
            headers = {
                **HEADERS,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            client.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            answer = _sse_json(client.post(served.url, json=subscribe, headers=headers).text)
            answers[profile] = (capabilities["resources"]["subscribe"], answer.get("result"), answer.get("error"))
    assert answers["default"][:2] == (False, None)
    assert answers["default"][2]["code"] == -32601
    assert answers["conformance"] == (True, {}, None)


def _sse_json(text: str) -> dict[str, Any]:
    data = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])  # type: ignore[no-any-return]
