"""Deliberately broken clients and session caches, one race each, for tests/test_races.py.

No barrier is placed anywhere: each bug shows only under some interleavings, and the race engine must
find one by exploring schedules. Under stock asyncio order (FIFO) with the suite's stagger, each passes.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from contract_clients import (
    NoRetryOn404Client,
    NoSingleFlightFirstCallClient,
    ReferenceClient,
    ReinitPerCallerClient,
    new_http_client,
)
from pytest_fake_mcp._client._cache import SessionCache
from pytest_fake_mcp._client._reusing import ReusingSessionClient, _Session, _State

__all__ = [
    "BROKEN_CACHES",
    "BROKEN_CLIENTS",
    "CancelLeakCache",
    "CheckThenActCache",
    "CleanupRacingCache",
    "ForgetOnCancelClient",
    "LazyHTTPClientClient",
    "LockAcrossCallClient",
    "NoRetryAfterExpiryCache",
    "NoSingleFlightFirstCallClient",
    "ReferenceCache",
    "ReinitPerCallerClient",
    "UnsharedCloseClient",
]


class LazyHTTPClientClient(ReferenceClient):
    """Bug: builds its HTTP client lazily after a non-network await (reading settings), so two first
    callers that both passed the check each build one; the first is never closed."""

    async def _settings(self) -> dict[str, Any]:
        await asyncio.sleep(0)  # e.g. an async config or secrets lookup
        return {}

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        if self._http is None:
            await self._settings()
            self._http = new_http_client()
        return await super().call_tool(name, arguments)


class ForgetOnCancelClient(ReferenceClient):
    """Bug: a caller cancelled while the session it started is opening abandons that session without a
    DELETE. Harmless if the cancel lands before ``initialize`` left; a leak once the server answered it."""

    async def _session(self) -> _Session:
        starting = self._current is None
        try:
            return await super()._session()
        except asyncio.CancelledError:
            session = self._current
            if starting and session is not None and not session.settled.is_set():
                session.lost = True  # "it never opened": no DELETE will be sent
                self._current = None
                if session.task is not None:
                    session.task.cancel()
            raise


class LockAcrossCallClient(ReferenceClient):
    """Bug: holds its lock across the whole call, and re-opening a lost session takes the same lock. A
    session lost while a call holds the lock deadlocks every caller (asyncio.Lock is not re-entrant)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        async with self._lock:
            return await super().call_tool(name, arguments)

    async def _session(self) -> _Session:
        if self._generation > 0 and (self._current is None or self._current.retiring):
            async with self._lock:  # "only one caller re-opens": but the caller itself holds it
                return await super()._session()
        return await super()._session()


