"""FaultScripting: the fault-scripting half of :class:`FakeMCPServer` (``on(...)``, outages, idle clock, ledger).

Kept apart from ``_server.py`` so the server module stays about running and querying the fake.
Everything that touches the app's state runs on the server loop (``Listener.call``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._answers import SessionCap, StrictInitialize
from ._errors import LifecycleError, ScriptError, VerificationError
from ._faults import Release
from ._gate import Gate
from ._journal import Outcome
from ._matchers import ANY, RequestMatcher
from ._script import FaultScript, ToolExecution
from ._scripted_fault import ScriptedFault
from ._sessions import EndReason
from ._shapes import SessionLossShape

if TYPE_CHECKING:
    from ._app import FakeMCPApp
    from ._listener import Listener
    from ._request import RequestContext
    from ._types import SessionId

__all__ = ["FaultScripting", "apply_fault_marker"]

_DRAIN_TIMEOUT = 5.0
_TEARDOWN = Release(outcome=Outcome.RELEASED, reset=True, why="released at teardown, never answered")
_ENDED = Release(outcome=Outcome.CUT, reset=False, why="still in flight when the test ended: connection closed")
_FAULTS_DOC = "docs/faults.md#unfired-faults"


class FaultScripting:
    """Fault scripting on a running fake; mixed into :class:`FakeMCPServer`."""

    _app: FakeMCPApp
    _listener: Listener

    # --- scripting --------------------------------------------------------------------------------

    def on(
        self,
        method: str | Any = ANY,
        *,
        tool: str | Any = ANY,
        target: str | Any = ANY,
        arguments: Mapping[str, Any] | Any = ANY,
        session_id: SessionId | Any | None = ANY,
        has_session: bool | Any = ANY,
        http_method: str | Any = ANY,
    ) -> ScriptedFault:
        """Script a fault on requests matching every given field; chain counting and an action.

        ``method`` is the JSON-RPC method (``"tools/call"``); ``tool`` the tool it calls;
        ``target`` a prompt name or resource URI; ``arguments`` tool arguments that must be present;
        ``session_id`` the ``Mcp-Session-Id`` sent (None: none); ``has_session`` whether one is sent;
        ``http_method`` ``"GET"`` (the standalone stream) or ``"DELETE"``. A fault fires once unless
        counted otherwise, and fails the test at teardown if it never fired (``.optional()`` to allow).

        Raises:
            ScriptError: for a typo in a method name, a tool on another method, ...

        Example::

            fake_mcp_server.on("initialize").delay(0.5).once()
            fake_mcp_server.on("tools/call", tool="search").nth(2).respond(503)
            fake_mcp_server.on(http_method="GET").respond(405)
        """
        matcher = RequestMatcher(
            method=method,
            tool=tool,
            target=target,
            arguments=arguments,
            session_id=session_id,
            has_session=has_session,
            http_method=http_method,
        )
        return self._script_fault(ScriptedFault(matcher))

    def _script_fault(self, rule: ScriptedFault) -> ScriptedFault:
        script = self._fault_script
        self._listener.call(lambda: script.add(rule))
        return rule

    def gate(self, name: str = "gate") -> Gate:
        """A :class:`Gate` for ``delay(until=...)``: requests wait at it until ``gate.open()``."""
        return Gate(name)

    def cap_sessions(
        self, limit: int, *, shape: SessionLossShape = SessionLossShape.TOO_MANY_SESSIONS
    ) -> ScriptedFault:
        """Refuse new sessions while ``limit`` are live: 503 ``Too many open sessions`` (2.x SDK), or
        ``shape=SessionLossShape.ALREADY_INITIALIZED`` as single-session servers answer. A server
        policy: optional, so it does not fail a test that never reaches the cap."""
        if not isinstance(limit, int) or limit < 1:
            raise ScriptError(f"cap_sessions(limit={limit!r}) must be an int >= 1")
        rule = ScriptedFault(RequestMatcher(has_session=False), optional=True).always()
        rule.faults = (SessionCap(limit=limit, shape=shape),)
        return self._script_fault(rule)

    def strict_initialize(self) -> ScriptedFault:
        """Refuse every ``initialize`` that carries ``Mcp-Session-Id``, as strict servers do: 400
        ``-32600 "Invalid Request: Server already initialized"`` on a live session, 400 otherwise.
        A server policy: optional (a good client never triggers it)."""
        rule = ScriptedFault(RequestMatcher(method="initialize", has_session=True), optional=True).always()
        rule.faults = (StrictInitialize(),)
        return self._script_fault(rule)

    @property
    def scripted_faults(self) -> tuple[ScriptedFault, ...]:
        """Every fault scripted in this test, in order."""
        return tuple(self._fault_script.rules)

    # --- outages ------------------------------------------------------------------------------------

    def _drop(self, session_id: SessionId | None, reason: EndReason, shape: SessionLossShape | None) -> list[str]:
        """On the server loop: end sessions; with a shape, their ids answer with it from then on."""
        dropped = self._app.drop_session(session_id, reason)
        if shape is not None:
            for dropped_id in dropped:
                self._fault_script.dropped_shapes[dropped_id] = shape
        return dropped

    def _end_in_flight(self, release: Release) -> int:
        """On the server loop: let held requests go and close every other request's connection."""
        held = set(self._fault_script.release_all(release))
        ended = 0
        for request in list(self._app.requests):
            if request in held or request.response_finished:
                continue
            _close_now(request, release)
            ended += 1
        return ended + len(held)

    @contextlib.contextmanager
    def sessions_expired(self, shape: SessionLossShape | None = None) -> Iterator[None]:
        """Inside the block every session is gone: live ones are dropped and each session-bearing request
        (new sessions' too) meets the "unknown session" answer; sessions live at the end are dropped too.

        Example::

            with fake_mcp_server.sessions_expired():
                with pytest.raises(MCPError):
                    await session.call_tool("echo", {"text": "a"})
        """
        rule = ScriptedFault(RequestMatcher(has_session=True), optional=True).always().drop_session(shape=shape)
        self._script_fault(rule)
        self._outage_note("sessions_expired() began", shape)
        try:
            yield
        finally:
            script = self._fault_script
            self._listener.call(lambda: script.remove(rule))
            self._outage_note("sessions_expired() ended", shape)

    def _outage_note(self, what: str, shape: SessionLossShape | None) -> None:
        dropped = self._listener.call(lambda: self._drop(None, EndReason.DROPPED, shape))
        answer = f"; they answer {shape}" if shape is not None else ""
        self._app.journal.note(f"{what}: dropped {[d[:8] for d in dropped]}{answer}")

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Inside the block the server is down: connections are refused. It comes back on the same port
        (same URL) with an empty session table; connections open when it went down are reset.

        Example::

            with fake_mcp_server.down():
                with pytest.raises(Exception):   # httpx.ConnectError inside the SDK's error
                    await connect(fake_mcp_server.url)
            await connect(fake_mcp_server.url)   # up again
        """
        release = Release(outcome=Outcome.RESET, reset=True, why="down(): the server went away")
        ended = self._listener.call(lambda: self._end_in_flight(release))
        self._listener.stop()
        dropped = self._drop(None, EndReason.RESTART, None)
        self._app.journal.note(
            f"down(): port {self._listener.port} closed; {ended} exchange(s) reset; sessions "
            f"{[d[:8] for d in dropped]} forgotten"
        )
        try:
            yield
        finally:
            self._listener.start()
            self._app.journal.note(f"down() ended: up again on port {self._listener.port}, no sessions")

    @contextlib.contextmanager
    def latency(self, seconds: float, **match: Any) -> Iterator[ScriptedFault]:
        """Inside the block every request matching ``match`` (see :meth:`on`) waits ``seconds`` first.

        Example::

            with fake_mcp_server.latency(0.2, method="tools/call"):
                ...
        """
        rule = self.on(**match).always().optional().delay(seconds)
        try:
            yield rule
        finally:
            script = self._fault_script
            self._listener.call(lambda: script.remove(rule))

    def advance_idle_clock(self, seconds: float, *, include_streaming: bool = False) -> list[SessionId]:
        """Let ``seconds`` of idleness pass for every live session, at once (no real waiting).

        Sessions idle longer than ``idle_timeout`` (marker option; 1800 s for mcp2) expire with
        ``EndReason.IDLE`` and answer 404. As in the SDK, a session with its GET stream open does not
        idle out unless ``include_streaming`` (servers whose timer ignores streams; the stream ends).

        Returns the expired ids. Example::

            @pytest.mark.fake_mcp_server(idle_timeout=60)
            def test_idle(fake_mcp_server): ... fake_mcp_server.advance_idle_clock(61)
        """
        if not isinstance(seconds, int | float) or seconds < 0:
            raise ScriptError(f"advance_idle_clock(seconds={seconds!r}) must be a number >= 0")
        limit = self._app.options.idle_limit
        if limit is None:
            raise ScriptError(
                "advance_idle_clock(): this fake has no idle timeout (idle_timeout=None, the mcp1 default); "
                "set one with @pytest.mark.fake_mcp_server(idle_timeout=60)"
            )
        app = self._app

        async def run() -> list[SessionId]:
            # An answer the client has read may still be finishing on the fake, about to stamp its session
            # active "now": let it finish first, so the activity is dated before the jump.
            await _drain(app, [r for r in app.requests if r.response_finished])
            now = app.now()
            expired: list[SessionId] = []
            for session in app.sessions.live():
                session.last_activity -= seconds
                if (include_streaming or not session.get_stream_open) and now - session.last_activity > limit:
                    session.end(EndReason.IDLE, session.last_activity + limit)
                    expired.append(session.id)
            return expired

        loop = self._listener.loop
        if loop is None or not self._listener.running:  # pragma: no cover - the fixture's fake is running
            raise LifecycleError("advance_idle_clock() needs a running fake (not inside down())")
        expired = asyncio.run_coroutine_threadsafe(run(), loop).result(_DRAIN_TIMEOUT + 1)
        app.journal.note(f"advance_idle_clock({seconds:g}s) -> expired {[e[:8] for e in expired]}")
        return expired

    # --- the side-effect ledger ---------------------------------------------------------------------

    def executions(self, tool: str | Any = ANY, arguments: Mapping[str, Any] | Any = ANY) -> list[ToolExecution]:
        """Every run of a tool handler in this test, filtered by tool and exact arguments.

        Example::

            assert len(fake_mcp_server.executions("charge", {"amount": 5})) == 1
        """
        return [
            e
            for e in list(self._fault_script.executions)
            if (tool is ANY or e.tool == tool) and (arguments is ANY or dict(e.arguments) == dict(arguments))
        ]

    # --- lease lifecycle ---------------------------------------------------------------------------

    @property
    def _fault_script(self) -> FaultScript:
        hooks = self._app.hooks
        if not isinstance(hooks, FaultScript):
            hooks = FaultScript(self._app.journal.note)
            self._app.hooks = hooks
        return hooks

    def _new_fault_script(self) -> None:
        """Install a fresh script (per lease: nothing scripted leaks into the next test)."""
        app = self._app
        self._listener.call(lambda: setattr(app, "hooks", FaultScript(app.journal.note)))

    def _release_held(self, *, end_all: bool = False) -> None:
        """Let every request a fault holds go (``Outcome.RELEASED``), with ``end_all`` close every other
        request still in flight too, and wait until the fake is done with them, so none ends in the next test."""
        if not self._listener.running:
            return
        script = self._fault_script
        app = self._app

        def release() -> list[RequestContext]:
            held = script.release_all(_TEARDOWN)
            if not end_all:
                return held
            others = [r for r in app.requests if r not in held and not r.response_finished]
            for request in others:
                _close_now(request, _ENDED)
            return [*held, *others]

        ended = self._listener.call(release)
        loop = self._listener.loop
        if ended and loop is not None:
            future = asyncio.run_coroutine_threadsafe(_drain(app, ended), loop)
            with contextlib.suppress(Exception):
                future.result(_DRAIN_TIMEOUT + 1)

    def _verify_faults(self) -> None:
        """Raise if a scripted fault did not do what the test scripted."""
        __tracebackhide__ = True
        if not isinstance(self._app.hooks, FaultScript):
            return
        problems = self._app.hooks.problems(unfired=self._app.options.assert_all_faults_fired)
        if not problems:
            return
        from ._report import render_unfired_faults

        exchanges = self._app.journal.exchanges
        text = render_unfired_faults(
            [(rule.problem(unfired=True) or str(rule), _near_misses(rule, exchanges)) for rule in problems],
            exchanges,
            self._app.journal.events,
            hint=(
                "call .optional() on a fault that may not fire, or set "
                f"@pytest.mark.fake_mcp_server(assert_all_faults_fired=False) (see {_FAULTS_DOC})."
            ),
        )
        raise VerificationError(text)


def _close_now(request: RequestContext, release: Release) -> None:
    if request.outcome is Outcome.IN_FLIGHT:
        request.outcome = Outcome.RESET if release.reset else Outcome.CUT
    request.faults.append(release.why)
    transport = request.transport
    if transport is not None and not transport.is_closing():
        if release.reset:
            request.abort_connection()
        else:
            transport.close()


async def _drain(app: FakeMCPApp, requests: Iterable[RequestContext]) -> None:
    """Wait (bounded) until the fake has finished with ``requests``, so none ends in the next test."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _DRAIN_TIMEOUT
    pending = set(requests)
    while pending & app.requests and loop.time() < deadline:  # noqa: ASYNC110 - app.requests is a plain set
        await asyncio.sleep(0.001)


