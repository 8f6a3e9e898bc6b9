"""(b) Seed 000's two-phase ``McpClient``: the HTTP client is built once; on 404 only the MCP handshake re-runs.

Phase 1 (once) builds the HTTP client, the ``streamable_http_client`` transport and the
``ClientSession``; phase 2 sends ``initialize``. On a session error the client re-runs phase 2
only: ``session.initialize()`` again on the same ``ClientSession`` and transport.

That is the natural way to write it, and it is wrong (protocol.md §6 items 20, 21, 28):

* mcp 2.x: the second ``initialize()`` sends nothing (it returns the cached result), so the retry
  goes out with the dead ``Mcp-Session-Id`` and gets 404 again;
* mcp 1.x: it sends ``initialize`` *carrying the dead session id*, which gets 404.

Either way the transport keeps the stale id, and the DELETE on close carries it too. The seed's
own test ("HTTP client created once, initialize twice") passed because it mocked the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcp import ClientSession

from .sdk import SessionError, error_code, new_http_client, open_session

SESSION_ERROR_CODES = {32600, -32600, -32000}
"""404 "Session terminated" (+32600 in 1.x, -32600 in 2.x) and "server error" (seed 000's table)."""


class TwoPhaseMcpClient:
    """One HTTP client and one ``ClientSession`` for the client's life; re-initializes on 404."""

    def __init__(self, url: str, *, max_retries: int = 1) -> None:
        self._url = url
        self._max_retries = max_retries
        self._lock = asyncio.Lock()  # protects both phases
        self._stack: contextlib.AsyncExitStack | None = None
        self._http_client: Any = None
        self._session: ClientSession | None = None
        self._client_initialized = False

    @property
    def is_client_initialized(self) -> bool:
        return self._client_initialized

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        session = await self._ensure_session()
        for attempt in range(self._max_retries + 1):
            try:
                return await session.call_tool(name, arguments)
            except SessionError as error:
                if attempt == self._max_retries or not self._is_session_error(error):
                    raise
                await self._reinitialize_session()
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._session = None
            self._client_initialized = False
            await stack.aclose()

    async def __aenter__(self) -> TwoPhaseMcpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- the two phases --------------------------------------------------------------------------

    async def _initialize_client(self) -> None:
        """Phase 1 (expensive, once): HTTP client, transport, ``ClientSession``; then phase 2."""
        self._stack = contextlib.AsyncExitStack()
        self._http_client = await self._stack.enter_async_context(new_http_client())
        self._session = await self._stack.enter_async_context(open_session(self._url, self._http_client))
        self._client_initialized = True
        await self._initialize_session()

    async def _initialize_session(self) -> None:
        """Phase 2 (lightweight, repeatable): "just sends initialize and stores the new session id"."""
        assert self._session is not None
        await self._session.initialize()

    async def _ensure_session(self) -> ClientSession:
        async with self._lock:
            if not self._client_initialized:
                await self._initialize_client()
            assert self._session is not None
            return self._session

    async def _reinitialize_session(self) -> None:
        async with self._lock:
            if not self._client_initialized:
                await self._initialize_client()
            else:
                await self._initialize_session()  # Lightweight! ...and it never opens a new session.

    @staticmethod
    def _is_session_error(error: BaseException) -> bool:
        return error_code(error) in SESSION_ERROR_CODES