class UnsharedCloseClient(ReferenceClient):
    """Bug (issue 23): ``aclose`` is not single-flight. Each call takes the sessions it still finds, stops them and
    then closes the HTTP client; a second ``aclose`` running at once finds none (the first took them) and closes the
    HTTP client while the first one's session task is still on its way to the DELETE, which then fails ("Cannot
    send a request, as the client has been closed"): the session stays open on the server. One ``aclose`` at a
    time is correct, so only the double-close scenario meets it (in FIFO order too: both closes start at once)."""

    async def aclose(self) -> None:
        self._state = _State.CLOSING
        sessions, self._sessions = list(self._sessions), set()  # "taken: a second close has nothing to stop"
        for session in sessions:
            session.stop.set()
        tasks = [s.task for s in sessions if s.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        self._current = None
        if self._http is not None:
            await self._http.aclose()
        self._state = _State.CLOSED


BROKEN_CLIENTS: dict[str, tuple[type[Any], str]] = {
    # name: (client class, the RaceSuite scenario that must find it)
    "check-then-act double create": (NoSingleFlightFirstCallClient, "concurrent_first_calls"),
    "re-initialize storm on one 404": (ReinitPerCallerClient, "calls_across_session_loss"),
    "lazy HTTP client across an await": (LazyHTTPClientClient, "concurrent_first_calls"),
    "cancellation leaks a session": (ForgetOnCancelClient, "caller_cancelled_while_opening"),
    "lock held across a call": (LockAcrossCallClient, "calls_across_session_loss"),
}


# --- caches: the Kiln pattern, keyed by (server URL, run id) ---------------------------------------------


class ReferenceCache:
    """The reference `SessionCache` behind the cache-scenario interface."""

    def __init__(self) -> None:
        self.cache = SessionCache(read_timeout=1.0)

    async def get(self, url: str, run_id: str) -> Any:
        return await self.cache.get_or_create((url, run_id))

    async def cleanup(self, run_id: str) -> None:
        await self.cache.close_run(run_id)

    async def aclose(self) -> None:
        await self.cache.aclose()


class CheckThenActCache:
    """Bug: check-then-act across the session's opening; two getters of one key both create a session."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], ReusingSessionClient] = {}
        self.all: list[ReusingSessionClient] = []

    async def get(self, url: str, run_id: str) -> Any:
        key = (url, run_id)
        if key in self.entries:
            return self.entries[key]
        client = ReusingSessionClient(url, read_timeout=1.0)
        self.all.append(client)
        await client.connect()
        self.entries[key] = client  # a second creator overwrites the first: its session stays open
        return client

    async def cleanup(self, run_id: str) -> None:
        for key in [k for k in self.entries if k[1] == run_id]:
            await self.entries.pop(key).aclose()

    async def aclose(self) -> None:
        entries, self.entries = self.entries, {}
        for client in entries.values():
            await client.aclose()
        for client in self.all:  # the harness still closes what leaked, so only the server sees the leak
            with contextlib.suppress(Exception):
                await client.aclose()


class CleanupRacingCache:
    """Bug (the Kiln plan): creation is single-flight under a lock, but cleanup only pops what is cached;
    a creation in flight when cleanup runs is inserted afterwards and never closed."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], ReusingSessionClient] = {}
        self.lock = asyncio.Lock()

    async def get(self, url: str, run_id: str) -> Any:
        key = (url, run_id)
        async with self.lock:
            if key in self.entries:
                return self.entries[key]
        client = ReusingSessionClient(url, read_timeout=1.0)
        await client.connect()
        async with self.lock:
            existing = self.entries.get(key)
            if existing is not None:
                await client.aclose()
                return existing
            self.entries[key] = client
        return client

    async def cleanup(self, run_id: str) -> None:
        async with self.lock:
            popped = [self.entries.pop(k) for k in [k for k in self.entries if k[1] == run_id]]
        for client in popped:
            await client.aclose()

    async def aclose(self) -> None:
        entries, self.entries = self.entries, {}
        for client in entries.values():
            await client.aclose()


BROKEN_CACHES: dict[str, type[Any]] = {
    "check-then-act double create (cache)": CheckThenActCache,
    "cleanup racing creation (cache)": CleanupRacingCache,
}


class CancelLeakCache:
    """Bug: creation and cleanup share one lock (no double create, no cleanup race), but a getter cancelled
    while its client connects abandons that client: its session and HTTP client stay open."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], ReusingSessionClient] = {}
        self.lock = asyncio.Lock()

    async def get(self, url: str, run_id: str) -> Any:
        key = (url, run_id)
        async with self.lock:
            if key not in self.entries:
                client = ReusingSessionClient(url, read_timeout=1.0)
                await client.connect()  # cancelled here: `client` is dropped unclosed
                self.entries[key] = client
            return self.entries[key]

    async def cleanup(self, run_id: str) -> None:
        async with self.lock:
            popped = [self.entries.pop(k) for k in [k for k in self.entries if k[1] == run_id]]
        for client in popped:
            await client.aclose()

    async def aclose(self) -> None:
        async with self.lock:
            entries, self.entries = self.entries, {}
        for client in entries.values():
            await client.aclose()


class NoRetryAfterExpiryCache(ReferenceCache):
    """Bug: the reference cache, but its clients hand the 404 of an expired session to the caller instead of
    opening a new session and retrying (the call after an expiry fails)."""

    def __init__(self) -> None:
        async def make(key: tuple[str, str]) -> ReusingSessionClient:
            client = NoRetryOn404Client(key[0])
            try:
                await client.connect()
            except BaseException:
                await client.aclose()
                raise
            return client

        self.cache = SessionCache(factory=make)


BROKEN_CACHES.update(
    {
        "cancellation leaks a session (cache)": CancelLeakCache,
        "expired session not reopened (cache)": NoRetryAfterExpiryCache,
    }
)
