"""FaultControls: the test's side of faults, the object ``FakeMCPServer`` holds and delegates to.

One is made per lease (``FakeMCPServer._reset()``): it installs a fresh :class:`FaultRunner` as the
app's hooks, scripts faults into it (``on(...)`` and the server policies), runs the outages
(drop, restart, ``sessions_expired()``, ``down()``), jumps the idle clock, reads the ledger and, at
teardown, releases what is still held and verifies the script. Whatever touches the app's state runs
on the server loop (``Serving.call``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._fake._gate import Gate
from .._fake._shapes import SessionLossShape
from .._record._journal import Outcome
from .._record._sessions import EndReason
from .._wire._errors import LifecycleError, ScriptError, VerificationError
from ._fault import Release
from ._instead import SessionCap, StrictInitialize
from ._match import ANY, RequestMatcher
from ._rule import ScriptedFault
from ._runner import FaultRunner

if TYPE_CHECKING:
    from .._fake._app import FakeMCPApp
    from .._fake._handlers import ToolExecution
    from .._fake._request import RequestContext
    from .._record._journal import Exchange
    from .._wire._types import SessionId

__all__ = ["FaultControls", "Serving"]

T = TypeVar("T")
_DRAIN_TIMEOUT = 5.0
_TEARDOWN = Release(outcome=Outcome.RELEASED, reset=True, why="released at teardown, never answered")
_ENDED = Release(outcome=Outcome.CUT, reset=False, why="still in flight when the test ended: connection closed")
_FAULTS_DOC = "docs/faults.md#unfired-faults"


class Serving(Protocol):
    """What the controls need of whatever serves the app (the listener): its loop, a way onto it, stop/start."""

    loop: asyncio.AbstractEventLoop | None
    port: int

    @property
    def running(self) -> bool: ...

    def call(self, fn: Callable[[], T], *, timeout: float = ...) -> T: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class FaultControls:
    """The faults of one lease, as the test drives them: scripting, outages, the ledger, teardown."""

    def __init__(self, app: FakeMCPApp, serving: Serving, *, bound: bool = False, inline: bool = False) -> None:
        self._app = app
        self._serving = serving
        self._runner = runner = FaultRunner(app)
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None
        """When this lease's ``hold_timeout`` ends (loop clock); its timer is set when the first fault is scripted."""
        self.cut_at_bound: list[int] = []
        """The exchanges (``seq``) a fault still held at ``hold_timeout``, whose connections were reset."""
        if bound:
            self.arm()
        if inline:  # the caller is on the server loop, or the server is quiet (nothing in flight, no connection)
            app.hooks = runner
        else:
            serving.call(lambda: setattr(app, "hooks", runner))

    # Only a scripted fault holds a request, so the hold_timeout timer is set with the first one: a lease
    # that scripts nothing never wakes the server loop for it (issue 11).

    def arm(self) -> None:
        """Start this lease's ``hold_timeout`` bound now (its timer waits for the first scripted fault)."""
        limit, loop = self._app.options.hold_timeout, self._serving.loop
        # loop.time() only reads the loop's clock: safe from the test's thread.
        self._deadline = None if limit is None or loop is None else loop.time() + limit

    def _ensure_timer(self) -> None:
        """On the server loop: set the hold_timeout timer for this lease's deadline, once."""
        deadline, limit = self._deadline, self._app.options.hold_timeout
        if deadline is None or limit is None or self._timer is not None:
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # served in-process, scripted from outside its loop: bound on that loop if it has one
            loop = self._serving.loop
        if loop is not None and not loop.is_closed():
            self._timer = loop.call_at(deadline, self._cut_held, limit)

    def _cut_held(self, limit: float) -> None:
        """The per-test bound: reset the connection of every request a fault still holds (on the server loop)."""
        if self._app.hooks is not self._runner:
            return  # a later lease's
        why = f"still held at hold_timeout={limit:g}s: connection reset"
        release = Release(outcome=Outcome.RESET, reset=True, why=why)
        held = self._runner.release_held(release)
        if held:
            self.cut_at_bound.extend(request.seq for request in held)
            self._app.journal.note(f"hold_timeout={limit:g}s: reset {len(held)} held request(s)")

        def hold_past_bound(request: RequestContext) -> Release:
            # A request a fault begins to hold after the bound (it arrived late, e.g. on a loaded machine).
            self.cut_at_bound.append(request.seq)
            self._app.journal.note(f"hold_timeout={limit:g}s: reset 1 held request(s)")
            return release

        self._runner.past_bound = hold_past_bound

    # --- scripting ------------------------------------------------------------------------------------

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
        era: str | Any = ANY,
    ) -> ScriptedFault:
        """Script a fault on requests matching every given field (see ``FakeMCPServer.on``)."""
        matcher = RequestMatcher(
            method=method,
            tool=tool,
            target=target,
            arguments=arguments,
            session_id=session_id,
            has_session=has_session,
            http_method=http_method,
            era=era,
        )
        rule = ScriptedFault(matcher, served=self._app.options)
        return self._script(rule)

    def _script(self, rule: ScriptedFault) -> ScriptedFault:
        runner = self._runner

        def add() -> None:
            self._ensure_timer()
            runner.add(rule)

        self._serving.call(add)
        return rule

    def _unscript(self, rule: ScriptedFault) -> None:
        runner = self._runner
        self._serving.call(lambda: runner.remove(rule))

    def gate(self, name: str = "gate") -> Gate:
        return Gate(name)

    def cap_sessions(
        self, limit: int, *, shape: SessionLossShape = SessionLossShape.TOO_MANY_SESSIONS
    ) -> ScriptedFault:
        if not isinstance(limit, int) or limit < 1:
            raise ScriptError(f"cap_sessions(limit={limit!r}) must be an int >= 1")
        rule = ScriptedFault(RequestMatcher(has_session=False), optional=True).always()
        rule.faults = (SessionCap(limit=limit, shape=shape),)
        return self._script(rule)

    def strict_initialize(self) -> ScriptedFault:
        rule = ScriptedFault(RequestMatcher(method="initialize", has_session=True), optional=True).always()
        rule.faults = (StrictInitialize(),)
        return self._script(rule)

    @property
    def scripted_faults(self) -> tuple[ScriptedFault, ...]:
        return tuple(self._runner.rules)

    # --- outages ----------------------------------------------------------------------------------------

    def drop_session(self, session_id: SessionId | None, shape: SessionLossShape | None) -> list[SessionId]:
        runner = self._runner
        dropped = self._serving.call(lambda: runner.drop_sessions(session_id, EndReason.DROPPED, shape))
        target = "every live session" if session_id is None else session_id[:8]
        answer = f"; they answer {shape}" if shape is not None else ""
        self._app.journal.note(f"drop_session({target}) -> dropped {[s[:8] for s in dropped]}{answer}")
        return dropped

    def restart(self, shape: SessionLossShape | None) -> None:
        runner = self._runner
        release = Release(outcome=Outcome.CUT, reset=False, why="restart() ended this exchange")

        def run() -> tuple[list[str], int]:
            return runner.drop_sessions(None, EndReason.RESTART, shape), len(runner.end_in_flight(release))

        dropped, ended = self._serving.call(run)
        self._app.journal.note(f"restart() -> forgot sessions {[s[:8] for s in dropped]}; ended {ended} exchange(s)")

    @contextlib.contextmanager
    def sessions_expired(self, shape: SessionLossShape | None) -> Iterator[None]:
        rule = self._script(
            ScriptedFault(RequestMatcher(has_session=True), optional=True).always().drop_session(shape=shape)
        )
        self._outage_note("sessions_expired() began", shape)
        try:
            yield
        finally:
            self._unscript(rule)
            self._outage_note("sessions_expired() ended", shape)

    def _outage_note(self, what: str, shape: SessionLossShape | None) -> None:
        runner = self._runner
        dropped = self._serving.call(lambda: runner.drop_sessions(None, EndReason.DROPPED, shape))
        answer = f"; they answer {shape}" if shape is not None else ""
        self._app.journal.note(f"{what}: dropped {[d[:8] for d in dropped]}{answer}")

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        runner, serving = self._runner, self._serving
        release = Release(outcome=Outcome.RESET, reset=True, why="down(): the server went away")
        ended = len(serving.call(lambda: runner.end_in_flight(release)))
        serving.stop()
        dropped = runner.drop_sessions(None, EndReason.RESTART, None)
        self._app.journal.note(
            f"down(): port {serving.port} closed; {ended} exchange(s) reset; sessions "
            f"{[d[:8] for d in dropped]} forgotten"
        )
        try:
            yield
        finally:
            serving.start()
            self._app.journal.note(f"down() ended: up again on port {serving.port}, no sessions")

    @contextlib.contextmanager
    def latency(self, seconds: float, **match: Any) -> Iterator[ScriptedFault]:
        rule = self.on(**match).always().optional().delay(seconds)
        try:
            yield rule
        finally:
            self._unscript(rule)

    def advance_idle_clock(self, seconds: float, *, include_streaming: bool) -> list[SessionId]:
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

        loop = self._serving.loop
        if loop is None or not self._serving.running:  # pragma: no cover - the fixture's fake is running
            raise LifecycleError("advance_idle_clock() needs a running fake (not inside down())")
        expired = asyncio.run_coroutine_threadsafe(run(), loop).result(_DRAIN_TIMEOUT + 1)
        app.journal.note(f"advance_idle_clock({seconds:g}s) -> expired {[e[:8] for e in expired]}")
        return expired

    # --- the side-effect ledger -------------------------------------------------------------------------

    def executions(self, tool: str | Any, arguments: Mapping[str, Any] | Any) -> list[ToolExecution]:
        return [
            e
            for e in self._app.handlers.ledger.runs()
            if (tool is ANY or e.tool == tool) and (arguments is ANY or dict(e.arguments) == dict(arguments))
        ]

    # --- teardown ---------------------------------------------------------------------------------------

    def release_held(self, *, end_all: bool = False) -> None:
        """Let every request a fault holds go (``Outcome.RELEASED``), with ``end_all`` close every other
        request still in flight too, and wait until the fake is done with them, so none ends in the next test."""
        serving, runner, app = self._serving, self._runner, self._app
        self._deadline = None
        if not serving.running:
            self._cancel_timer()
            return
        if not app.requests:
            # Nothing in flight, so nothing held (the usual teardown): no trip to the server loop.
            loop = serving.loop
            if self._timer is not None and loop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._cancel_timer)
            return

        def release() -> list[RequestContext]:
            self._cancel_timer()
            if end_all:
                return runner.end_in_flight(_ENDED, held=_TEARDOWN)
            return runner.release_held(_TEARDOWN)

        ended = serving.call(release)
        loop = serving.loop
        if ended and loop is not None:
            future = asyncio.run_coroutine_threadsafe(_drain(app, ended), loop)
            with contextlib.suppress(Exception):
                future.result(_DRAIN_TIMEOUT + 1)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def excuse_unfired(self) -> None:
        """The test was skipped (or xfailed): what it scripted and never reached is no failure of the client."""
        for rule in self._runner.rules:
            rule.is_optional = True

    def verify(self) -> None:
        """Raise if a fault held a request past ``hold_timeout``, or did not do what the test scripted."""
        __tracebackhide__ = True
        app = self._app
        if self.cut_at_bound:
            from .._record._report import render_held_past_bound

            raise VerificationError(
                render_held_past_bound(
                    self.cut_at_bound, app.options.hold_timeout or 0.0, app.journal.exchanges, app.journal.events
                )
            )
        problems = self._runner.problems(unfired=app.options.assert_all_faults_fired)
        if not problems:
            return
        from .._record._report import render_unfired_faults

        exchanges = app.journal.exchanges
        misses = {rule: _near_misses(rule, exchanges) for rule in problems}
        text = render_unfired_faults(
            [(rule._problem(unfired=True) or str(rule), [line for line, _ in misses[rule]]) for rule in problems],
            exchanges,
            app.journal.events,
            hint=_unfired_hint(problems, misses, exchanges),
        )
        raise VerificationError(text)


