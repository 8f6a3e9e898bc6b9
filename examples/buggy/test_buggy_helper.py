"""The connect/close helper with every server on one ``AsyncExitStack``, closed from another task.

The app connects at startup, in its main task, and a shutdown hook closes the helper from a task
of its own. anyio refuses to exit the transports' cancel scopes there. The helper logs the error
(the captured log shows "Attempted to exit cancel scope in a different task than it was entered
in"), no DELETE goes out, and the main task is cancelled at its next ``await``. The test is
``examples/test_helper.py``'s, with ``StackMCPHelper`` in place of ``MCPHelper``.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.helper import MCPServer, StackMCPHelper
from clients.sdk import WAIT

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]


async def test_close_from_another_task_deletes_every_session(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    docs = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as web:
        docs.add_tool("search", lambda query: f"docs about {query}")
        web.add_tool("search", lambda query: f"web pages about {query}")
        helper = StackMCPHelper([MCPServer(id="docs", url=docs.url), MCPServer(id="web", url=web.url)])
        async with asyncio.timeout(WAIT):
            await helper.connect_mcp_async()  # the app's startup, in this task
            await helper.call_mcp_tool("mcp_web_search", {"query": "httpx"})
            await asyncio.create_task(helper.close_mcp_async())  # its shutdown hook, in a task of its own

        # Fails: the close raised inside the helper (logged), and the session was never DELETEd.
        web.assert_all_sessions_closed()
