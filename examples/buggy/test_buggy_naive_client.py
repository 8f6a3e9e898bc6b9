"""The naive client (a new HTTP client and session per call) works, and the plugin fails it anyway.

Each test below is what you would write for *your* client; these fail because the client is buggy.
Run them with ``pytest examples/buggy -p no:randomly`` and read the failure output.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.naive import NaiveClient
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer


async def three_calls(url: str) -> None:
    client = NaiveClient(url)
    async with asyncio.timeout(WAIT):
        for i in range(3):
            assert text(await client.call_tool("echo", {"text": f"call {i}"})) == f"call {i}"


@pytest.mark.asyncio
async def test_naive_client_reuses_one_session(fake_mcp_server: FakeMCPServer) -> None:
    await three_calls(fake_mcp_server.url)

    # Fails: calls 2 and 3 each open a new session, though the server never ended the last one.
    fake_mcp_server.assert_session_reused()


@pytest.mark.asyncio
async def test_naive_client_builds_one_http_client(fake_mcp_server: FakeMCPServer, mcp_http_clients) -> None:
    await three_calls(fake_mcp_server.url)

    # Fails: three connection pools, one per call (the server's TCP connection count would not tell you).
    mcp_http_clients.assert_created(1)
