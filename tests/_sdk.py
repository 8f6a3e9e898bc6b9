"""Shared test helpers: the installed SDK line, a real SDK session, and reading a stream the server ends."""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
"""True under mcp 2.x (httpx2); False under mcp 1.x (httpx)."""

if MCP2:
    from mcp import MCPError as SDKError
else:
    from mcp import McpError as SDKError

__all__ = ["INNER_ARGS", "INNER_PYPROJECT", "MCP2", "MODES", "SDKError", "as_json", "read_until_ended", "sdk_session"]

MODES = [
    pytest.param("sse", id="sse"),
    pytest.param("json", marks=pytest.mark.fake_mcp_server(json_response=True), id="json"),
]
"""Parametrize a test over the fake's SSE (default) and JSON answer modes."""

INNER_PYPROJECT = """
[tool.pytest.ini_options]
asyncio_mode = "strict"
asyncio_default_fixture_loop_scope = "function"
filterwarnings = [
    "error::ResourceWarning",
    "error::pytest.PytestUnraisableExceptionWarning",
    "error::pytest.PytestUnhandledThreadExceptionWarning",
]
"""
"""The project's strictness for an in-process pytester run of a suite subclass (the contract suite's tests)."""

INNER_ARGS = (
    "-p",
    "no:randomly",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-W",
    "error::ResourceWarning",
)
"""Options of pytester inner runs; they skip Hypothesis's plugin: in-process runs would import (and
assertion-rewrite) it anew each time."""


@contextlib.asynccontextmanager
async def sdk_session(url: str, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """An initialized ``ClientSession`` over ``streamable_http_client`` (2.x yields 2 streams, 1.x 3)."""
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1], **kwargs) as session:
        await session.initialize()
        yield session


def as_json(model: Any) -> dict[str, Any]:
    """An SDK result as the JSON the server sent (2.x attributes are snake_case, 1.x camelCase)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("resultType", None)  # 2.x only
    for key in ("ttlMs", "cacheScope"):  # 2.x list results of the modern era
        dumped.pop(key, None)
    return dumped


async def read_until_ended(stream: httpx.Response) -> bytes:
    """The rest of a stream the server ends: cleanly, or by closing the connection under it (both end it)."""
    chunks = []
    with contextlib.suppress(httpx.RemoteProtocolError):
        async for chunk in stream.aiter_bytes():
            chunks.append(chunk)
    return b"".join(chunks)
