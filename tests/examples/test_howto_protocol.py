"""How-to: what the fake answers per SDK line (docs/protocol.md). Each region is shown verbatim in that page."""

from __future__ import annotations

import asyncio

import pytest

from pytest_fake_mcp.client import ReusingSessionClient


# --8<-- [start:flavours]
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "error_id",
    [
        pytest.param(None, marks=pytest.mark.fake_mcp_server(flavour="mcp2"), id="mcp2"),
        pytest.param("server-error", marks=pytest.mark.fake_mcp_server(flavour="mcp1"), id="mcp1"),
    ],
)
async def test_each_flavour_answers_a_dead_session_as_its_sdk_server_does(fake_mcp_server, error_id):
    fake_mcp_server.on("tools/call").drop_session()
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "a"})  # 404, then a new session

    refused = fake_mcp_server.get_request(method="tools/call", status=404)
    assert refused.response_messages[0] == {
        "jsonrpc": "2.0",
        "id": error_id,  # the one difference in this answer between the two SDK servers
        "error": {"code": -32600, "message": "Session not found"},
    }


# --8<-- [end:flavours]
