"""ScriptedFault: one line of a fault script, built fluently from ``fake_mcp_server.on(...)``.

A scripted fault is *which* requests (a :class:`RequestMatcher`), *which of them* (a
:class:`Window`: once by default; ``.times(n)``, ``.nth(n)``, ``.after(n)``, ``.always()``) and
*what happens* (one or more fault records, applied in order). Counting and actions chain in any
order::

    fake_mcp_server.on("initialize").delay(0.5).once()
    fake_mcp_server.on("tools/call", tool="search").nth(2).respond(503)
    fake_mcp_server.on("tools/call").after(1).drop_session()   # answer the 1st call; the 2nd finds its session gone

The builder is the one list of actions and counts: each is a method marked ``@action_step`` or
``@count_step``, and the ``fake_mcp_fault`` marker's parsing and ``--markers`` help (``_marker``) are
derived from them, so a new action is one method here (and its fault record).

Past the soft size cap on purpose: each builder method is a public docstring, an argument check and one
record, and the window stays beside the rule that counts with it (a module of its own adds a hop per firing).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar

from .._fake._gate import Gate
from .._fake._shapes import SessionLossShape
from .._wire._errors import ScriptError
from ._auth import Challenge, DelayRefresh, ExpireTokens, RefuseRefresh, RefuseRegistration, StepUp
from ._before import Barrier, CacheHintFault, Delay, DiscoverVersions, DropSession, SwitchEra
from ._fault import Fault
from ._instead import (
    CloseConnection,
    CutStream,
    EndStream,
    Hang,
    HoldStream,
    RefuseInitialize,
    Reset,
    Respond,
    RespondShape,
)
from ._resume import CutAfterEvents, PartialReplay, refusal
from ._streaming import BadJSON, BogusSessionId, CutStreamAfterCall, EventDelay, Truncate, WrongContentType, WrongId

if TYPE_CHECKING:
    from .._wire._options import FakeMCPOptions
    from ._fault import Firing
    from ._match import RequestMatcher

__all__ = ["MALFORMED_KINDS", "ScriptedFault", "Window", "action_step", "count_step", "steps_of"]

MALFORMED_KINDS: dict[str, type[Fault]] = {
    "bad-json": BadJSON,
    "wrong-id": WrongId,
    "wrong-content-type": WrongContentType,
    "truncated": Truncate,
}
_DEFAULT: Any = object()


P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])
_STEP = "__fault_marker_step__"


def _scripting(
    method: Callable[Concatenate[ScriptedFault, P], ScriptedFault],
) -> Callable[Concatenate[ScriptedFault, P], ScriptedFault]:
    """A builder step: a ScriptError abandons the half-built fault (the test already failed at that line)."""

    @functools.wraps(method)
    def step(self: ScriptedFault, /, *args: P.args, **kwargs: P.kwargs) -> ScriptedFault:
        try:
            return method(self, *args, **kwargs)
        except ScriptError:
            self.faults = ()
            self.is_optional = True
            raise

    return step


def _step(kind: Literal["action", "count"]) -> Callable[[F], F]:
    """Mark a builder method as a marker step: ``@pytest.mark.fake_mcp_fault(<name>=value)`` calls it."""

    def mark(method: F) -> F:
        setattr(method, _STEP, kind)
        return method

    return mark


action_step = _step("action")
"""Marks a builder method as an action: ``fake_mcp_fault(<name>=value)`` calls it, ``--markers`` lists it."""
count_step = _step("count")
"""Marks a builder method as a count (``once``, ``times``, ...), for the marker likewise."""


def steps_of(builder: type[ScriptedFault], kind: Literal["action", "count"]) -> tuple[str, ...]:
    """The names of ``builder``'s actions (or counts), in the order the class defines them."""
    names: dict[str, None] = {}
    for cls in reversed(builder.__mro__):
        for name, member in vars(cls).items():
            if getattr(member, _STEP, None) == kind:
                names[name] = None
    return tuple(names)


