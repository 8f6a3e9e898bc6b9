"""Helpers for the fault tests: a real SDK client under either mcp line, and what it saw.

The tests run under mcp 2.x (httpx2) and mcp 1.x (httpx). Where the two clients differ
(protocol.md §4), a test branches on ``MCP1``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from _sdk import MCP2, SDKError

MCP1 = not MCP2
"""True under mcp 1.x: 404 surfaces as +32600, other error statuses tear the transport down."""

__all__ = ["MCP1", "SDKError", "Seen", "attempt", "sdk_session", "seen"]

BOUND = 10.0
"""Every client wait in these tests ends within this many seconds."""


def read_timeout(seconds: float) -> Any:
    return timedelta(seconds=seconds) if MCP1 else seconds


@asynccontextmanager
async def sdk_session(url: str, *, read_s: float = 5.0, initialize: bool = True) -> AsyncIterator[ClientSession]:
    """A real SDK ``ClientSession`` over streamable HTTP, initialized, with a bounded read timeout."""
    async with (
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1], read_timeout_seconds=read_timeout(read_s)) as session,
    ):
        if initialize:
            await session.initialize()
        yield session


class Seen:
    """What a client call ended with: a result, an SDK error (code, message), or another exception."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result = result
        self.error = error

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def code(self) -> int | None:
        error = self.error
        if isinstance(error, SDKError):
            return int(error.error.code)
        return None

    @property
    def message(self) -> str:
        error = self.error
        return str(error.error.message) if isinstance(error, SDKError) else repr(error)

    @property
    def leaves(self) -> list[BaseException]:
        """The exceptions inside (nested) exception groups, or the error itself."""
        return _leaves(self.error) if self.error is not None else []

    def __repr__(self) -> str:
        return f"Seen(ok, {self.result!r})" if self.ok else f"Seen({self.code}, {self.message!r}, {self.leaves!r})"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def seen(awaitable: Awaitable[Any]) -> Seen:
    """Await a client call (bounded) and return what it ended with."""
    try:
        async with asyncio.timeout(BOUND):
            return Seen(result=await awaitable)
    except TimeoutError:
        raise AssertionError(f"the client call did not end within {BOUND}s") from None
    except Exception as exc:
        return Seen(error=exc)


async def attempt(url: str, *steps: Callable[[ClientSession], Awaitable[Any]], read_s: float = 5.0) -> list[Seen]:
    """Open a session, run ``steps`` in turn, close; every outcome, the session's own failure last.

    A step that fails is recorded and the next one runs; if the transport itself dies (1.x on an
    error status, a reset connection) the ``async with`` raises, which is recorded as the last entry.
    """
    results: list[Seen] = []
    try:
        async with asyncio.timeout(BOUND), sdk_session(url, read_s=read_s) as session:
            results.append(Seen(result="initialized"))
            for step in steps:
                results.append(await seen(step(session)))
    except TimeoutError:
        raise AssertionError(f"the client session did not end within {BOUND}s") from None
    except BaseException as exc:  # an ExceptionGroup from the transport's task group
        if not isinstance(exc, Exception):
            raise
        results.append(Seen(error=exc))
    return results


def echo(text: str) -> Callable[[ClientSession], Awaitable[Any]]:
    """A step: call the fake's built-in ``echo`` tool."""
    return lambda session: session.call_tool("echo", {"text": text})


def text_of(result: Any) -> str:
    return str(result.content[0].text)


HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def raw_initialize(client: Any, url: str) -> str:
    """Open a session with plain HTTP (httpx); returns its id."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    response = await client.post(url, json=body, headers=HEADERS)
    assert response.status_code == 200, response.text
    session_id = str(response.headers["mcp-session-id"])
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await client.post(url, json=note, headers={**HEADERS, "mcp-session-id": session_id})
    return session_id


async def raw_call(
    client: Any, url: str, session_id: str | None, method: str, params: dict[str, Any], rid: int = 1
) -> Any:
    """POST one JSON-RPC request with plain HTTP; returns the httpx response."""
    headers = dict(HEADERS)
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    return await client.post(url, json=body, headers=headers)
