"""Pattern 2's session cache behind the interface the race engine explores (``explore_session_cache``).

``get(url, run_id)`` is the framework's ``get_or_create_session``, ``cleanup(run_id)`` the root agent's
``finally``, ``aclose()`` the end of the process. The engine writes programs of gets, uses, cleanups,
expiries and cancellations, runs them under explored schedules with the fake in-process, and shrinks
a failure to the smallest program and schedule that still fail.
"""

from __future__ import annotations

from typing import Any

from pytest_fake_mcp.client import SessionCache

from .kiln_cache import MCPSessionManager


class KilnCacheUnderTest:
    """The Kiln-style ``MCPSessionManager`` (check, release the lock, create, re-check)."""

    def __init__(self) -> None:
        self.manager = MCPSessionManager()

    async def get(self, url: str, run_id: str) -> Any:
        return await self.manager.get_or_create_session(url, run_id)

    async def cleanup(self, run_id: str) -> None:
        await self.manager.cleanup_session(run_id)

    async def aclose(self) -> None:
        for key in list(self.manager._session_cache):
            await self.manager.cleanup_session(key.rsplit(":", 1)[1])


class ReferenceCacheUnderTest:
    """The reference ``SessionCache``: single-flight opening, one owner task per session, run-scoped close."""

    def __init__(self) -> None:
        self.cache = SessionCache(read_timeout=5.0)

    async def get(self, url: str, run_id: str) -> Any:
        return await self.cache.get_or_create((url, run_id))

    async def cleanup(self, run_id: str) -> None:
        await self.cache.close_run(run_id)

    async def aclose(self) -> None:
        await self.cache.aclose()
