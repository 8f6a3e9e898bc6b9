"""A ``ClientSession`` on the fake for the how-to tests, the same code under mcp 1.x and 2.x; the SDK's error."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

try:
    from mcp import MCPError as SDKError  # what a failed request raises: mcp 2.x
except ImportError:
    from mcp import McpError as SDKError  # mcp 1.x

__all__ = ["SDKError", "sdk_session"]


# --8<-- [start:sdk-session]
@contextlib.asynccontextmanager
async def sdk_session(url: str) -> AsyncIterator[ClientSession]:
    """An initialized session; every wait inside is bounded (mcp 1.x hangs for ever on some faults)."""
    async with (
        asyncio.timeout(10),
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


# --8<-- [end:sdk-session]
