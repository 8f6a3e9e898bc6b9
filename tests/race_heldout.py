"""A held-out set of session caches for the cache machine (`explore_session_cache`), written from the user's view.

Written without reading the race engine: each cache below is what a user might write on `ReusingSessionClient`,
behind the `SessionCacheUnderTest` methods (``get(url, run_id)``, ``cleanup(run_id)``, ``aclose()``). Every
broken cache is `HeldOutCache` with ONE method replaced; its docstring names the bug and the interleaving that
shows it. No barrier is placed anywhere: each bug shows only under some programs and interleavings.

The design of `HeldOutCache` (correct):

* one client per key ``(url, run_id)``; its creation is a task published in the cache at once, so creation is
  single-flight and a cleanup or ``aclose`` that starts during a creation finds it (and closes its client);
* a client serves ONE session (`OneSessionClient`): when the server loses it (404), the call raises
  `SessionLostError` and the cache's loss handler (`HeldOutCache._recover`) replaces the client: it evicts the
  entry only if it is still the one that failed, parks the spent client (closed with its run) and retries the
  call on the key's current client;
* ``cleanup(run_id)`` bumps the run's epoch and evicts the run's entries before awaiting anything, then closes
  them; a get or a loss recovery that began before that cleanup creates no client after it.

`LockedCache` is a second correct cache of another design (a lock per key, an epoch per run, the client
reopening lost sessions itself).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, TypeAlias

from pytest_fake_mcp._client._reusing import ReusingSessionClient, SessionLostError, _Session

__all__ = [
    "HELD_OUT",
    "HELD_OUT_CORRECT",
    "CloseBeforeEvictCache",
    "HeldOutCache",
    "LockedCache",
    "LossHandlerPopsByKeyCache",
    "OneSessionClient",
    "PublishBeforeConnectCache",
    "SettleThenEvictCache",
    "UnshieldedCreationCache",
    "UrlKeyedCache",
]

Key: TypeAlias = tuple[str, str]
Entry: TypeAlias = "asyncio.Future[OneSessionClient]"


class OneSessionClient(ReusingSessionClient):
    """A reusing client that serves one session and must be connected before use (as most SDK clients).

    A lost session makes every call on it raise `SessionLostError` (``max_attempts=1``, and no second session
    is ever started here): replacing the client is the cache's job. ``call_tool`` before ``connect()`` finished
    raises ``RuntimeError``.
    """

    def __init__(self, url: str) -> None:
        super().__init__(url, read_timeout=1.0, max_attempts=1)
        self.connected = False

    async def connect(self) -> None:
        await super().connect()
        self.connected = True

    def _start(self) -> _Session:
        if self.generation >= 1:  # spent: its one session was lost (or ended)
            raise SessionLostError(self.url, 1, self.session_ids)
        return super()._start()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        if not self.connected:
            raise RuntimeError(f"call_tool({name!r}) on {self!r} before connect() finished")
        return await super().call_tool(name, arguments)


@dataclass(frozen=True)
class _Op:
    """A get and what it began under: its key, its run and the run's epoch (bumped by each cleanup)."""

    key: Key
    run_id: str
    epoch: int


class _Handle:
    """What ``get`` returns: calls go to the key's client; a lost session is replaced by the cache and retried."""

    def __init__(self, cache: HeldOutCache, op: _Op, entry: Entry, client: OneSessionClient) -> None:
        self._cache = cache
        self._op = op
        self._entry = entry
        self._client = client

    @property
    def client(self) -> OneSessionClient:
        """The client the last call went to."""
        return self._client

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        for _ in range(3):
            try:
                return await self._client.call_tool(name, arguments)
            except SessionLostError:
                self._entry, self._client = await self._cache._recover(self._op, self._entry)
        return await self._client.call_tool(name, arguments)


