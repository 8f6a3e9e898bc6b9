"""The ``assert_*`` helpers of ``fake_mcp_server``, as functions over a frozen :class:`ServerFigures`.

Each oracle is defined once here and drawn by ``_report``: a failure prints what
was expected and what was found, the exchanges as a sequence diagram with the culprits marked,
then one hint. ``FakeMCPServer.assert_*`` take a fresh snapshot and call these.

Over the 400-line soft cap: each oracle is its definition plus the facts, marks and hint of its
failure, and they share the handshake and "told it ended" analysis; ``ServerFigures`` is the seam
to split at (a ``_figures.py``) if another oracle joins.
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ._journal import Exchange, JournalEvent
from ._report import (
    CLIENT_CLOSED,
    describe_sessions,
    harmless_uses,
    is_unknown_tool_call,
    mark_shown,
    plural,
    render_failure,
    short_ids,
    stale_uses,
    told_ended,
)
from ._sessions import EndReason, SessionRecord

__all__ = [
    "ServerFigures",
    "assert_all_sessions_closed",
    "assert_concurrent",
    "assert_discover_once",
    "assert_initialize_count",
    "assert_list_results_cached",
    "assert_no_requests_after_close",
    "assert_no_session_ids",
    "assert_no_stale_session_ids",
    "assert_no_unknown_tool_calls",
    "assert_session_reused",
    "assert_sessions",
    "assert_stopped_after_era_refusal",
    "assert_tool_ran",
    "list_cache_violations",
]

_SERVER_ENDED = frozenset({EndReason.DROPPED, EndReason.RESTART, EndReason.IDLE})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFigures:
    """What one fake server saw, frozen at one moment: the figures every ``assert_*`` helper reads.

    Example::

        figures = fake_mcp_server.figures
        assert figures.initialize_count == 1 and figures.not_found_count == 0
        print(figures)  # every figure, one per line
    """

    url: str
    exchanges: tuple[Exchange, ...]
    events: tuple[JournalEvent, ...] = ()
    sessions: tuple[SessionRecord, ...] = ()
    tool_executions: Mapping[str, int] = field(default_factory=dict)
    """How many times each tool's handler ran (the side-effect ledger)."""
    tools: tuple[str, ...] = ()
    """The names of the tools the fake serves."""
    max_in_flight: int = 0
    """The most exchanges the fake was answering at once, open GET streams included."""

    @property
    def initialize_count(self) -> int:
        """``initialize`` requests that arrived, however they were answered."""
        return sum(1 for e in self.exchanges if e.rpc_method == "initialize")

    @property
    def discover_count(self) -> int:
        """``server/discover`` requests that arrived (the 2026-07-28 era's probe), however they were answered."""
        return sum(1 for e in self.exchanges if e.rpc_method == "server/discover")

    @property
    def era_counts(self) -> dict[str, int]:
        """Exchanges per era that answered them: ``{"handshake": 3, "modern": 2}``."""
        return dict(Counter(e.era for e in self.exchanges if e.era is not None))

    @property
    def initialize_per_session(self) -> dict[str, int]:
        """``initialize`` requests each session answered (2+ means a re-initialize inside it)."""
        return {s.id: s.initialize_count for s in self.sessions}

    @property
    def sessions_created(self) -> int:
        return len(self.sessions)

    @property
    def sessions_ended(self) -> int:
        return sum(1 for s in self.sessions if not s.live)

    @property
    def live_sessions(self) -> int:
        return sum(1 for s in self.sessions if s.live)

    @property
    def ended_by(self) -> dict[str, int]:
        """How the ended sessions ended: ``{"delete": 1, "dropped": 1}`` (see :class:`EndReason`)."""
        return dict(Counter(str(s.end_reason) for s in self.sessions if s.end_reason is not None))

    @property
    def requests_per_session(self) -> dict[str, int]:
        """Exchanges that carried each session's id (its opening request included)."""
        return {s.id: len(s.requests) for s in self.sessions}

    @property
    def not_found_count(self) -> int:
        """404s the fake served."""
        return sum(1 for e in self.exchanges if e.status == 404)

    @property
    def unknown_tool_calls(self) -> tuple[Exchange, ...]:
        """``tools/call`` requests for a tool the fake does not serve (answered ``isError: Unknown tool``)."""
        return tuple(e for e in self.exchanges if is_unknown_tool_call(e))

    @property
    def harmless_deletes(self) -> int:
        """DELETEs of a session the server had already ended (one per session): allowed, not stale by default."""
        return len(harmless_uses(self.exchanges, self.sessions))

    @property
    def connections(self) -> set[str]:
        """Distinct client ``host:port`` pairs: TCP connections, not HTTP clients."""
        return {e.connection for e in self.exchanges if e.connection is not None}

    @property
    def max_concurrent_requests(self) -> int:
        """The most JSON-RPC requests in flight at once (see ``assert_concurrent``)."""
        return len(_peak(self.exchanges))

    @property
    def client_closed_after(self) -> int | None:
        """The last exchange ``seq`` allotted when ``mark_client_closed()`` was last called, or None."""
        marks = [ev.after_seq for ev in self.events if ev.text == CLIENT_CLOSED]
        return marks[-1] if marks else None

    def __str__(self) -> str:
        short = short_ids(s.id for s in self.sessions)
        per_session = ", ".join(
            f"{short[s.id]}: {s.initialize_count} initialize, {len(s.requests)} requests" for s in self.sessions
        )
        ended = ", ".join(f"{k} {v}" for k, v in sorted(self.ended_by.items())) or "none"
        tools = ", ".join(f"{k}×{v}" for k, v in sorted(self.tool_executions.items())) or "none"
        return "\n".join(
            [
                f"fake MCP server {self.url}: {len(self.exchanges)} exchanges",
                f"initialize: {self.initialize_count}",
                f"server/discover: {self.discover_count}",
                f"eras: {', '.join(f'{k} {v}' for k, v in sorted(self.era_counts.items())) or 'none'}",
                f"sessions: {self.sessions_created} created, {self.sessions_ended} ended ({ended}), "
                f"{self.live_sessions} live",
                f"per session: {per_session or 'none'}",
                f"404s served: {self.not_found_count}",
                f"DELETEs of sessions already ended (harmless): {self.harmless_deletes}",
                f"tool executions: {tools}",
                f"calls of unknown tools: {len(self.unknown_tool_calls)}",
                f"max JSON-RPC requests in flight: {self.max_concurrent_requests} "
                f"(all exchanges, GET streams included: {self.max_in_flight})",
                f"TCP connections: {len(self.connections)}",
            ]
        )


