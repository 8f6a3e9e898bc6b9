"""The run-scoped session cache races when two sub-agents make their first call at the same time.

Its design note calls the race unlikely; a barrier on ``initialize`` makes it certain: both sub-agents miss the
cache, both open a session, the loser DELETEs its own. (The captured log also shows the
design's second bug: the root agent's cleanup exits a transport a sub-agent's task
entered, and anyio refuses with "Attempted to exit cancel scope in a different task".)
"""

from __future__ import annotations

import asyncio

import pytest
from clients.kiln_cache import MCPServerTool, MCPSessionManager, agent_run
from clients.sdk import WAIT

from pytest_fake_mcp import FakeMCPServer


@pytest.mark.asyncio
async def test_concurrent_sub_agents_share_one_session(fake_mcp_server: FakeMCPServer) -> None:
    # Both first calls reach the server before either is answered: the race window, held open.
    fake_mcp_server.on("initialize").barrier(2, timeout=2)
    manager = MCPSessionManager()
    echo = MCPServerTool(manager, fake_mcp_server.url, "echo")

    async def sub_agent(text: str) -> None:
        async with agent_run(manager):
            await echo.run(text=text)

    async with asyncio.timeout(WAIT), agent_run(manager):
        await asyncio.gather(sub_agent("a"), sub_agent("b"))

    # Fails: two initialize, two sessions for one (server, run) key.
    fake_mcp_server.assert_initialize_count(1)
