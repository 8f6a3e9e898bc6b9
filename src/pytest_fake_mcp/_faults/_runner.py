"""FaultRunner: the app's request hooks for one lease, and the owner of every bit of state faults share.

Before each request it answers a session dropped with a shape, then finds the scripted faults that
match the request and are due, notes the firing on the request and applies their actions, each through
a :class:`Firing` (the narrow door in ``_fault``). After the answer it runs what faults deferred and
keeps the side-effect ledger. Held requests, barrier groups, dropped-session shapes and deferred drops
all live here, so the outward controls can release or cut them, and a new lease starts from nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .._fake._shapes import answer_with_shape
from .._record._journal import Outcome
from .._record._sessions import EndReason
from .._wire._protocol import SESSION_HEADER, Flavour
from ._fault import Release, end_connection

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .._fake._app import FakeMCPApp
    from .._fake._auth import AuthServer
    from .._fake._request import RequestContext
    from .._fake._shapes import SessionLossShape
    from .._wire._types import JSONObject, Send, SessionId
    from ._rule import ScriptedFault

__all__ = ["FaultRunner"]


class FaultRunner:
    """The scripted faults of one lease and the state their firings share; the app's ``RequestHooks``."""

    def __init__(self, app: FakeMCPApp) -> None:
        self._app = app
        self.rules: list[ScriptedFault] = []
        self._holds: dict[RequestContext, asyncio.Future[Release]] = {}
        self._dropped_shapes: dict[str, SessionLossShape] = {}
        self._after: dict[RequestContext, list[Callable[[], None]]] = {}
        self._answered: set[RequestContext] = set()
        self._done: dict[RequestContext, asyncio.Future[None]] = {}
        self._barriers: dict[ScriptedFault, _BarrierGroup] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.past_bound: Callable[[RequestContext], Release] | None = None
        """Set once the lease's ``hold_timeout`` passed: a request a fault would hold from then on is let go
        at once, the way this returns (so a request arriving after the bound cannot hang the test)."""

    def add(self, rule: ScriptedFault) -> None:
        self.rules = [*self.rules, rule]

    def remove(self, rule: ScriptedFault) -> None:
        self.rules = [r for r in self.rules if r is not rule]

    # --- the hooks (server loop) -------------------------------------------------------------------

    async def before(self, request: RequestContext) -> None:
        if await self._answer_dropped(request):
            return
        for rule in self.rules:
            firing = _Firing(self, request, rule)
            if not rule._claim(firing):
                continue
            _mark(request, str(rule))
            for fault in rule.faults:
                await fault.apply(firing)
                if request.response_started:
                    self._answered.add(request)
                    break

    async def after(self, request: RequestContext) -> None:
        for deferred in self._after.pop(request, []):
            deferred()
        done = self._done.pop(request, None)
        if done is not None and not done.done():
            done.set_result(None)
        self._answered.discard(request)

    async def _answer_dropped(self, request: RequestContext) -> bool:
        """A session dropped with a shape answers with that shape from then on."""
        if not self._dropped_shapes:
            return False
        session_id = request.session_id
        if session_id is None or session_id not in self._dropped_shapes:
            return False
        if request.session is not None and request.session.live:
            return False
        shape = self._dropped_shapes[session_id]
        _mark(request, f"session {session_id[:8]} was dropped: answered {shape}")
        await answer_with_shape(request, shape)
        self._answered.add(request)
        return True

    # --- what the controls do (server loop) ---------------------------------------------------------

    def drop_sessions(
        self, session_id: SessionId | None, reason: EndReason, shape: SessionLossShape | None
    ) -> list[SessionId]:
        """End one live session (None: all); with a shape, their ids answer with it from then on."""
        dropped = self._app.drop_session(session_id, reason)
        if shape is not None:
            for dropped_id in dropped:
                self._dropped_shapes[dropped_id] = shape
        return dropped

    def release_held(self, release: Release) -> list[RequestContext]:
        """Let every held request go, as ``release`` says; returns them."""
        held = list(self._holds)
        for future in list(self._holds.values()):
            if not future.done():
                future.set_result(release)
        return held

    def end_in_flight(self, release: Release, *, held: Release | None = None) -> list[RequestContext]:
        """Let held requests go (as ``held`` says, else ``release``); close every other unfinished one's connection."""
        let_go = self.release_held(held or release)
        others = [r for r in self._app.requests if r not in let_go and not r.response_finished]
        for request in others:
            close_now(request, release)
        return [*let_go, *others]

    def problems(self, *, unfired: bool) -> list[ScriptedFault]:
        """Scripted faults that did not do what the test scripted (unfired ones only if ``unfired``)."""
        for rule, group in self._barriers.items():
            if not group.released and group.arrivals:  # the test ended before the barrier filled or timed out
                group.released = True
                rule.failures.append(
                    f"{rule}: only {len(group.arrivals)} of {group.parties} requests arrived at the barrier "
                    "before the test ended"
                )
        return [rule for rule in self.rules if rule._problem(unfired=unfired) is not None]

    # --- shared by firings ----------------------------------------------------------------------------

    def _done_future(self, request: RequestContext) -> asyncio.Future[None]:
        """Resolved once the fake has finished answering ``request`` (its ``after`` hook ran)."""
        future = self._done.get(request)
        if future is None:
            future = self._done[request] = asyncio.get_running_loop().create_future()
        return future

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _Firing:
    """One scripted fault acting on one request: the ``Firing`` door a fault gets (see ``_fault``)."""

    def __init__(self, runner: FaultRunner, request: RequestContext, rule: ScriptedFault) -> None:
        self._runner = runner
        self._rule = rule
        self.request = request

    @property
    def sse(self) -> bool:
        # A modern answer waits for the method before its status line, even in SSE mode.
        return not self._runner._app.options.json_response and self.request.era != "modern"

    @property
    def flavour(self) -> Flavour:
        return self._runner._app.options.server_flavour

    @property
    def auth(self) -> AuthServer | None:
        return self._runner._app.auth

    def live_sessions(self) -> int:
        return len(self._runner._app.sessions.live())

    def session_headers(self) -> list[tuple[str, str]]:
        session = self.request.session
        return [(SESSION_HEADER, session.id)] if session is not None and session.live else []

    async def hold(self, condition: Awaitable[Any] | None) -> Release | Literal["done", "disconnected"]:
        if self._runner.past_bound is not None:
            return self._runner.past_bound(self.request)
        loop = asyncio.get_running_loop()
        release: asyncio.Future[Release] = loop.create_future()
        holds = self._runner._holds
        holds[self.request] = release
        gone = loop.create_task(self.request.disconnected.wait())
        waiters: set[asyncio.Future[Any]] = {release, gone}
        task = asyncio.ensure_future(condition) if condition is not None else None
        if task is not None:
            waiters.add(task)
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            holds.pop(self.request, None)
            for waiter in waiters:
                waiter.cancel()
        if release in done and not release.cancelled():
            return release.result()
        if task is not None and task in done:
            return "done"
        return "disconnected"

    async def give_up(self, release: Release) -> None:
        self.request.end_without_answer(release.outcome)
        _mark(self.request, release.why)
        await end_connection(self.request, reset=release.reset)

    async def barrier(self, parties: int, order: tuple[int, ...] | None, wait_s: float) -> None:
        runner, rule = self._runner, self._rule
        group = runner._barriers.get(rule)
        if group is None or group.released or group.loop is not asyncio.get_running_loop():
            group = runner._barriers[rule] = _BarrierGroup(runner, rule, parties, order)
        gate = group.arrive(self.request, wait_s)
        end = await self.hold(gate)
        if isinstance(end, Release):
            await self.give_up(end)
        elif end == "disconnected":
            self.request.end_without_answer(Outcome.DISCONNECTED)

    def drop_session(self, shape: SessionLossShape | None, *, after_answer: bool) -> None:
        session = self.request.session
        if session is None:  # pragma: no cover - DropSession fires only on a live session
            return
        session_id = session.id

        def drop() -> None:
            self._runner.drop_sessions(session_id, EndReason.DROPPED, shape)

        if after_answer:
            self._runner._after.setdefault(self.request, []).append(drop)
        else:
            drop()

    def tap(self, make: Callable[[Send], Send]) -> None:
        self.request.wrap_send(make)

    def switch_era(self, era: str) -> None:
        self._runner._app.served_era = era

    def swallow(self, response: JSONObject) -> None:
        self.request.replace_recorded(response, None)
        self._runner._app.handlers.ledger.undelivered(self.request.seq)