def _fail(
    figures: ServerFigures, headline: str, facts: list[str], marks: Mapping[int, str] | None, hint: str
) -> NoReturn:
    __tracebackhide__ = True
    message = render_failure(
        headline, facts, figures.exchanges, figures.events, figures.sessions, marks=marks, hint=hint
    )
    raise mark_shown(AssertionError(message), figures.url)


def _count(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an int >= {minimum}")
    return value


# --- initialize and sessions ------------------------------------------------------------------------


def assert_initialize_count(figures: ServerFigures, n: int) -> None:
    """Exactly ``n`` ``initialize`` requests arrived, however they were answered."""
    __tracebackhide__ = True
    _count("n", n)
    inits = [e for e in figures.exchanges if e.rpc_method == "initialize"]
    if len(inits) == n:
        return
    marks = {e.seq: f"initialize {i} of {len(inits)}" for i, e in enumerate(inits, 1) if i > n}
    calls = sum(1 for e in figures.exchanges if e.rpc_method == "tools/call")
    server_ended = sum(1 for s in figures.sessions if s.end_reason in _SERVER_ENDED)
    if not figures.exchanges:
        hint = f"the client never reached the fake; point it at {figures.url}"
    elif not inits:
        hint = "requests arrived but no initialize: the client skipped the handshake (a persisted session id?)"
    elif len(inits) > n and any(e.session_id is not None for e in inits):
        hint = "an initialize carried a session id: the client re-initialized an old session instead of opening one"
    elif len(inits) > n and _overlapping(inits):
        hint = (
            "initialize requests were in flight at the same time: concurrent first calls each opened a session; "
            "make opening single-flight (one task opens, the others await it)"
        )
    elif len(inits) > n and server_ended and len(inits) <= n + server_ended:
        hint = (
            f"{plural(server_ended, 'session')} ended on the server and each recovery opens one: "
            f"expect {n} + {server_ended} initialize if the client recovered as it should"
        )
    elif len(inits) > n and (refused := _reopened_after_error(figures, inits)) is not None:
        hint = (
            f"the client opened a new session after a {refused.status} answer to #{refused.seq}, which did not end "
            "the session: only a 404 says a session is gone; surface other errors to the caller "
            "(docs/failure-modes.md#r10)"
        )
    elif len(inits) > n and calls and len(inits) >= calls:
        hint = "one initialize per tools/call: the client opens a session per call; open one and reuse it"
    elif len(inits) > n:
        hint = "more sessions than expected: each new transport or ClientSession sends its own initialize"
    elif server_ended:
        hint = (
            f"{plural(server_ended, 'session')} ended on the server; a client that recovers opens a new one "
            "(the SDK clients never do by themselves: docs/failure-modes.md#r01)"
        )
    else:
        hint = "fewer initialize than expected: did every client you meant to start reach the fake?"
    _fail(
        figures,
        f"assert_initialize_count({n}): {plural(len(inits), 'initialize request')} arrived, expected {n}.",
        describe_sessions(figures.sessions, figures.exchanges),
        marks,
        hint,
    )


def _reopened_after_error(figures: ServerFigures, inits: list[Exchange]) -> Exchange | None:
    """The error answer (not a 404, session still live) right before a later ``initialize``, if any."""
    live_ends = {s.id: s.ended for s in figures.sessions}
    for init in inits[1:]:
        before = [
            e
            for e in figures.exchanges
            if e.seq < init.seq and e.session_id is not None and e.status and e.http_method == "POST"
        ]
        if not before:
            continue
        last = max(before, key=lambda e: e.seq)
        ended = live_ends.get(last.session_id or "")
        still_live = ended is None or ended > last.started  # ended later (its own DELETE), not before the error
        if last.status is not None and last.status >= 400 and last.status != 404 and still_live:
            return last
    return None


def _overlapping(exchanges: list[Exchange]) -> bool:
    """True if any two exchanges were in flight at once (one started before the other ended)."""
    ordered = sorted(exchanges, key=lambda e: e.started)
    return any(
        later.started < (earlier.ended if earlier.ended is not None else float("inf"))
        for earlier, later in itertools.pairwise(ordered)
    )


def assert_sessions(
    figures: ServerFigures,
    *,
    created: int | None = None,
    ended: int | None = None,
    ended_by: Mapping[str | EndReason, int] | None = None,
    live: int | None = None,
) -> None:
    """The server's session figures are the given ones; ``ended_by`` is the whole breakdown."""
    __tracebackhide__ = True
    if created is None and ended is None and ended_by is None and live is None:
        raise TypeError("assert_sessions() needs at least one of created=, ended=, ended_by=, live=")
    wanted_by: dict[str, int] | None = None
    if ended_by is not None:
        wanted_by = {}
        for key, value in ended_by.items():
            try:
                reason = EndReason(key)
            except ValueError:
                known = ", ".join(repr(str(r)) for r in EndReason)
                raise ValueError(f"ended_by key {key!r} is not a way a session ends; use one of {known}") from None
            wanted_by[str(reason)] = _count(f"ended_by[{key!r}]", value)
            if wanted_by[str(reason)] == 0:
                del wanted_by[str(reason)]
    checks: list[tuple[str, Any, Any]] = []
    for name, want, actual in (
        ("created", created, figures.sessions_created),
        ("ended", ended, figures.sessions_ended),
        ("live", live, figures.live_sessions),
    ):
        if want is not None:
            checks.append((name, _count(name, want), actual))
    if wanted_by is not None:
        checks.append(("ended_by", wanted_by, figures.ended_by))
    wrong = [(name, want, actual) for name, want, actual in checks if want != actual]
    if not wrong:
        return
    args = ", ".join(f"{name}={want!r}" for name, want, _ in checks)
    found = "; ".join(f"{name} {actual!r}, expected {want!r}" for name, want, actual in wrong)
    short = short_ids(s.id for s in figures.sessions)
    marks = {s.created_by: f"opened {short[s.id]}" for s in figures.sessions}
    for e in figures.exchanges:
        if e.http_method == "DELETE" and e.session_id in short:
            marks[e.seq] = f"DELETE {short[e.session_id]}"
    too_few_ended = (live is not None and figures.live_sessions > live) or (
        ended is not None and figures.sessions_ended < ended
    )
    if wanted_by is not None:
        too_few_ended = too_few_ended or sum(wanted_by.values()) > figures.sessions_ended
    if too_few_ended and figures.live_sessions:
        hint = "a session is still live: close the client (it sends DELETE) before asserting on ended sessions"
    elif created is not None and figures.sessions_created > created:
        hint = "more sessions than expected: each new transport or ClientSession opens one"
    else:
        hint = "fake_mcp_server.sessions lists every session with how it began and ended"
    _fail(
        figures,
        f"assert_sessions({args}): {found}.",
        describe_sessions(figures.sessions, figures.exchanges),
        marks,
        hint,
    )


def _handshakes(figures: ServerFigures) -> list[tuple[Exchange, SessionRecord]]:
    """Each ``initialize`` that opened a session, with that session, in arrival order."""
    opened = {s.created_by: s for s in figures.sessions}
    return [
        (e, opened[e.seq])
        for e in sorted(figures.exchanges, key=lambda e: e.seq)
        if e.rpc_method == "initialize" and e.seq in opened
    ]


def reuse_violations(figures: ServerFigures) -> dict[int, str]:
    """The exchanges that broke session reuse, ``{seq: why}``; see ``FakeMCPServer.assert_session_reused``."""
    handshakes = _handshakes(figures)
    if not handshakes:
        return {}
    short = short_ids([e.session_id for e in figures.exchanges] + [s.id for s in figures.sessions])
    told = told_ended(figures.exchanges, figures.sessions)
    first = handshakes[0][0]
    opened_ids = {s.id for _, s in handshakes}
    bad: dict[int, str] = {}
    for e in sorted(figures.exchanges, key=lambda e: e.seq):
        if e.seq <= first.seq or e.http_method == "DELETE":
            continue
        if e.rpc_method == "initialize":
            previous = [s for init, s in handshakes if init.seq < e.seq][-1]
            why = _reinit_reason(e, previous, told, short[previous.id])
            if why:
                bad[e.seq] = why
            continue
        done = [(init, s) for init, s in handshakes if init.ended is not None and init.ended <= e.started]
        if not done:
            continue
        current_init, current = done[-1]
        allowed = {current.id} | {
            s.id for init, s in handshakes if init.seq > current_init.seq and init.started < e.started
        }
        if e.session_id is None:
            bad[e.seq] = f"no session id; current session {short[current.id]}"
        elif e.session_id not in allowed:
            which = "old session" if e.session_id in opened_ids else "a session it never opened:"
            bad[e.seq] = f"{which} {short[e.session_id]}; current {short[current.id]}"
    return bad


def _reinit_reason(
    init: Exchange, previous: SessionRecord, told: Mapping[str, tuple[float, Exchange]], name: str
) -> str:
    """Why a new ``initialize`` was not needed ('' if it was: the server ended the previous session)."""
    if previous.end_reason in _SERVER_ENDED and previous.ended is not None and previous.ended <= init.started:
        return ""
    if previous.id in told and told[previous.id][0] <= init.started:
        learner = told[previous.id][1]
        if learner.http_method == "DELETE" and learner.status != 404:
            return f"new session after the client's own DELETE of {name}"
        return ""
    return f"initialize while session {name} was live"


def assert_session_reused(figures: ServerFigures) -> None:
    """Every request after the handshake used the live session; see ``FakeMCPServer.assert_session_reused``."""
    __tracebackhide__ = True
    handshakes = _handshakes(figures)
    if not handshakes:
        _fail(
            figures,
            "assert_session_reused(): no initialize opened a session, so there was no session to reuse.",
            [f"{figures.initialize_count} initialize, {len(figures.exchanges)} exchanges"],
            None,
            f"the client never completed a handshake with {figures.url}",
        )
    bad = reuse_violations(figures)
    if not bad:
        return
    reasons = list(bad.values())
    if any(r.startswith(("initialize while", "new session after")) for r in reasons):
        hint = (
            "the client opened a new session while it had one (per call or per task: docs/failure-modes.md#c01); "
            "keep one session open and open a new one only after the server ended it (404)"
        )
    elif any(r.startswith("old session") for r in reasons):
        hint = (
            "after the new session opened, a request still carried the old id (docs/failure-modes.md#r03): "
            "take the id from the current session, and close the old transport so its GET stream stops"
        )
    else:
        hint = "a request after the handshake went out on another transport or client (no or foreign session id)"
    _fail(
        figures,
        f"assert_session_reused(): {plural(len(bad), 'exchange')} did not reuse the session "
        f"({plural(len(handshakes), 'session')} opened by initialize).",
        describe_sessions(figures.sessions, figures.exchanges),
        bad,
        hint,
    )


def assert_no_stale_session_ids(figures: ServerFigures, *, strict: bool = False) -> None:
    """No request carried an ended session's id once the client knew; see the method's docstring."""
    __tracebackhide__ = True
    stale = stale_uses(figures.exchanges, figures.sessions, strict=strict)
    if not stale:
        return
    by_seq = {e.seq: e for e in figures.exchanges}
    culprits = [by_seq[seq] for seq in stale]
    if any(e.rpc_method == "initialize" for e in culprits):
        hint = (
            "an initialize carried Mcp-Session-Id: a new session starts without one; open a new transport "
            "rather than re-initializing the old one (docs/failure-modes.md#r02)"
        )
    elif all(e.http_method == "DELETE" for e in culprits):
        hint = (
            "the client sent DELETE for a session the server had already ended"
            + (" (strict=True flags even the SDK transport's one DELETE after a 404)" if strict else "")
            + ": skip it after a 404 (terminate_on_close=False on that transport; "
            "docs/failure-modes.md#harmless-delete)"
        )
    elif any(e.http_method == "GET" for e in culprits):
        hint = "the GET stream of the dead session kept reconnecting: close the old transport when its session ends"
    else:
        hint = "after the 404 the client kept the dead session id: open a new session (docs/failure-modes.md#r01)"
    _fail(
        figures,
        f"assert_no_stale_session_ids({'strict=True' if strict else ''}): {plural(len(stale), 'exchange')} "
        f"carried a session id {'it' if len(stale) == 1 else 'they'} should not have.",
        describe_sessions(figures.sessions, figures.exchanges),
        stale,
        hint,
    )


def assert_all_sessions_closed(figures: ServerFigures) -> None:
    """Each session an ``initialize`` opened got a DELETE, or the client was told it was gone."""
    __tracebackhide__ = True
    handshakes = _handshakes(figures)
    deleted = {e.session_id for e in figures.exchanges if e.http_method == "DELETE"}
    told = told_ended(figures.exchanges, figures.sessions)
    short = short_ids([e.session_id for e in figures.exchanges] + [s.id for s in figures.sessions])
    open_ = [(init, s) for init, s in handshakes if s.id not in deleted and s.id not in told]
    if not open_:
        return
    facts = []
    for init, s in open_:
        state = "still live" if s.live else f"ended ({s.end_reason}) but the client never learnt it"
        facts.append(f"session {short[s.id]} (opened by #{init.seq}): {state}, no DELETE")
    marks = {init.seq: f"opened {short[s.id]}, never DELETEd" for init, s in open_}
    _fail(
        figures,
        f"assert_all_sessions_closed(): {len(open_)} of {plural(len(handshakes), 'session')} "
        "the client opened got no DELETE.",
        facts,
        marks,
        "close the client on every path (the SDK transport sends DELETE on exit unless "
        "terminate_on_close=False; docs/failure-modes.md#t08), and assert after it is closed",
    )


# --- tools, concurrency, close ---------------------------------------------------------------------


def assert_tool_ran(figures: ServerFigures, name: str, *, times: int | None = None) -> None:
    """The handler of tool ``name`` ran ``times`` times (None: at least once)."""
    __tracebackhide__ = True
    if times is not None:
        _count("times", times)
    ran = figures.tool_executions.get(name, 0)
    if (ran >= 1) if times is None else (ran == times):
        return
    calls = [e for e in figures.exchanges if e.rpc_method == "tools/call"]
    mine = [e for e in calls if e.target == name]
    marks = {e.seq: f"call of {name}" for e in mine}
    marks.update({e.seq: f"unknown tool {e.target!r}" for e in figures.unknown_tool_calls if e.seq not in marks})
    names = sorted({str(e.target) for e in calls if e.target} | set(figures.tool_executions) | set(figures.tools))
    close = difflib.get_close_matches(name, [n for n in names if n != name], n=1)
    served = not figures.tools or name in figures.tools
    executions = ", ".join(f"{k}×{v}" for k, v in sorted(figures.tool_executions.items())) or "none"
    facts = [
        f"tool executions: {executions}",
        f"tools/call {name!r}: {len(mine)} requests, answered {[e.status for e in mine]}",
    ]
    if not served:
        offered = ", ".join(repr(t) for t in figures.tools)
        facts.insert(0, f"the fake serves no tool named {name!r}; it serves {offered}")
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else f"register it with fake_mcp_server.add_tool({name!r}, handler) before the client calls it"
        )
    elif not mine and close:
        hint = f"no tools/call named {name!r} arrived; did you mean {close[0]!r}?"
    elif times is not None and ran > times and not _repeats(mine):
        hint = f"the client sent {plural(len(mine), 'call')} of {name!r}, with different arguments, and each ran"
    elif times is not None and ran > times:
        hint = (
            "the tool ran more often than expected: a retry replayed a call that had run "
            "(docs/failure-modes.md#r12); the SDK's tools/list after the first call_tool is not a run"
        )
    elif len(mine) > ran:
        hint = f"{len(mine) - ran} tools/call of {name!r} never reached the handler (refused, faulted or unknown)"
    else:
        hint = "the client sent fewer calls than expected; an error raised before the call would explain it"
    expected = "at least once" if times is None else f"{plural(times, 'time')}"
    _fail(
        figures,
        f"assert_tool_ran({name!r}{'' if times is None else f', times={times}'}): the handler ran "
        f"{plural(ran, 'time')}, expected {expected}.",
        facts,
        marks,
        hint,
    )


