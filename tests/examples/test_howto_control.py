"""How-to: the ``/_fake/`` control API of ``fake-mcp serve`` (docs/cli.md), from any HTTP client."""

from __future__ import annotations

import asyncio
import signal
import sys

import httpx
import pytest
from _howto_sdk import sdk_session


# --8<-- [start:control]
@pytest.mark.asyncio
async def test_drop_the_session_under_a_client():
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest_fake_mcp", "serve", "--port", "0", stdout=asyncio.subprocess.PIPE
    )  # fmt: skip
    try:
        async with asyncio.timeout(20):
            url = (await server.stdout.readline()).decode().strip()  # http://127.0.0.1:PORT/mcp
            origin = url.removesuffix("/mcp")
            async with httpx.AsyncClient(base_url=origin) as control, sdk_session(url) as session:
                await session.call_tool("echo", {"text": "before"})
                dropped = (await control.post("/_fake/drop_session")).json()["dropped"]
                with pytest.raises(Exception, match="Session"):  # 404: mcp.MCPError (2.x) / mcp.McpError (1.x)
                    await session.call_tool("echo", {"text": "after"})
                journal = (await control.get("/_fake/journal")).json()["exchanges"]
    finally:
        server.send_signal(signal.SIGINT)
        await asyncio.wait_for(server.wait(), 20)

    late = [e for e in journal if e["rpc_method"] == "tools/call" and e["status"] == 404]
    assert [e["session_id"] for e in late] == dropped  # it sent the dead id; it did not re-initialize


# --8<-- [end:control]