class HeldOutCache:
    """Correct: creation published as a task, evict-then-close cleanup, an identity-checked loss handler.

    An operation that a cleanup of its run overtook (the run's epoch moved since its get began) may still
    join an entry, but never creates one: its session would outlive the cleanup.
    """

    def __init__(self) -> None:
        self._entries: dict[Key, Entry] = {}
        self._owner: dict[Key, str] = {}  # the run whose cleanup closes the entry
        self._spent: list[tuple[str, OneSessionClient]] = []  # (run, client) replaced after a loss
        self._epochs: dict[str, int] = {}  # per run, bumped as each cleanup begins
        self._closed = False

    # -- the methods the variants replace, one each ------------------------------------------------

    def _key(self, url: str, run_id: str) -> Key:
        return (url, run_id)

    def _publish(self, key: Key, run_id: str) -> Entry:
        """Start the key's creation and publish it at once (a task: waiters get the client once connected)."""
        task = asyncio.get_running_loop().create_task(self._create(key[0]), name=f"create-{key}")
        task.add_done_callback(lambda t: self._forget_failed(key, t))
        self._entries[key] = task
        self._owner[key] = run_id
        return task

    async def _await_entry(self, entry: Entry) -> OneSessionClient:
        """The entry's client; a cancelled waiter does not cancel the creation others share."""
        return await asyncio.shield(entry)

    async def _recover(self, op: _Op, failed: Entry) -> tuple[Entry, OneSessionClient]:
        """Loss handler: evict ``failed`` only if it is still the key's entry, then use the key's current client."""
        if self._entries.get(op.key) is failed:
            del self._entries[op.key]
            self._spent.append((self._owner.pop(op.key, op.run_id), failed.result()))
        return await self._current(op)

    async def cleanup(self, run_id: str) -> None:
        """Evict the run's entries (nothing awaited before), then close their clients."""
        self._begin_cleanup(run_id)
        await self._close_run(run_id)

    async def aclose(self) -> None:
        self._closed = True
        evicted = self._evict(list(self._entries))
        spent, self._spent = [client for _, client in self._spent], []
        await self._close(evicted, spent)

    # -- shared ------------------------------------------------------------------------------------

    async def get(self, url: str, run_id: str) -> _Handle:
        op = _Op(self._key(url, run_id), run_id, self._epochs.get(run_id, 0))
        entry, client = await self._current(op)
        return _Handle(self, op, entry, client)

    async def _current(self, op: _Op) -> tuple[Entry, OneSessionClient]:
        """The key's client; a get (or its retry) that a cleanup of its run overtook creates none."""
        for _ in range(3):
            if self._closed:
                raise RuntimeError(f"{type(self).__name__} is closed")
            entry = self._entries.get(op.key)
            if entry is None:
                if self._epochs.get(op.run_id, 0) != op.epoch:
                    raise RuntimeError(f"run {op.run_id!r} was cleaned up during this operation on {op.key[0]}")
                entry = self._publish(op.key, op.run_id)
            try:
                return entry, await self._await_entry(entry)
            except SessionLostError:
                continue  # lost during its handshake: the failed creation was forgotten, make another
        raise SessionLostError(op.key[0], 3, ())

    def _begin_cleanup(self, run_id: str) -> None:
        self._epochs[run_id] = self._epochs.get(run_id, 0) + 1

    async def _close_run(self, run_id: str) -> None:
        evicted = self._evict([key for key, run in self._owner.items() if run == run_id])
        spent = [client for run, client in self._spent if run == run_id]
        self._spent = [(run, client) for run, client in self._spent if run != run_id]
        await self._close(evicted, spent)

    @staticmethod
    async def _create(url: str) -> OneSessionClient:
        client = OneSessionClient(url)
        try:
            await client.connect()
        except BaseException:
            await client.aclose()
            raise
        return client

    def _forget_failed(self, key: Key, task: Entry) -> None:
        if (task.cancelled() or task.exception() is not None) and self._entries.get(key) is task:
            del self._entries[key]
            self._owner.pop(key, None)

    def _evict(self, keys: list[Key]) -> list[Entry]:
        evicted = [self._entries.pop(key) for key in keys if key in self._entries]
        for key in keys:
            self._owner.pop(key, None)
        return evicted

    async def _close(self, entries: list[Entry], spent: list[OneSessionClient]) -> None:
        await asyncio.gather(*(self._close_entry(entry) for entry in entries), *(c.aclose() for c in spent))

    @staticmethod
    async def _close_entry(entry: Entry) -> None:
        with contextlib.suppress(BaseException):  # a failed creation closed its own client
            await asyncio.wait({entry})
        if entry.done() and not entry.cancelled() and entry.exception() is None:
            await entry.result().aclose()


# --- the four shapes issue 23 names --------------------------------------------------------------------


class CloseBeforeEvictCache(HeldOutCache):
    """Bug: ``cleanup`` awaits each client's close before evicting it, so the entry stays visible while its
    client closes. Interleaving: ``get(k)`` settles; ``cleanup(run)`` starts closing k's client (DELETE in
    flight); a ``use(k)`` that begins in that window gets the closing client and its call fails ("it is
    CLOSING"), though the use began after the cleanup."""

    async def cleanup(self, run_id: str) -> None:
        self._begin_cleanup(run_id)
        for key in [key for key, run in self._owner.items() if run == run_id]:
            entry = self._entries[key]
            await self._close_entry(entry)
            if self._entries.get(key) is entry:
                del self._entries[key]
                self._owner.pop(key, None)
        spent = [client for run, client in self._spent if run == run_id]
        self._spent = [(run, client) for run, client in self._spent if run != run_id]
        await self._close([], spent)


class UrlKeyedCache(HeldOutCache):
    """Bug: the cache is keyed by URL only, so both runs share one client, owned by the run that created it.
    Interleaving: ``get(s, r0)`` creates it; ``use(s, r1)`` gets the same client and calls; ``cleanup(r0)``
    closes it under r1's call (r1's call fails, though no cleanup of r1 began), or ``cleanup(r1)`` leaves
    r1's session open because r0 owns it."""

    def _key(self, url: str, run_id: str) -> Key:
        return (url, "")


