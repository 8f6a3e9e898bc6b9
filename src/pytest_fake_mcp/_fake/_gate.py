"""Gate: a door held requests wait at until the test opens it (thread-safe; any event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

__all__ = ["Gate", "Waitable", "describe_wait", "wait_for"]

_POLL = 0.01


class Gate:
    """A door held requests wait at until the test opens it; thread-safe, any loop.

    Example::

        gate = Gate("slow initialize")
        fake_mcp_server.on("initialize").delay(until=gate)
        task = asyncio.create_task(client.connect())
        ...  # the initialize is held: do what must happen meanwhile
        gate.open()
    """

    def __init__(self, name: str = "gate") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._open = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        """Let every request waiting here (and every later one) go on."""
        with self._lock:
            self._open = True
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its waiter went with it
                loop.call_soon_threadsafe(_resolve, future)

    def close(self) -> None:
        """Make later requests wait again."""
        with self._lock:
            self._open = False

    async def wait(self) -> None:
        """Return once the gate is open (on whatever loop awaits it)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._open:
                return
            self._waiters.append((loop, future))
        try:
            await future
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove((loop, future))

    def __repr__(self) -> str:
        return f"Gate({self.name!r})"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


Waitable = Gate | threading.Event


async def wait_for(until: Waitable) -> None:
    """Wait on the server loop for a Gate, or poll a threading.Event (it has no loop-side hook)."""
    if isinstance(until, Gate):
        await until.wait()
        return
    while not until.is_set():  # noqa: ASYNC110 - a threading.Event cannot wake a loop
        await asyncio.sleep(_POLL)


def describe_wait(seconds: float, until: Waitable | None) -> str:
    if until is None:
        return f"{seconds:g}s"
    name = f"gate {until.name!r}" if isinstance(until, Gate) else "the test's threading.Event"
    return f"until {name} opens" + (f", then {seconds:g}s" if seconds else "")
