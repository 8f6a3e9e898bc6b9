"""An MCP session with an owner task of its own, so that any task may open, use and close it.

anyio lets only the task that entered a cancel scope exit it, and the SDK's transport and
``ClientSession`` each enter one. A client that opens a session in one task and closes it in another
(a shutdown hook, the agent task that happened to connect a server first) breaks that rule: anyio
raises "Attempted to exit cancel scope in a different task than it was entered in", the DELETE is
never sent, and the task that opened the session is cancelled later, out of the blue
(``examples/buggy/test_buggy_helper.py`` shows all three).

``OwnedSession`` starts one task per session. That task enters both contexts, sends ``initialize``,
waits to be told to stop, and exits them itself; callers only await events. Two more rules:

* A caller that gives up during ``initialize`` (a timeout, a cancellation) does not cancel the
  handshake. The server creates the session anyway, and a cancelled handshake never learns its id,
  so nobody could DELETE it. The owner lets the handshake finish (within ``handshake_bound``) and
  then closes the session, DELETE included.
* Every wait is bounded: ``aclose()`` gives the owner ``close_bound`` seconds, then cancels it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import ClientSession

from .sdk import open_session


def _mark_retrieved(future: asyncio.Future[ClientSession]) -> None:
    """Nobody may await a failed handshake (its caller gave up); do not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


class OwnedSession:
    """One MCP session on ``http_client``, entered and exited by its own task.

    Example::

        owned = OwnedSession(url, http_client)
        session = await owned.open()  # from any task
        await session.call_tool("echo", {"text": "hi"})  # from any task
        await owned.aclose()  # from any task: DELETE, then the owner exits its contexts
    """

    def __init__(self, url: str, http_client: Any, *, handshake_bound: float = 10.0, close_bound: float = 10.0) -> None:
        self.url = url
        self.error: BaseException | None = None
        self._http_client = http_client
        self._handshake_bound = handshake_bound
        self._close_bound = close_bound
        self._ready: asyncio.Future[ClientSession] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> ClientSession:
        """Start the owner and wait for the handshake; cancelled, the owner finishes it and closes the session."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._ready.add_done_callback(_mark_retrieved)
            self._task = asyncio.create_task(self._own(self._ready), name=f"MCP session owner for {self.url}")
        try:
            return await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            self.stop_soon()
            raise

    def stop_soon(self) -> None:
        """Ask the owner to close the session as soon as it can (after a handshake in flight)."""
        self._stop.set()

    async def aclose(self) -> None:
        """Close the session (the SDK sends its DELETE) and wait for the owner, at most ``close_bound`` seconds."""
        self.stop_soon()
        if self._task is None:
            return
        _, pending = await asyncio.wait({self._task}, timeout=self._close_bound)
        if pending:
            await self.abort()

    async def abort(self) -> None:
        """Cancel the owner now, handshake or not: its contexts exit in its own task, with no DELETE if no id yet."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=self._close_bound)

    # --8<-- [start:owner]
    async def _own(self, ready: asyncio.Future[ClientSession]) -> None:
        try:
            async with open_session(self.url, self._http_client) as session:
                async with asyncio.timeout(self._handshake_bound):
                    await session.initialize()
                ready.set_result(session)
                await self._stop.wait()
        except Exception as error:  # ExceptionGroup too: mcp 1.x tears the transport down on a 5xx
            self.error = error
            if not ready.done():
                ready.set_exception(error)
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError(f"the MCP session at {self.url} was closed during its handshake"))

    # --8<-- [end:owner]
