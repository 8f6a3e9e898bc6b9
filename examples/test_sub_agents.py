"""Sub-agents share their root agent's session through a cache keyed (server, run id).

The run id travels in a ``contextvars`` variable, so ``asyncio.gather`` children see it.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.kiln_cache import MCPServerTool, MCPSessionManager, agent_run
from clients.reusing import SessionCache
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer


@pytest.mark.asyncio
async def test_concurrent_sub_agents_share_one_session(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").barrier(3)  # the three sub-agents' calls are in flight together
    cache = SessionCache()

    async def sub_agent(name: str) -> str:
        async with cache.scope():  # inherits the root's run id; closes nothing
            client = await cache.get(fake_mcp_server.url)
            return text(await client.call_tool("echo", {"text": name}))

    async with asyncio.timeout(WAIT), cache:
        async with cache.scope():  # the root agent: leaving it closes the run's sessions
            answers = await asyncio.gather(*(sub_agent(name) for name in ("a", "b", "c")))
        fake_mcp_server.assert_all_sessions_closed()

    assert answers == ["a", "b", "c"]
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_concurrent(min_in_flight=3)


@pytest.mark.asyncio
async def test_kiln_cache_shares_a_session_with_sequential_sub_agents(fake_mcp_server: FakeMCPServer) -> None:
    """The kiln cache's design is right when sub-agents take turns; ``examples/buggy`` shows it racing."""
    manager = MCPSessionManager()
    echo = MCPServerTool(manager, fake_mcp_server.url, "echo")

    async def sub_agent(name: str) -> str:
        async with agent_run(manager):
            return text(await echo.run(text=name))

    async with asyncio.timeout(WAIT), agent_run(manager):
        assert [await sub_agent(name) for name in ("a", "b", "c")] == ["a", "b", "c"]

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_all_sessions_closed()