def _repeats(calls: list[Exchange]) -> bool:
    """True if two of these ``tools/call`` requests carried the same arguments (a retry looks like that)."""
    bodies = [e.request_body for e in calls if isinstance(e.request_body, dict)]
    keys = [json.dumps({k: v for k, v in body.items() if k != "id"}, sort_keys=True, default=str) for body in bodies]
    return len(set(keys)) < len(keys)


def _peak(exchanges: tuple[Exchange, ...]) -> list[Exchange]:
    """The largest set of JSON-RPC requests in flight together (an answer complete frees its slot)."""
    requests = [e for e in exchanges if e.kind == "request" and e.http_method == "POST"]
    points = sorted(
        [(e.started, 1, e) for e in requests] + [(e.ended, 0, e) for e in requests if e.ended is not None],
        key=lambda p: (p[0], p[1], p[2].seq),
    )
    live: dict[int, Exchange] = {}
    best: list[Exchange] = []
    for _, starts, e in points:
        if starts:
            live[e.seq] = e
            if len(live) > len(best):
                best = list(live.values())
        else:
            live.pop(e.seq, None)
    return best


def assert_concurrent(figures: ServerFigures, *, min_in_flight: int) -> None:
    """At least ``min_in_flight`` JSON-RPC requests were in flight at once."""
    __tracebackhide__ = True
    _count("min_in_flight", min_in_flight, 1)
    peak = _peak(figures.exchanges)
    if len(peak) >= min_in_flight:
        return
    marks = {e.seq: f"{i} of {len(peak)} in flight together" for i, e in enumerate(peak, 1)}
    _fail(
        figures,
        f"assert_concurrent(min_in_flight={min_in_flight}): at most {plural(len(peak), 'JSON-RPC request')} "
        f"in flight at once, expected at least {min_in_flight}.",
        [
            f"JSON-RPC requests: {sum(1 for e in figures.exchanges if e.kind == 'request')}",
            f"all exchanges in flight at once, GET streams included: {figures.max_in_flight}",
        ],
        marks,
        "the client awaited each call before sending the next: send them together (asyncio.gather, a task "
        "group) over one session; a lock held across the call serialises them (docs/failure-modes.md#c03)",
    )