def _near_misses(rule: ScriptedFault, exchanges: Iterable[Any], limit: int = 3) -> list[str]:
    """The exchanges closest to matching ``rule``, each with how it differs."""
    scored = []
    for exchange in exchanges:
        diffs = rule.matcher.difference(exchange)
        if diffs:
            scored.append((len(diffs), exchange.seq, exchange, diffs))
    scored.sort(key=lambda item: (item[0], item[1]))
    lines = []
    for _, _, exchange, diffs in scored[:limit]:
        differs = "; ".join(f"{name} {actual!r} != {expected!r}" for name, actual, expected in diffs)
        lines.append(f"{exchange}   differs: {differs}")
    return lines


_ACTIONS = (
    "delay", "hang", "barrier", "respond", "drop_session", "reset_connection", "close_connection",
    "cut_stream", "end_stream", "hold_stream", "malformed", "bogus_session_id",
)  # fmt: skip
_COUNTS = ("once", "times", "nth", "after", "always", "optional")


def apply_fault_marker(server: FaultScripting, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> ScriptedFault:
    """Script one ``@pytest.mark.fake_mcp_fault(method, *, <match>, <count>, <action>=value)``.

    An action's value is its argument (``respond=503``, ``delay=0.5``), a dict of keyword
    arguments (``cut_stream={"after_call": True}``) or True for none (``hang=True``).
    """
    if len(args) > 1:
        raise ScriptError(f"@pytest.mark.fake_mcp_fault takes at most one positional (the method), got {args!r}")
    match = {k: v for k, v in kwargs.items() if k not in _ACTIONS and k not in _COUNTS}
    try:
        rule = server.on(*args, **match)
    except TypeError as exc:
        raise ScriptError(
            f"@pytest.mark.fake_mcp_fault: {exc}; actions are {', '.join(_ACTIONS)}; counts are {', '.join(_COUNTS)}"
        ) from None
    for name, value in kwargs.items():
        if name in match:
            continue
        method = getattr(rule, name)
        if value is False:
            continue
        if value is True:
            method()
        elif isinstance(value, Mapping):
            method(**value)
        else:
            method(value)
    if not rule.faults:
        raise ScriptError(f"@pytest.mark.fake_mcp_fault{args!r}: give an action, one of {', '.join(_ACTIONS)}")
    return rule
