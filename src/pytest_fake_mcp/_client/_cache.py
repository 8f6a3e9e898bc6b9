"""The session cache: one `ReusingSessionClient` per (server URL, run id), shared by sub-agents.

The run id lives in a ``contextvars`` variable, so child tasks (``asyncio.gather``, sub-agents)
read their parent's run id and share its clients, as in the Kiln design (seeds/004). Creation is
single-flight per key, and closing the cache (or a run) also closes creations still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

from ._reusing import ReusingSessionClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine
    from types import TracebackType
    from typing import Self

__all__ = ["CacheKey", "SessionCache", "current_run_id"]

CacheKey: TypeAlias = tuple[str, str]
"""``(server_url, run_id)``."""

_RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("pytest_fake_mcp_run_id", default=None)


def current_run_id() -> str | None:
    """The run id of the innermost `SessionCache.scope` around this task, or ``None``."""
    return _RUN_ID.get()


class SessionCache:
    """Reusing clients keyed by ``(server_url, run_id)``; get-or-create is single-flight per key.

    The default factory makes ``ReusingSessionClient(url, http_client=<the cache's http_client>,
    **client_options)`` and opens its session (``connect()``), so a bad URL fails at ``get``.
    Pass ``factory`` to build clients differently; whatever it returns must have ``aclose()``.

    Args:
        factory: ``async (key) -> ReusingSessionClient``; replaces the default.
        http_client: One HTTP client shared by every default-made client; never closed here.
        close_timeout: Seconds ``aclose``/``close_run`` wait for a creation still in flight.
        client_options: Keyword arguments for the default-made clients.

    Example::

        cache = SessionCache()
        async with cache.scope():                  # the root agent opens a run
            client = await cache.get(server.url)   # sub-agents in this run get the same client
            await client.call_tool("echo", {"text": "hi"})
        # leaving the root scope closed the run's clients (DELETE sent)
        await cache.aclose()
    """

    def __init__(
        self,
        *,
        factory: Callable[[CacheKey], Coroutine[Any, Any, ReusingSessionClient]] | None = None,
        http_client: Any = None,
        close_timeout: float = 30.0,
        **client_options: Any,
    ) -> None:
        self._factory = factory or self._default_factory
        self._http_client = http_client
        self._client_options = client_options
        self._close_timeout = close_timeout
        self._entries: dict[CacheKey, asyncio.Task[ReusingSessionClient]] = {}
        self._closed = False
        self.create_count = 0

    def __repr__(self) -> str:
        return f"SessionCache(keys={sorted(self._entries)!r}, closed={self._closed})"

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[CacheKey]:
        return list(self._entries)

    async def _default_factory(self, key: CacheKey) -> ReusingSessionClient:
        client = ReusingSessionClient(key[0], http_client=self._http_client, **self._client_options)
        try:
            await client.connect()
        except BaseException:
            await client.aclose()
            raise
        return client

    @contextlib.asynccontextmanager
    async def scope(self, run_id: str | None = None) -> AsyncIterator[str]:
        """Enter a run. The outermost scope owns it: on exit it closes the run's clients.

        A scope inside a task that already has a run id (a sub-agent) reuses it and closes nothing.
        """
        inherited = _RUN_ID.get()
        if inherited is not None and run_id in (None, inherited):
            yield inherited
            return
        run = run_id or uuid.uuid4().hex
        token = _RUN_ID.set(run)
        try:
            yield run
        finally:
            _RUN_ID.reset(token)
            await self.close_run(run)

    async def get(self, server_url: str) -> ReusingSessionClient:
        """The client for ``server_url`` in the current run (see `scope`)."""
        run = _RUN_ID.get()
        if run is None:
            raise LookupError(
                f"SessionCache.get({server_url!r}) needs a run: wrap the agent run in "
                f"`async with cache.scope():` or call get_or_create((url, run_id))"
            )
        return await self.get_or_create((server_url, run))

    async def get_or_create(self, key: CacheKey) -> ReusingSessionClient:
        """The cached client for ``key``, created once however many tasks ask at the same time.

        A failed creation is not cached: the next call tries again. A caller cancelled while
        waiting does not cancel the creation other callers share.
        """
        if self._closed:
            raise RuntimeError(f"Cannot get {key!r} from {self!r}: it is closed; create a new SessionCache")
        task = self._entries.get(key)
        if task is None:
            self.create_count += 1
            task = asyncio.get_running_loop().create_task(self._factory(key), name=f"mcp-cache-create-{key}")
            task.add_done_callback(lambda t: self._forget_failed(key, t))
            self._entries[key] = task
        return await asyncio.shield(task)

    def _forget_failed(self, key: CacheKey, task: asyncio.Task[ReusingSessionClient]) -> None:
        failed = task.cancelled() or task.exception() is not None
        if failed and self._entries.get(key) is task:
            del self._entries[key]

    async def close_run(self, run_id: str) -> None:
        """Close and forget every client of ``run_id`` (the root agent's ``finally``)."""
        await self._close([key for key in self._entries if key[1] == run_id])

    async def aclose(self) -> None:
        """Close every client, including ones still being created; idempotent."""
        self._closed = True
        await self._close(list(self._entries))

    async def _close(self, keys: list[CacheKey]) -> None:
        tasks = [self._entries.pop(key) for key in keys if key in self._entries]
        await asyncio.gather(*(self._close_one(task) for task in tasks))

    async def _close_one(self, task: asyncio.Task[ReusingSessionClient]) -> None:
        # Let a creation in flight finish (bounded) rather than cancel it: cancelling an initialize
        # leaves a session open on the server (docs/failure-modes.md#t06); the client's aclose then DELETEs it.
        done, _ = await asyncio.wait({task}, timeout=self._close_timeout)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            return
        if task.cancelled() or task.exception() is not None:
            return
        await task.result().aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