def assert_no_requests_after_close(figures: ServerFigures) -> None:
    """No request arrived after the last ``mark_client_closed()``."""
    __tracebackhide__ = True
    after = figures.client_closed_after
    if after is None:
        _fail(
            figures,
            "assert_no_requests_after_close(): mark_client_closed() was never called, so nothing marks "
            "when the client closed.",
            [],
            None,
            "call fake_mcp_server.mark_client_closed() right after your client is closed",
        )
    late = [e for e in figures.exchanges if e.seq > after]
    if not late:
        return
    _fail(
        figures,
        f"assert_no_requests_after_close(): {plural(len(late), 'request')} arrived after the client was closed.",
        [f"closed after exchange #{after}"],
        {e.seq: "after close" for e in late},
        "a task outlived the client (a GET reconnect loop, a retry, a background refresh): cancel and await "
        "it when the client closes (docs/failure-modes.md#h04)",
    )


def assert_no_unknown_tool_calls(figures: ServerFigures) -> None:
    """No ``tools/call`` named a tool the fake does not serve (checked at teardown unless opted out)."""
    __tracebackhide__ = True
    unknown = figures.unknown_tool_calls
    if not unknown:
        return
    names = sorted({str(e.target) for e in unknown})
    close = {n: difflib.get_close_matches(n, list(figures.tools), n=1) for n in names}
    guesses = [f"{n!r} (did you mean {c[0]!r}?)" if c else repr(n) for n, c in close.items()]
    _fail(
        figures,
        f"The client called {plural(len(unknown), 'time')} a tool the fake does not serve: {', '.join(guesses)}.",
        [f"the fake serves: {', '.join(repr(t) for t in figures.tools) or 'no tools'}"],
        {e.seq: f"unknown tool {e.target!r}" for e in unknown},
        "register the tool with fake_mcp_server.add_tool(name, handler), fix the name the client sends, or, if "
        "the test means to call an unknown tool, set @pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)",
    )


