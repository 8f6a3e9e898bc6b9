"""Race: what a race scenario gets in one example: the fake, its URL, the HTTP clients, draws and explored points.

Its draws come from the example (`ExampleDraws`), so they shrink and replay with the schedule; once
Hypothesis ends the example, they give a fallback and the run finishes quietly (`Race.stop`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from hypothesis import strategies as st

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from .._host._server import FakeMCPServer
    from .._record._counters import HTTPClientCounter
    from ._draws import ExampleDraws

__all__ = ["Race"]

T = TypeVar("T")
U = TypeVar("U")

_ENDED: Final = object()
"""What a draw gives once Hypothesis has ended the example (see `Race._take_or`)."""


class Race:
    """What a race coroutine gets: the in-process fake, its URL, the HTTP clients built, and helpers.

    Example::

        async def scenario(race):
            client = MyClient(race.url)
            await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
            await client.aclose()
            await race.quiet()
            race.server.assert_initialize_count(1)
    """

    def __init__(self, server: FakeMCPServer, http_clients: HTTPClientCounter, choices: ExampleDraws) -> None:
        self.server = server
        self.http_clients = http_clients
        self._choices = choices
        self.stop: BaseException | None = None
        self.points: list[str] = []
        """Each explored point the run reached (`at_some_point`), in words; a failure report lists them."""
        self._wire = 0
        self._wire_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def url(self) -> str:
        """The fake's endpoint; every httpx/httpx2 client built during the run reaches it in-process."""
        return self.server.url

    def draw(self, strategy: st.SearchStrategy[T], label: str) -> T:
        """Draw a value from the example (it shrinks and replays with the schedule)."""
        fallback: Callable[[], T] = lambda: _first(strategy)  # noqa: E731 - what an ending example gets
        return self._take(lambda: self._choices.draw(strategy, label), fallback)

    def _draw_integer(self, low: int, high: int, label: str | None) -> int:
        """``draw(st.integers(low, high), label)``, straight from the example's choices (``label`` None: no note)."""
        return self._take_or(low, self._choices.integer, low, high, label)

    def _draw_boolean(self, label: str) -> bool:
        """``draw(st.booleans(), label)``, straight from the example's choices."""
        return self._take_or(False, self._choices.boolean, label)

    def _draw_choice(self, options: tuple[T, ...], label: str) -> T:
        """``draw(st.sampled_from(options), label)``, straight from the example's choices; shrinks to the first."""
        choices = self._choices
        if not choices.direct:
            return self._take(lambda: choices.draw(st.sampled_from(options), label), lambda: options[0])

        def pick() -> T:
            value = options[choices.integer(0, len(options) - 1)]
            choices.note(value, label)
            return value

        return self._take(pick, lambda: options[0])

    def _take(self, draw: Callable[[], T], fallback: Callable[[], T]) -> T:
        """``draw()``; once Hypothesis ends the example, ``fallback()``: the run finishes quietly, the end is
        re-raised after it."""
        value = self._take_or(_ENDED, draw)
        return fallback() if value is _ENDED else cast("T", value)

    def _take_or(self, ended: U, draw: Callable[..., T], *args: Any) -> T | U:
        """``draw(*args)``; once Hypothesis ends the example, ``ended`` (no closures: the server-choices
        middleware draws for every request)."""
        if self.stop is not None:
            return ended  # pragma: no cover - the example is ending
        try:
            return draw(*args)
        except BaseException as exc:  # Hypothesis ends the example: finish the run quietly, re-raise after
            self.stop = exc
            return ended

    async def quiet(self) -> None:
        """Wait until nothing else can run without time moving (every other task is blocked or done)."""
        loop = asyncio.get_running_loop()
        wait_idle = getattr(loop, "wait_idle", None)
        if wait_idle is None:
            raise RuntimeError("Race.quiet() works only inside a race run (on the controlled loop)")
        await wait_idle()

    async def at_some_point(
        self, during: asyncio.Future[Any], label: str = "point", *, wire_events: int = 6, turns: int = 3
    ) -> bool:
        """Wait for a point Hypothesis picks in the run's progress on the wire, while ``during`` runs.

        The point is ``k`` wire events after the call, then ``j`` loop turns, with ``k`` drawn in
        ``0..wire_events`` and ``j`` in ``0..turns``. A wire event is a request reaching the fake, or the
        fake handing over the start of an answer, whichever task sent the request (GET streams are not
        counted). So the points spread over the exchanges with the fake, however many steps each one takes:
        "cancel it just after the fake answered ``initialize``" is one draw away. A failing example shrinks
        to the earliest failing point, and the failure report names it with what the fake had received and
        answered then.

        Args:
            during: the task (or future) the point falls in; if it finishes first, the wait ends then.
            label: names the point in the report and in Hypothesis's draws.
            wire_events: the latest wire event the point may follow.
            turns: the most loop turns the point may come after its wire event.

        Returns:
            True if ``during`` was still running at the point; False if it finished first.

        Raises:
            ValueError: ``wire_events`` or ``turns`` is negative.

        Example::

            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller")

            async def cancel_it() -> None:
                if await race.at_some_point(caller, "cancel the caller"):
                    caller.cancel()

            race.spawn(cancel_it(), "canceller")
        """
        if wire_events < 0 or turns < 0:
            raise ValueError(f"wire_events={wire_events!r} and turns={turns!r} must both be >= 0 (0 and 0: at once)")
        k = self._draw_integer(0, wire_events, f"{label}: wire events") if wire_events else 0
        j = self._draw_integer(0, turns, f"{label}: loop turns") if turns else 0
        if k and not during.done():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def wake(_: object) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            during.add_done_callback(wake)
            self._wire_waiters.append((self._wire + k, waiter))
            try:
                await waiter
            finally:
                during.remove_done_callback(wake)
        for _ in range(j):
            if during.done():
                break
            await asyncio.sleep(0)
        where = f"after {k} wire event(s) and {j} more loop turn(s)"
        if during.done():
            self.points.append(f"{label}: {where}, but {_task_name(during)} had finished already")
            return False
        self.points.append(f"{label}: {where}, when the fake had {self._wire_state()}")
        return True

    def _on_wire(self) -> None:
        """One more wire event: wake the points waiting for it."""
        self._wire += 1
        if self._wire_waiters:
            reached = self._wire
            waiting = []
            for target, waiter in self._wire_waiters:
                if target > reached:
                    waiting.append((target, waiter))
                elif not waiter.done():
                    waiter.set_result(None)
            self._wire_waiters = waiting

    def _wire_state(self) -> str:
        """What the fake had received and answered, in words: ``answered initialize (200), received ...``."""
        parts = []
        for exchange in self.server.journal.exchanges:
            if exchange.http_method == "GET":
                continue
            what = exchange.rpc_method or (exchange.kind if exchange.kind != "other" else exchange.http_method)
            parts.append(f"received {what}" if exchange.status is None else f"answered {what} ({exchange.status})")
        return ", ".join(parts) if parts else "received nothing yet"

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """``asyncio.create_task`` with a name the failure report uses (``caller-1``, ``closer``, ...).

        The task is interleaved freely with every other task, even when its code is an installed package.
        """
        loop = asyncio.get_running_loop()
        task = loop.create_task(coro, name=name)
        explore_freely = getattr(loop, "explore_freely", None)
        if explore_freely is not None:
            explore_freely(task)
        return task


def _task_name(future: asyncio.Future[Any]) -> str:
    return future.get_name() if isinstance(future, asyncio.Task) else "the awaited future"


def _first(strategy: st.SearchStrategy[Any]) -> Any:
    if isinstance(strategy, st.SearchStrategy) and repr(strategy).startswith("booleans"):
        return False
    return 0
