"""The few SDK names that differ between mcp 1.x (httpx) and mcp 2.x (httpx2), in one place.

Real clients only branch on the installed ``mcp`` major; everything else is the same code.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import AsyncIterator
from typing import Any

import mcp
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])

SessionError: type[Exception] = mcp.MCPError if MCP_MAJOR >= 2 else mcp.McpError  # type: ignore[attr-defined]
"""What ``ClientSession`` raises for a JSON-RPC error, a 404 included (``MCPError`` in 2.x, ``McpError`` in 1.x)."""

WAIT = 10.0
"""Seconds every example bounds a client wait by: mcp 1.x waits forever on some faults."""


def new_http_client(**kwargs: Any) -> Any:
    """An ``httpx2.AsyncClient`` (mcp 2.x) or ``httpx.AsyncClient`` (mcp 1.x) with the SDK's defaults."""
    return create_mcp_http_client(**kwargs)


@contextlib.asynccontextmanager
async def open_session(url: str, http_client: Any, *, terminate_on_close: bool = True) -> AsyncIterator[ClientSession]:
    """A ``ClientSession`` over ``streamable_http_client``, not yet initialized.

    2.x yields ``(read, write)``, 1.x ``(read, write, get_session_id)``; both take ``http_client=``
    and leave it open. With ``terminate_on_close`` (the SDK's default) leaving the block sends DELETE.
    """
    async with (
        streamable_http_client(url, http_client=http_client, terminate_on_close=terminate_on_close) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        yield session


def error_code(error: BaseException) -> int | None:
    """The JSON-RPC code of a ``SessionError``: 1.x turns a 404 into +32600, 2.x into -32600."""
    return getattr(getattr(error, "error", None), "code", None)


def text(result: Any) -> str:
    """The text of a ``CallToolResult``'s first content block."""
    return str(result.content[0].text)


def is_error(result: Any) -> bool:
    """Whether a ``CallToolResult`` is an error result (``is_error`` in 2.x, ``isError`` in 1.x)."""
    return bool(result.is_error if MCP_MAJOR >= 2 else result.isError)