# --- the 2026-07-28 era: what reuse means without sessions (docs/eras.md) -----------------------------------

_LIST_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})


def _cache_window(exchange: Exchange) -> float:
    """Seconds the answer of ``exchange`` let a client reuse it (its ``ttlMs``; 0 if none or not a result)."""
    for message in exchange.response_messages:
        result = message.get("result")
        if isinstance(result, dict):
            ttl = result.get("ttlMs")
            if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
                return ttl / 1000
    return 0.0


def _cursor(exchange: Exchange) -> Any:
    body = exchange.request_body
    params = body.get("params") if isinstance(body, dict) else None
    return params.get("cursor") if isinstance(params, dict) else None


def assert_discover_once(figures: ServerFigures, *, clients: int = 1) -> None:
    """Each client sent ``server/discover`` once, not per call; see ``FakeMCPServer.assert_discover_once``."""
    __tracebackhide__ = True
    _count("clients", clients, 1)
    probes = [e for e in figures.exchanges if e.rpc_method == "server/discover"]
    if len(probes) == clients:
        return
    if not probes:
        hint = (
            "no probe arrived: the client skipped server/discover (a pinned era, e.g. mode='legacy') "
            f"or never reached {figures.url}"
        )
    else:
        hint = (
            "the client probes again per call or per task: build the client once and keep it, the era it "
            "learned from one probe holds for its life (docs/eras.md)"
        )
    marks = {e.seq: f"probe {i} of {len(probes)}" for i, e in enumerate(probes, 1) if i > clients}
    calls = sum(1 for e in figures.exchanges if e.era == "modern" and e.rpc_method not in (None, "server/discover"))
    _fail(
        figures,
        f"assert_discover_once(clients={clients}): {plural(len(probes), 'server/discover')} arrived, "
        f"expected {clients}.",
        [f"{calls} other modern-era requests"],
        marks,
        hint,
    )


