"""How-to: the reference client surviving a lost session (docs/quickstart.md, README.md)."""

from __future__ import annotations

# --8<-- [start:reference-client]
import asyncio

import pytest

from pytest_fake_mcp.client import ReusingSessionClient


@pytest.mark.asyncio
async def test_client_survives_a_lost_session(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), ReusingSessionClient(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
        result = await client.call_tool("echo", {"text": "after"})

    assert result.content[0].text == "after"
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    fake_mcp_server.assert_no_stale_session_ids()
    mcp_http_clients.assert_created(1)  # the new session rode the same HTTP client


# --8<-- [end:reference-client]
