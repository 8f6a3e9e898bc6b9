"""(c) A framework's session cache keyed ``server:run-id``, the run id in a ``contextvars`` variable.

Pattern 2 of ``docs/examples.md``.

The root agent makes a run id and sets it; sub-agents (``asyncio.gather`` children included) read
their parent's id, so their tool calls share the cached ``ClientSession``; the root agent's
``finally`` closes the run's sessions. Sequential sub-agents share one session, as designed.

The race its design note documents and calls unlikely: ``get_or_create_session`` checks the cache under the
lock, *releases it*, then creates. Two sub-agents asking at the same time both miss, both open a
session (two ``initialize``), and the loser closes its own (an immediate DELETE).
``examples/buggy/test_buggy_kiln_cache.py`` makes the race deterministic with a barrier.

A second, quieter bug: a session opened inside a sub-agent's task is closed by the root
agent's ``finally``, in another task; anyio refuses to exit the transport's cancel scope there, and
``cleanup_session`` logs the error and moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

from mcp import ClientSession

from .sdk import new_http_client, open_session

logger = logging.getLogger(__name__)

# --- mcp_session_context.py -------------------------------------------------------------------

_mcp_session_id: ContextVar[str | None] = ContextVar("mcp_session_id", default=None)


def get_mcp_session_id() -> str | None:
    return _mcp_session_id.get()


def set_mcp_session_id(session_id: str) -> None:
    _mcp_session_id.set(session_id)


def clear_mcp_session_id() -> None:
    _mcp_session_id.set(None)


def generate_session_id() -> str:
    return f"mcp_{uuid.uuid4().hex[:16]}"


# --- mcp_session_manager.py ---------------------------------------------------------------------


class MCPSessionManager:
    """Caches one initialized ``ClientSession`` per ``"{server_url}:{run id}"``."""

    def __init__(self) -> None:
        self._session_cache: dict[str, tuple[ClientSession, contextlib.AsyncExitStack]] = {}
        self._cache_lock = asyncio.Lock()

    async def get_or_create_session(self, server_url: str, session_id: str) -> ClientSession:
        cache_key = f"{server_url}:{session_id}"

        async with self._cache_lock:
            if cache_key in self._session_cache:
                return self._session_cache[cache_key][0]

        # Create outside the lock to avoid holding it during slow I/O.
        # Race: two coroutines may both reach here for the same key.
        # The lock below ensures only one wins; the loser closes its stack.
        session, stack = await self._create_cached_session(server_url)

        async with self._cache_lock:
            if cache_key in self._session_cache:
                # Another coroutine created it first — close ours and return theirs
                await stack.aclose()
                return self._session_cache[cache_key][0]
            self._session_cache[cache_key] = (session, stack)
            return session

    async def _create_cached_session(self, server_url: str) -> tuple[ClientSession, contextlib.AsyncExitStack]:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            http = await stack.enter_async_context(new_http_client())
            session = await stack.enter_async_context(open_session(server_url, http))
            await session.initialize()
            return session, stack
        except BaseException:
            await stack.aclose()
            raise

    async def cleanup_session(self, session_id: str) -> None:
        """Close all MCP sessions of a run; called by the root agent's ``finally``."""
        to_cleanup: list[tuple[str, contextlib.AsyncExitStack]] = []
        async with self._cache_lock:
            for key in [key for key in self._session_cache if key.endswith(f":{session_id}")]:
                to_cleanup.append((key, self._session_cache.pop(key)[1]))
        # Close outside the lock to avoid holding it during I/O
        for key, exit_stack in to_cleanup:
            try:
                await exit_stack.aclose()
            except Exception:
                logger.warning("Error closing MCP session %s", key, exc_info=True)


# --- base_adapter.py and mcp_server_tool.py, cut down to what touches sessions ----------------------


@contextlib.asynccontextmanager
async def agent_run(manager: MCPSessionManager) -> AsyncIterator[str]:
    """One agent invocation: the root agent owns the run id and cleans up; a sub-agent inherits it."""
    is_root_agent = get_mcp_session_id() is None
    if is_root_agent:
        set_mcp_session_id(generate_session_id())
    try:
        session_id = get_mcp_session_id()
        assert session_id is not None
        yield session_id
    finally:
        if is_root_agent:
            session_id = get_mcp_session_id()
            if session_id:
                await manager.cleanup_session(session_id)
            clear_mcp_session_id()


class MCPServerTool:
    """A tool of one MCP server, as an agent calls it."""

    def __init__(self, manager: MCPSessionManager, server_url: str, name: str) -> None:
        self._manager = manager
        self._server_url = server_url
        self._name = name

    async def run(self, **kwargs: Any) -> Any:
        session_id = get_mcp_session_id()
        if session_id:
            session = await self._manager.get_or_create_session(self._server_url, session_id)
            return await session.call_tool(self._name, kwargs)
        async with new_http_client() as http, open_session(self._server_url, http) as session:
            await session.initialize()  # ephemeral session, outside any agent run
            return await session.call_tool(self._name, kwargs)