def _at_least(call: str, n: object, low: int, hint: str) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < low:
        raise ScriptError(f"{call} must be an int >= {low}; {hint}")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """Which matching requests a scripted fault fires on: skip the first ``skip``, then ``count`` (None: all)."""

    skip: int = 0
    count: int | None = 1
    nth: bool = False
    explicit: bool = False
    """The test chose the count (else a barrier may set it)."""

    def covers(self, index: int) -> bool:
        """Does the fault fire on the ``index``-th (1-based) matching request?"""
        if index <= self.skip:
            return False
        return self.count is None or index - self.skip <= self.count

    @property
    def required(self) -> int:
        """How many firings make the script done (an ``always`` fault: at least one)."""
        return 1 if self.count is None else self.count

    def __str__(self) -> str:
        if self.nth:
            return f"on the {_ordinal(self.skip + 1)} matching request"
        count = "always" if self.count is None else "once" if self.count == 1 else f"{self.count} times"
        if not self.skip:
            return count
        return f"after {self.skip} matching request{'s' if self.skip > 1 else ''}, {count}"


class ScriptedFault:
    """One scripted fault: returned by ``fake_mcp_server.on(...)``; chain counting and actions on it.

    Only exposed for type hints. ``fired`` and ``seen`` count the requests it acted on and the
    matching requests it saw; ``await fault.wait_fired()`` waits until it acted (no sleeps).
    """

    def __init__(
        self, matcher: RequestMatcher, *, optional: bool = False, served: FakeMCPOptions | None = None
    ) -> None:
        """Private: use ``fake_mcp_server.on(...)``."""
        self.matcher = matcher
        self.window = Window()
        self.faults: tuple[Fault, ...] = ()
        self.is_optional = optional
        self.served = served
        """The options of the server it was scripted on (None: not known, nothing checked against them)."""
        self.seen = 0
        self.fired = 0
        self.fired_on: list[int] = []
        """The ``seq`` of each exchange it acted on."""
        self.failures: list[str] = []
        self.skipped: list[int] = []
        """The ``seq`` of each exchange it was due on that an earlier scripted fault had already answered."""
        self._cond = threading.Condition()

    # --- counting -------------------------------------------------------------------------------

    @count_step
    @_scripting
    def once(self) -> ScriptedFault:
        """Fire on one matching request (the default)."""
        return self._set_window(count=1, nth=False)

    @count_step
    @_scripting
    def times(self, n: int) -> ScriptedFault:
        """Fire on ``n`` matching requests."""
        _at_least(f"times(n={n!r})", n, 1, "to fire on every matching request use .always()")
        return self._set_window(count=n, nth=False)

    @count_step
    @_scripting
    def nth(self, n: int) -> ScriptedFault:
        """Fire on the ``n``-th matching request only (1-based)."""
        _at_least(f"nth(n={n!r})", n, 1, "the first matching request is nth(1)")
        return self._set_window(skip=n - 1, count=1, nth=True)

    @count_step
    @_scripting
    def after(self, n: int) -> ScriptedFault:
        """Let the first ``n`` matching requests through, then fire (once, unless counted otherwise)."""
        _at_least(f"after(n={n!r})", n, 0, "after(0) fires from the first matching request")
        return self._set_window(skip=n, nth=False, explicit=self.window.explicit)

    @count_step
    @_scripting
    def always(self) -> ScriptedFault:
        """Fire on every matching request."""
        return self._set_window(count=None, nth=False)

    @count_step
    def optional(self) -> ScriptedFault:
        """Do not fail the test if this fault never fires."""
        self.is_optional = True
        return self

    def _set_window(self, **changes: Any) -> ScriptedFault:
        changes.setdefault("explicit", True)
        window = replace(self.window, **changes)
        barrier = next((f for f in self.faults if isinstance(f, Barrier)), None)
        if barrier is not None and window.count is not None and window.count % barrier.parties:
            raise ScriptError(
                f"{self}: barrier({barrier.parties}) holds {barrier.parties} requests at a time, "
                f"so it cannot fire {window.count} time(s); use .times({barrier.parties}) or .always()"
            )
        self.window = window
        return self

    # --- actions --------------------------------------------------------------------------------

    @action_step
    @_scripting
    def delay(
        self, seconds: float = 0.0, *, until: Gate | threading.Event | None = None, between_events: bool = False
    ) -> ScriptedFault:
        """Wait ``seconds`` (and/or until ``until`` opens) before the response headers, or before each SSE event.

        The wait is on the server loop: other requests and sessions go on meanwhile.
        """
        if not isinstance(seconds, int | float) or seconds < 0:
            raise ScriptError(f"delay(seconds={seconds!r}) must be a number >= 0; to never answer use .hang()")
        if until is not None and not isinstance(until, Gate | threading.Event):
            hint = " (an asyncio.Event belongs to the test's loop)" if isinstance(until, asyncio.Event) else ""
            raise ScriptError(f"delay(until={until!r}){hint}: use a pytest_fake_mcp.Gate or a threading.Event")
        if not seconds and until is None:
            raise ScriptError("delay() needs seconds > 0 or until=<Gate>; e.g. .delay(0.5)")
        if between_events:
            return self._add(EventDelay(seconds=seconds, until=until))
        return self._add(Delay(seconds=seconds, until=until))

    @action_step
    @_scripting
    def hang(self) -> ScriptedFault:
        """Accept the request and never answer (a black hole); let go at teardown as ``Outcome.RELEASED``."""
        return self._add(Hang())

    @action_step
    @_scripting
    def barrier(self, parties: int, *, order: list[int] | None = None, timeout: float = 5.0) -> ScriptedFault:
        """Hold matching requests until ``parties`` have arrived, then release them together or in ``order``.

        ``order`` lists arrival indices (0-based): ``[1, 0]`` answers the 2nd arrival first, then
        the 1st. If fewer than ``parties`` arrive within ``timeout`` seconds, the ones held are
        released, the journal says so and the test fails at teardown.
        """
        _at_least(f"barrier(parties={parties!r})", parties, 1, "e.g. barrier(2) for two concurrent calls")
        if timeout <= 0:
            raise ScriptError(f"barrier(timeout={timeout!r}) must be > 0 seconds")
        if order is not None and sorted(order) != list(range(parties)):
            raise ScriptError(
                f"barrier(order={order!r}) must list each arrival index 0..{parties - 1} once, e.g. "
                f"{list(range(parties))[::-1]}"
            )
        self._add(Barrier(parties=parties, order=tuple(order) if order is not None else None, timeout=timeout))
        if not self.window.explicit:
            self.window = replace(self.window, count=parties)
        return self._set_window(explicit=self.window.explicit)

    @action_step
    @_scripting
    def respond(
        self,
        status: int | SessionLossShape,
        body: bytes | str | dict[str, Any] | None = _DEFAULT,
        *,
        code: int | None = None,
        message: str | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> ScriptedFault:
        """Answer with ``status`` instead of the fake's answer, or with a :class:`SessionLossShape`.

        By default a status >= 400 carries a JSON-RPC error body as the SDK transport builds it
        (``code`` -32600 for 4xx, -32603 for 5xx; ``message`` the reason phrase). Pass ``body=None``
        for no body, bytes/str for a raw body (``content_type`` defaults to text/plain) or a dict for JSON.
        """
        if isinstance(status, SessionLossShape):
            if body is not _DEFAULT or code is not None or message is not None:
                raise ScriptError(f"respond({status!r}) takes no body, code or message: the shape fixes them")
            return self._add(RespondShape(shape=status))
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise ScriptError(
                f"respond(status={status!r}) must be an HTTP status 100..599 or a SessionLossShape member"
            )
        raw: bytes | dict[str, Any] | None = None
        if isinstance(body, str):
            raw = body.encode()
        elif body is not _DEFAULT:
            raw = body
        return self._add(
            Respond(
                status=status,
                body=raw,
                content_type=content_type,
                code=code,
                message=message,
                headers=tuple((headers or {}).items()),
                jsonrpc_body=body is _DEFAULT,
            )
        )

    @action_step
    @_scripting
    def drop_session(self, *, shape: SessionLossShape | None = None, after_answer: bool = False) -> ScriptedFault:
        """Forget the session the request carries: before answering it (it meets the "unknown session"
        answer), or with ``after_answer=True`` once it is answered. ``shape``: how the dead id is answered
        from then on (default: as the fake's SDK flavour, 404)."""
        return self._add(DropSession(shape=shape, after_answer=after_answer))

    @action_step
    @_scripting
    def reset_connection(self) -> ScriptedFault:
        """Reset the TCP connection (RST) instead of answering."""
        return self._add(Reset())

    @action_step
    @_scripting
    def close_connection(self) -> ScriptedFault:
        """Close the TCP connection cleanly before the status line."""
        return self._add(CloseConnection())

    @action_step
    @_scripting
    def cut_stream(self, *, after_call: bool = False, reset: bool = False, event_ids: bool = False) -> ScriptedFault:
        """End the POST's SSE stream before its response: before the method runs, or ``after_call`` (the
        tool ran, the client never hears). ``reset``: RST instead of a clean EOF. ``event_ids``: send a
        priming ``id:`` event first, so the client may try to resume with ``Last-Event-ID``."""
        if after_call:
            return self._add(CutStreamAfterCall(reset=reset, event_ids=event_ids))
        return self._add(CutStream(reset=reset, event_ids=event_ids))

    @action_step
    @_scripting
    def end_stream(self) -> ScriptedFault:
        """Accept the GET stream (200 text/event-stream) and end it at once."""
        return self._add(EndStream())

    @action_step
    @_scripting
    def hold_stream(self) -> ScriptedFault:
        """Accept the GET stream and hold it open, silent, until teardown."""
        return self._add(HoldStream())

    @action_step
    @_scripting
    def cut_after_events(self, n: int, *, reset: bool = False) -> ScriptedFault:
        """End the POST's SSE answer right after its ``n``-th message event (priming events and pings do not
        count; 0: right after the headers and the priming event); the method goes on. With ``event_store=True``
        the store keeps what follows, so a client that resumes with ``Last-Event-ID`` gets it. ``reset``: RST
        instead of a clean EOF. On ``on(http_method="GET")`` it cuts the session's GET stream instead.

        Example::

            fake_mcp_server.on("tools/call").cut_after_events(1)
            fake_mcp_server.on(http_method="GET").cut_after_events(1)  # the GET stream
        """
        _at_least("cut_after_events", n, 0, "e.g. cut_after_events(1) cuts after the first event")
        return self._add(CutAfterEvents(events=n, reset=reset))

    @action_step
    @_scripting
    def refuse_replay(self, status: int = 500) -> ScriptedFault:
        """Answer the GET that resumes a stream (it carries ``Last-Event-ID``) with ``status`` instead of the
        replay: 500 as the SDK's bare ``Internal Server Error`` (a server that lost its event store), another
        status with a JSON-RPC error body. Other GETs are not counted.

        Example::

            fake_mcp_server.on(http_method="GET").refuse_replay(503)
        """
        self._only_resumes("refuse_replay")
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ScriptError(f"refuse_replay(status={status!r}) must be an HTTP error status 400..599, e.g. 503")
        return self._add(refusal(status))

    @action_step
    @_scripting
    def partial_replay(self, keep: int = 0) -> ScriptedFault:
        """Let the GET that resumes a stream replay only its first ``keep`` missed events, then end it (clean
        EOF): the rest are lost to this replay, and a client that resumes again from the last event it got
        gets them. With ``.always()`` every replay breaks off so.

        Example::

            fake_mcp_server.on(http_method="GET").partial_replay(keep=1)
        """
        self._only_resumes("partial_replay")
        _at_least("partial_replay", keep, 0, "e.g. partial_replay(keep=1) replays one event")
        return self._add(PartialReplay(keep=keep))

    def _only_resumes(self, call: str) -> None:
        verb, method = self.matcher.http_method, self.matcher.method
        if (isinstance(verb, str) and verb != "GET") or isinstance(method, str):
            raise ScriptError(
                f"{call}() acts on the GET that resumes a stream, which {self.matcher} never matches; "
                f"script it as fake_mcp_server.on(http_method='GET').{call}(...)"
            )

    @action_step
    def malformed(
        self, kind: Literal["bad-json", "wrong-id", "wrong-content-type", "truncated"], **options: Any
    ) -> ScriptedFault:
        """Answer with a broken response: ``"bad-json"``, ``"wrong-id"`` (a JSON-RPC id never sent),
        ``"wrong-content-type"`` (``content_type=`` to choose; default text/html) or ``"truncated"``."""
        return self._malformed(kind, options)

    @_scripting
    def _malformed(self, kind: str, options: dict[str, Any]) -> ScriptedFault:
        fault_class = MALFORMED_KINDS.get(kind)
        if fault_class is None:
            close = difflib.get_close_matches(str(kind), list(MALFORMED_KINDS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"use one of {sorted(MALFORMED_KINDS)}"
            raise ScriptError(f"malformed(kind={kind!r}) is not a kind of malformed answer; {hint}")
        try:
            fault = fault_class(**options)
        except TypeError:
            raise ScriptError(f"malformed({kind!r}) takes no options {sorted(options)}") from None
        return self._add(fault)

    @action_step
    @_scripting
    def bogus_session_id(self, *, only_errors: bool = True) -> ScriptedFault:
        """Put an ``Mcp-Session-Id`` the fake never issued on error answers (or on every answer)."""
        return self._add(BogusSessionId(only_errors=only_errors))

    # --- the 2026-07-28 era (docs/eras.md) ---------------------------------------------------------

    @action_step
    @_scripting
    def switch_era(self, era: str) -> ScriptedFault:
        """Serve ``era`` from the matching request on: a deploy under a live client.

        ``"handshake"``, ``"modern"`` or ``"dual"``; the matching request is already answered by it. Example::

            fake_mcp_server.on("tools/call").switch_era("handshake")  # the server is rolled back mid-conversation
        """
        from .._wire._options import ERAS

        if era not in ERAS:
            raise ScriptError(f"switch_era({era!r}): era must be one of {', '.join(map(repr, ERAS))}")
        return self._add(SwitchEra(era=era))

    @action_step
    @_scripting
    def cache_hint(self, *, ttl_ms: int, scope: str = "private") -> ScriptedFault:
        """Answer a cacheable modern result (a list, ``resources/read``, discover) with this ``ttlMs``/``cacheScope``.

        ``ttl_ms > 0`` lets a client serve the result from its cache that long; 0 (the fake's default) does not.
        Example::

            fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=60_000)
        """
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0:
            raise ScriptError(f"cache_hint(ttl_ms={ttl_ms!r}) must be an int >= 0 (milliseconds); 0 means do not reuse")
        if scope not in ("private", "public"):
            raise ScriptError(f"cache_hint(scope={scope!r}) must be 'private' or 'public'")
        return self._add(CacheHintFault(ttl_ms=ttl_ms, scope=scope))

    @action_step
    @_scripting
    def discover_versions(self, versions: list[str]) -> ScriptedFault:
        """Make ``server/discover`` name these ``supportedVersions`` instead of ``["2026-07-28"]``.

        Unknown or disjoint versions: a client must fall back to the handshake or fail clearly. Example::

            fake_mcp_server.on("server/discover").discover_versions(["2099-01-01"])
        """
        if isinstance(versions, str) or not all(isinstance(v, str) for v in versions):
            raise ScriptError(f"discover_versions({versions!r}) takes a list of version strings, e.g. ['2099-01-01']")
        return self._add(DiscoverVersions(versions=tuple(versions)))

    @action_step
    @_scripting
    def refuse_initialize(self) -> ScriptedFault:
        """Refuse ``initialize`` as a modern-only server does: 400, -32022, ``data.supported`` naming its versions.

        Example::

            fake_mcp_server.on("initialize").refuse_initialize()
        """
        return self._add(RefuseInitialize())

    # --- authorization (auth=True; docs/authorization.md) -------------------------------------------

    @action_step
    @_scripting
    def expire_tokens(self, *, session_only: bool = False, revoke_refresh: bool = False) -> ScriptedFault:
        """Expire every live access token when a matching request arrives; it and later ones meet the 401.

        ``session_only``: only the tokens used in the request's session; ``revoke_refresh``: revoke every
        refresh token too, so only a new authorization helps. Needs ``auth=True``.

        Example::

            fake_mcp_server.on("tools/call").nth(2).expire_tokens()
        """
        return self._add(ExpireTokens(session_only=session_only, revoke_refresh=revoke_refresh))

    @action_step
    @_scripting
    def unauthorized(self) -> ScriptedFault:
        """Answer 401 ``invalid_token`` with the SDK's challenge, the token left good (a stray 401).

        Example::

            fake_mcp_server.on("tools/call").nth(3).unauthorized()
        """
        return self._add(Challenge())

    @action_step
    @_scripting
    def insufficient_scope(self, scope: str) -> ScriptedFault:
        """Require ``scope`` from now on and answer 403 ``insufficient_scope`` naming it (a step-up).

        Needs ``auth=True``.

        Example::

            fake_mcp_server.on("tools/call", tool="delete").insufficient_scope("admin")
        """
        if not isinstance(scope, str) or not scope or " " in scope:
            raise ScriptError(f"insufficient_scope(scope={scope!r}) must be one scope name, e.g. 'admin'")
        return self._add(StepUp(scope=scope))

    @action_step
    @_scripting
    def refuse_refresh(self) -> ScriptedFault:
        """Refuse a refresh at the token endpoint with 400 ``invalid_grant``. Needs ``auth=True``.

        Example::

            fake_mcp_server.on().refuse_refresh()
        """
        self._only_auth_server("refuse_refresh()")
        return self._add(RefuseRefresh())

    @action_step
    @_scripting
    def delay_refresh(self, seconds: float) -> ScriptedFault:
        """Answer a refresh at the token endpoint ``seconds`` late. Needs ``auth=True``.

        Example::

            fake_mcp_server.on().delay_refresh(0.2)
        """
        self._only_auth_server("delay_refresh()")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise ScriptError(f"delay_refresh(seconds={seconds!r}) must be a number > 0")
        return self._add(DelayRefresh(seconds=seconds))

    @action_step
    @_scripting
    def refuse_registration(self, status: int = 400) -> ScriptedFault:
        """Refuse a dynamic client registration: 400 ``invalid_client_metadata``, or 404. Needs ``auth=True``.

        Example::

            fake_mcp_server.on().refuse_registration()
        """
        self._only_auth_server("refuse_registration()")
        if status not in (400, 404):
            raise ScriptError(f"refuse_registration(status={status!r}) must be 400 or 404 (no registration endpoint)")
        return self._add(RefuseRegistration(status=status))

    def _only_auth_server(self, call: str) -> None:
        """The authorization server's requests carry no JSON-RPC method, session or era to match on."""
        m = self.matcher
        if any(isinstance(v, str) for v in (m.method, m.tool, m.target, m.era)) or isinstance(m.has_session, bool):
            raise ScriptError(
                f"{call} acts on the authorization server's own requests, which {m} never matches; "
                f"script it as fake_mcp_server.on().{call}"
            )

    def _add(self, fault: Fault) -> ScriptedFault:
        reason = None if self.served is None else fault.unserved(self.served)
        if reason is not None:
            raise ScriptError(f"'{fault}' on {self.matcher}: {reason}")
        era = self.matcher.era
        reason = fault.unfit(era) if isinstance(era, str) else None
        if reason is not None:
            raise ScriptError(f"'{fault}' on {self.matcher}: {reason}")
        final = next((f for f in self.faults if f.answers), None)
        if final is not None:
            raise ScriptError(
                f"{self}: '{final}' already answers the request, so '{fault}' would never run; "
                "script it on its own line (fake_mcp_server.on(...)) or put it first"
            )
        self.faults = (*self.faults, fault)
        return self

    # --- firing (server loop) and waiting (test thread) ---------------------------------------------

    def _claim(self, firing: Firing) -> bool:
        """Whether it acts on the firing's request now (server loop); counts the request as seen and fired.

        A matching request its first action fires on is seen; its window says if it is due. A due request
        an earlier scripted fault already answered is noted as skipped instead.
        """
        request = firing.request
        if not self.faults or not self.matcher.matches(request):
            return False
        if request.era is not None and self._unfit(request.era, request.seq):
            return False
        if not self.faults[0].fires(firing):
            return False
        self.seen += 1
        if not self.window.covers(self.seen):
            return False
        if request.response_started:
            self.skipped.append(request.seq)
            return False
        with self._cond:
            self.fired += 1
            self.fired_on.append(request.seq)
            self._cond.notify_all()
        return True

    def _unfit(self, era: str, seq: int) -> bool:
        """An action that means nothing in the request's era does not act on it; the test fails, saying why."""
        for fault in self.faults:
            reason = fault.unfit(era)
            if reason is not None:
                text = f"{self}: did not act on #{seq}, answered by the {era} era: {reason}"
                if not any(f.startswith(f"{self}: did not act on") for f in self.failures):
                    self.failures.append(text)
                return True
        return False

    def wait_fired_sync(self, n: int = 1, *, timeout: float = 5.0) -> None:
        """Block until this fault has acted on ``n`` requests (e.g. the request is now held).

        Raises:
            AssertionError: if it has not within ``timeout`` seconds.
        """
        __tracebackhide__ = True
        with self._cond:
            done = self._cond.wait_for(lambda: self.fired >= n, timeout)
        if not done:
            raise AssertionError(
                f"{self}: fired {self.fired} of {n} time(s) within {timeout:g}s ({self.seen} matching request(s) seen)"
            )

    async def wait_fired(self, n: int = 1, *, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a thread waits
        """Wait (asyncio) until this fault has acted on ``n`` requests; see :meth:`wait_fired_sync`.

        Example::

            fault = fake_mcp_server.on("tools/call").hang()
            task = asyncio.create_task(session.call_tool("echo", {"text": "a"}))
            await fault.wait_fired()     # the call is now held by the fake
        """
        __tracebackhide__ = True
        await asyncio.to_thread(self.wait_fired_sync, n, timeout=timeout)

    def _problem(self, *, unfired: bool) -> str | None:
        """Why this fault did not do what was scripted, as a sentence; None if it did."""
        if self.is_optional:
            return None
        if not self.faults:
            return f"{self}: no action was scripted after on(...); add one, e.g. .respond(503)"
        if self.failures:
            return "; ".join(self.failures)
        needed = self.window.required
        if unfired and self.fired < needed:
            text = f"{self}: fired {self.fired} of {needed} time(s); saw {self.seen} matching request(s)"
            if self.skipped:
                seqs = ", ".join(f"#{seq}" for seq in self.skipped)
                text += f"; {seqs} had been answered by a fault scripted before it (script this one first)"
            return text
        return None

    def __str__(self) -> str:
        actions = ", then ".join(str(f) for f in self.faults) or "(no action yet)"
        optional = " (optional)" if self.is_optional else ""
        return f"{actions} on {self.matcher}, {self.window}{optional}"

    def __repr__(self) -> str:
        return f"<ScriptedFault {self}>"