def list_cache_violations(figures: ServerFigures) -> dict[int, str]:
    """List requests sent again while an earlier answer to the same list was still fresh (its ``ttlMs``)."""
    fresh: dict[tuple[str, str], tuple[float, int, float]] = {}  # (method, cursor) -> (until, seq, ttl)
    bad: dict[int, str] = {}
    for exchange in figures.exchanges:
        if exchange.era != "modern" or exchange.rpc_method not in _LIST_METHODS:
            continue
        key = (exchange.rpc_method, json.dumps(_cursor(exchange)))
        held = fresh.get(key)
        if held is not None and exchange.started < held[0]:
            age = (exchange.started - (held[0] - held[2])) * 1000
            bad[exchange.seq] = (
                f"listed again {age:.0f}ms after #{held[1]}, whose answer was fresh {held[2] * 1000:.0f}ms"
            )
        window = _cache_window(exchange)
        if window > 0 and exchange.ended is not None:
            fresh[key] = (exchange.ended + window, exchange.seq, window)
    return bad


def assert_list_results_cached(figures: ServerFigures) -> None:
    """No list request was repeated while its last answer's ``ttlMs`` held; see ``FakeMCPServer``'s method."""
    __tracebackhide__ = True
    bad = list_cache_violations(figures)
    if not bad:
        return
    cacheable = sum(1 for e in figures.exchanges if e.rpc_method in _LIST_METHODS and _cache_window(e) > 0)
    _fail(
        figures,
        f"assert_list_results_cached(): {plural(len(bad), 'list request')} went to the server while the last "
        "answer was still fresh.",
        [f"{cacheable} list answers carried ttlMs > 0"],
        bad,
        "keep the list result the server said was fresh for ttlMs and answer repeats from it (the mcp 2.x Client "
        "does so per Client instance: reuse one instead of building one per call)",
    )


