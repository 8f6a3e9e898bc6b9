"""How-to: a tool that asks the client (docs/serving.md#asking-the-client): sampling, elicitation, roots."""

from __future__ import annotations

import asyncio

import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from pytest_fake_mcp import Context


# --8<-- [start:ask-the-client]
@pytest.mark.asyncio
async def test_a_tool_asks_the_client_and_uses_its_answer(fake_mcp_server):
    async def book(city: str, ctx: Context) -> str:
        answer = await ctx.request(  # sent on this call's SSE stream; waits for the client's answer
            "elicitation/create",
            {
                "message": f"Book a room in {city}?",
                "requestedSchema": {"type": "object", "properties": {"nights": {"type": "integer"}}},
            },
            answer_within=5,  # no answer by then: TimeoutError, and the call fails
        )
        if answer["action"] != "accept":
            return "not booked"
        return f"booked {answer['content']['nights']} nights in {city}"

    fake_mcp_server.add_tool("book", book)

    async def elicit(context, params) -> types.ElicitResult:  # the client's side: a user would answer here
        return types.ElicitResult(action="accept", content={"nights": 2})

    async with (
        asyncio.timeout(10),
        streamable_http_client(fake_mcp_server.url) as streams,
        ClientSession(streams[0], streams[1], elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        result = await session.call_tool("book", {"city": "Lyon"})

    assert result.content[0].text == "booked 2 nights in Lyon"
    [answer] = fake_mcp_server.get_requests(kind="response")  # the client's answer: a POST of its own
    assert answer.status == 202
    assert answer.request_body["result"] == {"action": "accept", "content": {"nights": 2}}


# --8<-- [end:ask-the-client]
