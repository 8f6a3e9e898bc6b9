"""How-to: a client that recovers from session loss, shown against scripted faults (docs/faults.md)."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:recovery]
async def call_with_recovery(url, name, arguments):
    """What a good client does on a 404 (docs/failure-modes.md#r01): open a new session and retry once."""
    try:
        async with sdk_session(url) as session:
            return await session.call_tool(name, arguments)
    except Exception:
        async with sdk_session(url) as session:
            return await session.call_tool(name, arguments)


@pytest.mark.asyncio
async def test_client_recovers_from_expired_session(fake_mcp_server):
    fake_mcp_server.on("tools/call").drop_session()  # the next call finds its session gone: 404
    result = await call_with_recovery(fake_mcp_server.url, "echo", {"text": "b"})
    assert result.content[0].text == "b"
    refused, retried = fake_mcp_server.get_requests(method="tools/call")
    assert (refused.status, retried.status) == (404, 200)
    assert refused.faults == ("Drop the session on POST tools/call in any session, once",)
    assert len(fake_mcp_server.executions("echo", {"text": "b"})) == 1  # the refused call never ran


# --8<-- [end:recovery]
