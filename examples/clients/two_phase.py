"""(b) A framework's two-phase ``McpClient``: one HTTP client; on 404 only the MCP handshake re-runs.

Pattern 1 of ``docs/examples.md``.

Phase 1 (once) builds the HTTP client, the ``streamable_http_client`` transport and the
``ClientSession``; phase 2 sends ``initialize``. On a session error the client re-runs phase 2
only: ``session.initialize()`` again on the same ``ClientSession`` and transport.

That is the natural way to write it, and ``TwoPhaseMcpClient`` is wrong in a way a mocked transport
cannot show:

* mcp 2.x: a second ``initialize()`` on the same ``ClientSession`` sends nothing (it returns the
  cached result), so the retry goes out with the dead ``Mcp-Session-Id`` and gets 404 again;
* mcp 1.x: it sends ``initialize`` *carrying the dead session id*, which gets 404.

Either way the transport keeps the stale id, and the DELETE on close carries it too. The design's
own test ("HTTP client created once, initialize twice") passed because it mocked the transport.

``ReopeningMcpClient`` keeps the half of the design that is right (one HTTP client for the client's
life) and fixes phase 2: it opens a *new* transport and ``ClientSession`` on that HTTP client,
whose ``initialize`` starts a new session. The transport of the lost session is closed without a
DELETE, since the server has already ended that session.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcp import ClientSession

from .sdk import SessionError, error_code, new_http_client, open_session

SESSION_ERROR_CODES = {32600, -32600, -32000}
"""404 "Session terminated" (+32600 in 1.x, -32600 in 2.x) and "server error" (the design note's table)."""


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


class ReopeningMcpClient(TwoPhaseMcpClient):
    """The two-phase client, corrected: phase 2 opens a new transport and ``ClientSession`` on the same HTTP client."""

    def __init__(self, url: str, *, max_retries: int = 1) -> None:
        super().__init__(url, max_retries=max_retries)
        self._session_stack: contextlib.AsyncExitStack | None = None
        self._session_id: str | None = None  # the live session's id, learnt from the server's answers
        self._protocol_version: str | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        for attempt in range(self._max_retries + 1):
            session = await self._ensure_session()
            try:
                return await session.call_tool(name, arguments)
            except SessionError as error:
                if attempt == self._max_retries or not self._is_session_error(error):
                    raise
                await self._reopen_session(lost=session)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._session_stack is not None:
            stack, self._session_stack = self._session_stack, None
            if self._session_id is not None:  # still live on the server: end it
                await self._delete_session(self._session_id)
            await stack.aclose()
        await super().close()

    async def _initialize_client(self) -> None:
        """Phase 1: the HTTP client only, then phase 2."""
        self._stack = contextlib.AsyncExitStack()
        self._http_client = await self._stack.enter_async_context(new_http_client())
        self._http_client.event_hooks = {"response": [self._learn_session_id]}
        self._client_initialized = True
        await self._initialize_session()

    # --8<-- [start:phase-2]
    async def _initialize_session(self) -> None:
        """Phase 2, corrected: a new transport and ``ClientSession``, so ``initialize`` opens a new session."""
        stack = contextlib.AsyncExitStack()
        try:
            # terminate_on_close=False: after a 404 there is nothing to DELETE; close() DELETEs a live one.
            session = await stack.enter_async_context(
                open_session(self._url, self._http_client, terminate_on_close=False)
            )
            await session.initialize()
        except BaseException:
            await stack.aclose()
            raise
        self._session, self._session_stack = session, stack

    async def _reopen_session(self, *, lost: ClientSession) -> None:
        async with self._lock:
            if self._session is not lost:  # another call has already reopened it
                return
            self._session_id = None  # the server ended it: no DELETE
            if self._session_stack is not None:
                stack, self._session_stack = self._session_stack, None
                await stack.aclose()
            await self._initialize_session()

    # --8<-- [end:phase-2]

    async def _learn_session_id(self, response: Any) -> None:
        """A response hook on our HTTP client: the session id of every successful POST answer."""
        session_id = response.headers.get("mcp-session-id")
        if session_id and response.is_success and response.request.method == "POST":
            self._session_id = session_id
            self._protocol_version = response.request.headers.get("mcp-protocol-version", self._protocol_version)

    async def _delete_session(self, session_id: str) -> None:
        headers = {"mcp-session-id": session_id}
        if self._protocol_version:
            headers["mcp-protocol-version"] = self._protocol_version
        with contextlib.suppress(Exception):  # closing is best effort: the server may be gone already
            await self._http_client.delete(self._url, headers=headers)