class PublishBeforeConnectCache(HeldOutCache):
    """Bug: the client is published in the cache before ``connect()`` finished (the creator connects it
    after publishing). Interleaving: ``get(k)`` publishes and starts connecting; a concurrent ``use(k)`` finds
    the entry, gets the unconnected client and calls it: "call_tool before connect() finished"."""

    def _publish(self, key: Key, run_id: str) -> Entry:
        client = OneSessionClient(key[0])
        published: Entry = asyncio.get_running_loop().create_future()
        published.set_result(client)
        self._entries[key] = published
        self._owner[key] = run_id

        async def connect() -> OneSessionClient:
            try:
                await client.connect()
            except BaseException:
                await client.aclose()
                if self._entries.get(key) is published:
                    del self._entries[key]
                    self._owner.pop(key, None)
                raise
            return client

        return asyncio.get_running_loop().create_task(connect(), name=f"create-{key}")


class LossHandlerPopsByKeyCache(HeldOutCache):
    """Bug: the loss handler evicts by key without checking the entry is still the client that failed.
    Interleaving: two ``use(k)`` calls in flight on k's session; ``expire(k)``; the first caller's handler
    evicts the lost client and creates a fresh one; the second caller's handler then pops that FRESH client
    (parking it as spent, its session still open) and creates a third: two sessions live for k, and one more
    ``initialize`` than the one expiry allows."""

    async def _recover(self, op: _Op, failed: Entry) -> tuple[Entry, OneSessionClient]:
        stale = self._entries.pop(op.key, None)
        if stale is not None and stale.done() and not stale.cancelled() and stale.exception() is None:
            self._spent.append((self._owner.pop(op.key, op.run_id), stale.result()))
        return await self._current(op)


# --- of our own design, of the same kind --------------------------------------------------------------


class SettleThenEvictCache(HeldOutCache):
    """Bug: ``cleanup`` first waits for the run's creations in flight to settle, then evicts every key the
    run has *then*. Interleaving: ``get(k)`` is creating; ``cleanup(run)`` waits for it; a ``use(k2)`` of the
    same run begins during that wait and creates k2; the cleanup then evicts and closes k2 under that use,
    which began after the cleanup and fails."""

    async def cleanup(self, run_id: str) -> None:
        self._begin_cleanup(run_id)
        pending = [e for key, e in self._entries.items() if self._owner.get(key) == run_id and not e.done()]
        if pending:
            await asyncio.wait(pending)
        await self._close_run(run_id)


class UnshieldedCreationCache(HeldOutCache):
    """Bug: getters await the shared creation task without a shield, so cancelling one getter cancels the
    creation for every getter. Interleaving: ``get(k)`` starts the creation; a second ``get(k)`` waits on it;
    ``cancel()`` cancels one of them while the creation runs: the other fails with ``CancelledError``."""

    async def _await_entry(self, entry: Entry) -> OneSessionClient:
        return await entry


HELD_OUT: dict[str, type[Any]] = {
    "cleanup closes before evicting": CloseBeforeEvictCache,
    "keyed by URL only": UrlKeyedCache,
    "published before connect": PublishBeforeConnectCache,
    "loss handler pops by key": LossHandlerPopsByKeyCache,
    "cleanup settles then evicts": SettleThenEvictCache,
    "shared creation not shielded": UnshieldedCreationCache,
}


# --- a second correct cache, of another design ---------------------------------------------------------


class LockedCache:
    """Correct: a lock per key, an epoch per run bumped by ``cleanup``; the client reopens lost sessions itself.

    A get that a cleanup of its run overtook (the epoch moved since the get began) creates nothing: it fails
    before connecting, or closes the client it connected.
    """

    def __init__(self) -> None:
        self._clients: dict[Key, ReusingSessionClient] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._epochs: dict[str, int] = {}
        self._closed = False

    async def get(self, url: str, run_id: str) -> ReusingSessionClient:
        key = (url, run_id)
        epoch = self._epochs.get(run_id, 0)  # as this get began: a cleanup after it makes its creation void
        async with self._locks.setdefault(key, asyncio.Lock()):
            self._check_open()
            client = self._clients.get(key)
            if client is not None:
                return client
            if self._epochs.get(run_id, 0) != epoch:
                raise RuntimeError(f"run {run_id!r} was cleaned up while this get of {url} waited")
            client = ReusingSessionClient(url, read_timeout=1.0)
            try:
                await client.connect()
            except BaseException:
                await client.aclose()
                raise
            if self._closed or self._epochs.get(run_id, 0) != epoch:
                await client.aclose()
                raise RuntimeError(f"run {run_id!r} was cleaned up while {url} was connecting")
            self._clients[key] = client
            return client

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("LockedCache is closed")

    async def cleanup(self, run_id: str) -> None:
        self._epochs[run_id] = self._epochs.get(run_id, 0) + 1
        keys = [key for key in self._clients if key[1] == run_id]
        await asyncio.gather(*(self._clients.pop(key).aclose() for key in keys))

    async def aclose(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(client.aclose() for client in clients))


HELD_OUT_CORRECT: dict[str, type[Any]] = {
    "held-out cache (tasks, identity-checked loss handler)": HeldOutCache,
    "locked cache (lock per key, epoch per run)": LockedCache,
}