async def _drain(app: FakeMCPApp, requests: Iterable[RequestContext]) -> None:
    """Wait (bounded) until the fake has finished with ``requests``, so none ends in the next test."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _DRAIN_TIMEOUT
    pending = set(requests)
    while pending & app.requests and loop.time() < deadline:  # noqa: ASYNC110 - app.requests is a plain set
        await asyncio.sleep(0.001)


def _near_misses(
    rule: ScriptedFault, exchanges: Iterable[Exchange], limit: int = 3
) -> list[tuple[str, list[tuple[str, Any, Any]]]]:
    """The exchanges closest to matching ``rule``, each as a line saying how it differs, with the differences."""
    scored = []
    for exchange in exchanges:
        diffs = rule.matcher.difference(exchange)
        if diffs:
            scored.append((len(diffs), exchange.seq, exchange, diffs))
    scored.sort(key=lambda item: (item[0], item[1]))
    lines = []
    for _, _, exchange, diffs in scored[:limit]:
        differs = "; ".join(f"{name} {actual!r} != {expected!r}" for name, actual, expected in diffs)
        lines.append((f"{exchange}   differs: {differs}", list(diffs)))
    return lines


def _unfired_hint(
    problems: list[ScriptedFault],
    misses: Mapping[ScriptedFault, list[tuple[str, list[tuple[str, Any, Any]]]]],
    exchanges: tuple[Exchange, ...],
) -> str:
    """One hint, chosen by what happened to the first problem: a barrier short of parties, a near miss by one
    field, requests taken by an earlier fault, no traffic at all, or simply no matching request."""
    rule = problems[0]
    opt_out = (
        "call .optional() on a fault that may not fire, or set "
        f"@pytest.mark.fake_mcp_server(assert_all_faults_fired=False) (see {_FAULTS_DOC})."
    )
    if any("requests arrived" in failure for failure in rule.failures):  # a barrier short of its parties
        return (
            "fewer requests reached the barrier than its parties: the client sent them one after another (a lock "
            "held across the call?) or sent fewer; send them together, or lower barrier(k)."
        )
    if not exchanges:
        return "no request reached the fake at all: is the client pointed at fake_mcp_server.url?"
    if rule.skipped:
        return "the matching requests were answered by a fault scripted before this one: script this one first."
    closest = misses.get(rule, [])
    if closest and len(closest[0][1]) == 1 and closest[0][1][0][0] not in ("method", "http_method"):
        name, actual, expected = closest[0][1][0]  # another method is another request, not a near miss
        return (
            f"the closest request differs only in {name}: {actual!r}, not {expected!r}. Fix on(...{name}=...) if "
            f"that request is the one you meant, or find why the client sent {actual!r}; {opt_out}"
        )
    return opt_out
