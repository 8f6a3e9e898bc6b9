"""The fault script of one lease: scripted faults (matcher + schedule + actions) and the hooks that fire them.

``FaultScript`` is the app's :class:`RequestHooks`: before each request it finds the scripted faults
that match it and are due, records the firing on the request (``Exchange.faults``) and applies
their actions; after it, it runs what faults deferred and keeps the side-effect ledger. A fresh
script is installed for every lease, so nothing scripted in one test reaches the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._faults import Hit, Release
from ._journal import Outcome
from ._protocol import Flavour
from ._scripted_fault import ScriptedFault
from ._shapes import answer_with_shape

if TYPE_CHECKING:
    from ._app import FakeMCPApp
    from ._request import RequestContext
    from ._shapes import SessionLossShape
    from ._types import JSONObject, SessionId

__all__ = ["FaultScript", "ToolExecution"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One run of a tool's handler (the side-effect ledger): what ran, with which arguments, for whom."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    session_id: SessionId | None = None
    seq: int
    """The exchange that ran it."""
    delivered: bool = True
    """False if a fault kept the result from the client (the call ran, the client never heard)."""

    def __str__(self) -> str:
        lost = "" if self.delivered else ", result never delivered"
        return f"{self.tool}({json.dumps(dict(self.arguments), sort_keys=True)}) in exchange #{self.seq}{lost}"


class _BarrierGroup:
    """``parties`` requests held at one barrier; released together, in order, or at the timeout."""

    def __init__(self, script: FaultScript, rule: ScriptedFault, parties: int, order: tuple[int, ...] | None) -> None:
        self.script = script
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
        self.script.done_future(request)
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
        self.script.note(text)
        self.release(None, timeout)

    def release(self, order: tuple[int, ...] | None, timeout: float) -> None:
        self.released = True
        if self.timer is not None:
            self.timer.cancel()
        if order is None:
            for _, gate in self.arrivals:
                _open(gate)
            return
        self.script.spawn(self._in_order(order, timeout))

    async def _in_order(self, order: tuple[int, ...], wait_s: float) -> None:
        for index in order:
            request, gate = self.arrivals[index]
            _open(gate)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.script.done_future(request)), wait_s)


def _open(gate: asyncio.Future[None]) -> None:
    if not gate.done():
        gate.set_result(None)


class FaultScript:
    """The scripted faults of one lease, and the state their firings share (the app's RequestHooks)."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self.rules: list[ScriptedFault] = []
        self.note = note
        self.holds: dict[RequestContext, asyncio.Future[Release]] = {}
        self.dropped_shapes: dict[str, SessionLossShape] = {}
        self.undelivered: set[RequestContext] = set()
        self.executions: list[ToolExecution] = []
        self._after: dict[RequestContext, list[Callable[[], Awaitable[None]]]] = {}
        self._answered: set[RequestContext] = set()
        self._done: dict[RequestContext, asyncio.Future[None]] = {}
        self._barriers: dict[ScriptedFault, _BarrierGroup] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, rule: ScriptedFault) -> None:
        self.rules = [*self.rules, rule]

    def remove(self, rule: ScriptedFault) -> None:
        self.rules = [r for r in self.rules if r is not rule]

    # --- the hooks ----------------------------------------------------------------------------

    async def before(self, request: RequestContext, app: FakeMCPApp) -> None:
        if await self._answer_dropped(request):
            return
        for rule in self.rules:
            if not rule.faults or not rule.matcher.matches(request):
                continue
            hit = Hit(request, app, self, rule)
            if not rule.faults[0].fires(hit):
                continue
            index = rule.count_seen()
            if not rule.schedule.covers(index):
                continue
            if request.response_started:
                rule.skipped.append(request.seq)
                continue
            rule.record_fired(request)
            for fault in rule.faults:
                await fault.apply(hit)
                if request.response_started:
                    self._answered.add(request)
                    break

    async def after(self, request: RequestContext, app: FakeMCPApp) -> None:
        for callback in self._after.pop(request, []):
            await callback()
        self._keep_ledger(request, app)
        done = self._done.pop(request, None)
        if done is not None and not done.done():
            done.set_result(None)
        self.undelivered.discard(request)
        self._answered.discard(request)

    async def _answer_dropped(self, request: RequestContext) -> bool:
        """A session dropped with a shape answers with that shape from then on."""
        session_id = request.session_id
        if session_id is None or session_id not in self.dropped_shapes:
            return False
        if request.session is not None and request.session.live:
            return False
        shape = self.dropped_shapes[session_id]
        request.faults.append(f"session {session_id[:8]} was dropped: answered {shape}")
        await answer_with_shape(request, shape)
        self._answered.add(request)
        return True

    # --- what faults share ----------------------------------------------------------------------

    def on_answered(self, request: RequestContext, callback: Callable[[], Awaitable[None]]) -> None:
        self._after.setdefault(request, []).append(callback)

    def done_future(self, request: RequestContext) -> asyncio.Future[None]:
        """Resolved once the fake has finished answering ``request`` (its ``after`` hook ran)."""
        future = self._done.get(request)
        if future is None:
            future = self._done[request] = asyncio.get_running_loop().create_future()
        return future

    def spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def barrier(self, hit: Hit, parties: int, order: tuple[int, ...] | None, wait_s: float) -> None:
        rule = hit.rule
        if not isinstance(rule, ScriptedFault):  # pragma: no cover - every Hit comes from a ScriptedFault
            raise TypeError(rule)
        group = self._barriers.get(rule)
        if group is None or group.released or group.loop is not asyncio.get_running_loop():
            group = self._barriers[rule] = _BarrierGroup(self, rule, parties, order)
        gate = group.arrive(hit.request, wait_s)
        end = await hit.hold(gate)
        if isinstance(end, Release):
            await hit.give_up(end)
        elif end == "disconnected":
            hit.request.end_without_answer(Outcome.DISCONNECTED)

    def release_all(self, release: Release) -> list[RequestContext]:
        """Let every held request go (on the server loop); returns them."""
        held = list(self.holds)
        for future in list(self.holds.values()):
            if not future.done():
                future.set_result(release)
        return held

    # --- the ledger -----------------------------------------------------------------------------

    def _keep_ledger(self, request: RequestContext, app: FakeMCPApp) -> None:
        incoming = request.incoming
        if incoming is None or incoming.method != "tools/call" or not incoming.is_request:
            return
        name = incoming.params.get("name")
        if request in self._answered or not isinstance(name, str) or name not in app.catalog.tools:
            return
        undelivered = request in self.undelivered
        if not undelivered and not any(_answers(m, incoming.id) for m in request.response_messages):
            return  # the handler never ran: refused, cut before it, or the client left first
        session = request.session
        if app.options.server_flavour is Flavour.MCP1 and session is not None and not session.initialized:
            return  # 1.x answers -32602 on a never-initialized session without running anything
        arguments = incoming.params.get("arguments")
        self.executions.append(
            ToolExecution(
                tool=name,
                arguments=dict(arguments) if isinstance(arguments, dict) else {},
                session_id=request.session_id,
                seq=request.seq,
                delivered=not undelivered,
            )
        )

    # --- teardown -------------------------------------------------------------------------------

    def problems(self, *, unfired: bool) -> list[ScriptedFault]:
        """Scripted faults that did not do what the test scripted (unfired ones only if ``unfired``)."""
        return [rule for rule in self.rules if rule.problem(unfired=unfired) is not None]


def _answers(message: JSONObject, request_id: Any) -> bool:
    return message.get("id") == request_id and "method" not in message and ("result" in message or "error" in message)