def assert_no_session_ids(figures: ServerFigures) -> None:
    """No modern-era request carried ``Mcp-Session-Id``; see ``FakeMCPServer.assert_no_session_ids``."""
    __tracebackhide__ = True
    bad = {
        e.seq: f"carried session id {e.session_id[:8]}"
        for e in figures.exchanges
        if e.era == "modern" and e.session_id is not None
    }
    modern = sum(1 for e in figures.exchanges if e.era == "modern")
    if modern == 0:
        _fail(
            figures,
            "assert_no_session_ids(): no exchange was answered in the 2026-07-28 era.",
            [f"{len(figures.exchanges)} exchanges, all handshake"],
            None,
            "the client never went modern: serve it with era='modern' or 'dual', and let it probe (mode='auto')",
        )
    if not bad:
        return
    _fail(
        figures,
        f"assert_no_session_ids(): {plural(len(bad), 'modern-era request')} carried Mcp-Session-Id.",
        [f"{modern} modern-era exchanges"],
        bad,
        "the 2026-07-28 era has no sessions: a client that went modern (or whose server was upgraded) must drop "
        "any session id it kept from the handshake and never send one (docs/eras.md)",
    )


def assert_stopped_after_era_refusal(figures: ServerFigures) -> None:
    """The client's ``initialize`` was refused for its era and it stopped there; see ``FakeMCPServer``'s method."""
    __tracebackhide__ = True
    refusals = [e for e in figures.exchanges if e.rpc_method == "initialize" and e.error_code == -32022]
    if not refusals:
        _fail(
            figures,
            "assert_stopped_after_era_refusal(): no initialize was refused for its era.",
            [f"{figures.initialize_count} initialize, {len(figures.exchanges)} exchanges"],
            None,
            "serve the client with era='modern' (or script on('initialize').refuse_initialize()) to meet a "
            "modern-only server",
        )
    first = refusals[0]
    after = [e for e in figures.exchanges if e.seq > first.seq]
    if not after:
        return
    marks = {first.seq: "refused: the server speaks only 2026-07-28"}
    marks.update({e.seq: "sent after the refusal" for e in after})
    _fail(
        figures,
        f"assert_stopped_after_era_refusal(): {plural(len(after), 'request')} followed the refused initialize.",
        [f"{len(refusals)} initialize refused with -32022"],
        marks,
        "a handshake-only client meeting a modern-only server must fail with the versions the server named "
        "(error.data.supported), not retry the handshake or go on without a session",
    )