class _BarrierGroup:
    """``parties`` requests held at one barrier; released together, in order, or at the timeout."""

    def __init__(self, runner: FaultRunner, rule: ScriptedFault, parties: int, order: tuple[int, ...] | None) -> None:
        self.runner = runner
        self.rule = rule
        self.parties = parties
        self.order = order
        self.loop = asyncio.get_running_loop()
        self.arrivals: list[tuple[RequestContext, asyncio.Future[None]]] = []
        self.released = False
        self.timer: asyncio.TimerHandle | None = None

    def arrive(self, request: RequestContext, timeout: float) -> asyncio.Future[None]:
        gate: asyncio.Future[None] = self.loop.create_future()
        self.arrivals.append((request, gate))
        self.runner._done_future(request)
        if len(self.arrivals) == 1:
            self.timer = self.loop.call_later(timeout, self.time_out, timeout)
        if len(self.arrivals) == self.parties:
            self.release(self.order, timeout)
        return gate

    def time_out(self, timeout: float) -> None:
        if self.released:
            return
        text = (
            f"{self.rule}: only {len(self.arrivals)} of {self.parties} requests arrived within {timeout:g}s; "
            "released them"
        )
        self.rule.failures.append(text)
        self.runner._app.journal.note(text)
        self.release(None, timeout)

    def release(self, order: tuple[int, ...] | None, timeout: float) -> None:
        self.released = True
        if self.timer is not None:
            self.timer.cancel()
        if order is None:
            for _, gate in self.arrivals:
                _open(gate)
            return
        self.runner._spawn(self._in_order(order, timeout))

    async def _in_order(self, order: tuple[int, ...], wait_s: float) -> None:
        for index in order:
            request, gate = self.arrivals[index]
            _open(gate)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.runner._done_future(request)), wait_s)


def close_now(request: RequestContext, release: Release) -> None:
    """End a request that no fault holds: note why and close (or reset) its connection at once."""
    if request.outcome is Outcome.IN_FLIGHT:
        request.outcome = Outcome.RESET if release.reset else Outcome.CUT
    _mark(request, release.why)
    transport = request.transport
    if transport is not None and not transport.is_closing():
        if release.reset:
            request.abort_connection()
        else:
            transport.close()


def _mark(request: RequestContext, text: str) -> None:
    """Say on the request's exchange what a fault did to it (``Exchange.faults``): the one place that does."""
    request.faults.append(text)


def _open(gate: asyncio.Future[None]) -> None:
    if not gate.done():
        gate.set_result(None)


def _answers(message: JSONObject, request_id: Any) -> bool:
    return message.get("id") == request_id and "method" not in message and ("result" in message or "error" in message)
