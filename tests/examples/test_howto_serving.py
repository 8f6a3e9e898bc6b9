"""How-to: what the fake serves (docs/serving.md): tools, results and errors, Context, resources, prompts."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session

from pytest_fake_mcp import Context, JSONRPCError, ToolError, ToolResult


def is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", False))


# --8<-- [start:tools]
@pytest.mark.asyncio
async def test_tools(fake_mcp_server):
    fake_mcp_server.add_tool("add", lambda a, b: str(a + b))  # arguments arrive as keywords

    async def search(query: str, limit: int = 3) -> dict:
        """Search the index."""  # the docstring is the tool's description
        return {"query": query, "hits": limit}  # a dict: structured content plus its JSON as text

    fake_mcp_server.add_tool("search", search)  # sync or async; the input schema comes from the signature

    async with sdk_session(fake_mcp_server.url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        added = await session.call_tool("add", {"a": 2, "b": 3})
        found = await session.call_tool("search", {"query": "mcp"})

    assert sorted(tools) == ["add", "echo", "search"]  # echo(text) is built in: echo_tool=False removes it
    assert added.content[0].text == "5"
    assert '"hits": 3' in found.content[0].text


# --8<-- [end:tools]


# --8<-- [start:errors]
@pytest.mark.asyncio
async def test_tool_errors_and_full_results(fake_mcp_server):
    def charge(amount: int) -> str:
        if amount <= 0:
            raise ToolError(f"amount must be positive, got {amount}")  # an isError result
        return "charged"

    def fail() -> str:
        raise JSONRPCError(-32602, "no such account")  # a JSON-RPC error response

    fake_mcp_server.add_tool("charge", charge)
    fake_mcp_server.add_tool("fail", fail)
    fake_mcp_server.add_tool(
        "image", lambda: ToolResult(content=[{"type": "image", "data": "AA==", "mimeType": "image/png"}])
    )

    async with sdk_session(fake_mcp_server.url) as session:
        refused = await session.call_tool("charge", {"amount": 0})
        picture = await session.call_tool("image", {})
        with pytest.raises(Exception, match="no such account"):  # mcp.MCPError (2.x) / mcp.McpError (1.x)
            await session.call_tool("fail", {})

    assert is_error(refused)
    assert refused.content[0].text == "amount must be positive, got 0"
    assert picture.content[0].type == "image"
    assert fake_mcp_server.executions("charge", {"amount": 0})  # the handler ran, with these arguments


# --8<-- [end:errors]


# --8<-- [start:context]
@pytest.mark.asyncio
async def test_context_keeps_state_per_session(fake_mcp_server):
    def count(ctx: Context) -> str:
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1  # one dict per session
        ctx.log("info", f"call {ctx.state['calls']} on session {ctx.session_id}")
        return str(ctx.state["calls"])

    fake_mcp_server.add_tool("count", count)

    async with sdk_session(fake_mcp_server.url) as first:
        assert [(await first.call_tool("count", {})).content[0].text for _ in range(2)] == ["1", "2"]
    async with sdk_session(fake_mcp_server.url) as second:
        assert (await second.call_tool("count", {})).content[0].text == "1"  # a new session starts afresh


# --8<-- [end:context]


# --8<-- [start:resources-prompts]
@pytest.mark.asyncio
async def test_resources_and_prompts(fake_mcp_server):
    fake_mcp_server.add_resource("file:///readme.txt", "hello")  # fixed text (or bytes, or a handler)
    fake_mcp_server.add_resource_template("file:///users/{name}", lambda name: f"user {name}")
    fake_mcp_server.add_prompt("greet", lambda who: f"Say hello to {who}.")

    async with sdk_session(fake_mcp_server.url) as session:
        readme = await session.read_resource("file:///readme.txt")
        user = await session.read_resource("file:///users/ada")
        prompt = await session.get_prompt("greet", {"who": "Ada"})

    assert readme.contents[0].text == "hello"
    assert user.contents[0].text == "user ada"
    assert prompt.messages[0].content.text == "Say hello to Ada."
    assert fake_mcp_server.get_requests(method="resources/read", target="file:///users/ada")


# --8<-- [end:resources-prompts]
