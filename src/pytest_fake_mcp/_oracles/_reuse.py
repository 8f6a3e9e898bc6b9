"""The session oracles: ``initialize`` counts, session figures, reuse, stale ids and closing.

Each is an ``assert_*`` function over :class:`ServerFigures`; they share the handshake analysis
(:func:`reuse_violations`) and ``_record``'s "told it ended" facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._record._analysis import opened_together, short_ids, stale_uses, told_ended
from .._record._journal import Exchange
from .._record._report import describe_sessions, plural
from .._record._sessions import EndReason, SessionRecord
from .._wire._protocol import AUTH_SERVER_PATHS as _AUTH_PATHS
from ._figures import ServerFigures, count, fail

__all__ = [
    "REOPEN_ONCE_HINT",
    "assert_all_sessions_closed",
    "assert_initialize_count",
    "assert_no_stale_session_ids",
    "assert_session_reused",
    "assert_sessions",
    "failure_hint",
    "reuse_violations",
]

_SERVER_ENDED = frozenset({EndReason.DROPPED, EndReason.RESTART, EndReason.IDLE})

REOPEN_ONCE_HINT = (
    "let the first caller that sees the 404 open the new session and the others wait for it "
    "(single-flight, keyed by the lost session: docs/failure-modes.md#r08)"
)
"""What to do when every caller that met one lost session's 404 opened its own session (R08): the oracles' hint
and the contract suite's concurrent-404 scenario say it in these words."""


def _sessionless_hint(figures: ServerFigures) -> str | None:
    """The hint for a client that opened no session because it spoke the sessionless 2026-07-28 era (no
    ``initialize`` at all, modern-era exchanges), which ``era="dual"`` (mcp2's default) serves beside the handshake."""
    if any(e.rpc_method == "initialize" for e in figures.exchanges):
        return None
    if not any(e.era == "modern" for e in figures.exchanges):
        return None
    return (
        "the client spoke the sessionless 2026-07-28 protocol, which has no initialize and no session (the fake "
        'serves it beside the handshake by default, era="dual"); to test how the client keeps a session, serve '
        'the handshake only: @pytest.mark.fake_mcp_server(era="handshake") (docs/eras.md)'
    )


def assert_initialize_count(figures: ServerFigures, n: int) -> None:
    """Exactly ``n`` ``initialize`` requests arrived, however they were answered."""
    __tracebackhide__ = True
    count("n", n)
    inits = [e for e in figures.exchanges if e.rpc_method == "initialize"]
    if len(inits) == n:
        return
    marks = {e.seq: f"initialize {i} of {len(inits)}" for i, e in enumerate(inits, 1) if i > n}
    calls = sum(1 for e in figures.exchanges if e.rpc_method == "tools/call")
    server_ended = sum(1 for s in figures.sessions if s.end_reason in _SERVER_ENDED)
    if not figures.exchanges:
        hint = f"the client never reached the fake; point it at {figures.url}"
    elif not inits:
        hint = _sessionless_hint(figures) or (
            "requests arrived but no initialize: the client skipped the handshake (a persisted session id?)"
        )
    elif len(inits) > n and any(e.session_id is not None for e in inits):
        hint = "an initialize carried a session id: the client re-initialized an old session instead of opening one"
    elif len(inits) > n and (together := opened_together(figures.exchanges)):
        hint = _concurrent_initialize_hint(figures, together)
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
    fail(
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


def _concurrent_initialize_hint(figures: ServerFigures, together: list[tuple[Exchange, Exchange]]) -> str:
    """The hint for ``initialize`` requests opened together (:func:`opened_together`): after a 404 (R08), else C02.

    Judged by order, never by clock readings, so a run on a socket and the same run under
    virtual time get the same hint.
    """
    first = min(earlier.seq for earlier, _ in together)
    if any(e.status == 404 and e.seq < first for e in figures.exchanges):
        return (
            "initialize requests were in flight at the same time after a 404: each caller that met it opened its "
            f"own session; {REOPEN_ONCE_HINT}"
        )
    return (
        "initialize requests were in flight at the same time: concurrent first calls each opened a session; "
        "make opening single-flight (one task opens, the others await it)"
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
            wanted_by[str(reason)] = count(f"ended_by[{key!r}]", value)
            if wanted_by[str(reason)] == 0:
                del wanted_by[str(reason)]
    checks: list[tuple[str, Any, Any]] = []
    for name, want, actual in (
        ("created", created, figures.sessions_created),
        ("ended", ended, figures.sessions_ended),
        ("live", live, figures.live_sessions),
    ):
        if want is not None:
            checks.append((name, count(name, want), actual))
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
    elif (sessionless := _sessionless_hint(figures)) is not None:
        hint = sessionless
    else:
        hint = "fake_mcp_server.sessions lists every session with how it began and ended"
    fail(
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
        fail(
            figures,
            "assert_session_reused(): no initialize opened a session, so there was no session to reuse.",
            [f"{figures.initialize_count} initialize, {len(figures.exchanges)} exchanges"],
            None,
            _sessionless_hint(figures) or f"the client never completed a handshake with {figures.url}",
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
    fail(
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
    fail(
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
    fail(
        figures,
        f"assert_all_sessions_closed(): {len(open_)} of {plural(len(handshakes), 'session')} "
        "the client opened got no DELETE.",
        facts,
        marks,
        "close the client on every path (the SDK transport sends DELETE on exit unless "
        "terminate_on_close=False; docs/failure-modes.md#t08), and assert after it is closed",
    )


def failure_hint(figures: ServerFigures) -> str | None:
    """What the exchanges say about a test that failed on an error of its own (the client's exception, the
    test's ``assert``), drawn under the diagram of its report; None when they say nothing the diagram does not.

    Only facts of the session's life are named, each with its docs entry: a dead session id sent again (R01), the
    404 of a lost session the client opened no new session after (the SDK clients surface it as their error:
    ``Session not found``, ``Session terminated``), or only 401s to a client that never asked for a token.
    """
    exchanges = sorted(figures.exchanges, key=lambda e: e.seq)
    short = short_ids([e.session_id for e in exchanges] + [s.id for s in figures.sessions])
    stale = stale_uses(exchanges, figures.sessions)
    if stale:
        first = min(stale)
        return (
            f"#{first} and {plural(len(stale) - 1, 'later exchange')} carried the id of a session the client had "
            "already been told was gone: after a 404, open a new session and drop the old id "
            "(docs/failure-modes.md#r01)"
            if len(stale) > 1
            else f"#{first} carried the id of a session the client had already been told was gone: after a 404, "
            "open a new session and drop the old id (docs/failure-modes.md#r01)"
        )
    endpoint = [e for e in exchanges if not e.path.startswith(_AUTH_PATHS)]
    if endpoint and all(e.status == 401 for e in endpoint) and len(endpoint) == len(exchanges):
        return (
            "every request was refused 401 and the client asked the authorization server nothing: this fake has "
            "auth=True and the client sent no token; give its HTTP client auth=HeadlessOAuth().provider(url), or "
            "a header with fake_mcp_server.issue_token() (docs/authorization.md)"
        )
    ended = {s.id: s for s in figures.sessions if s.end_reason in _SERVER_ENDED}
    for lost in exchanges:
        if lost.status != 404 or lost.session_id not in ended or lost.http_method == "DELETE":
            continue
        if any(e.rpc_method == "initialize" and e.seq > lost.seq for e in exchanges):
            continue
        reason = ended[lost.session_id].end_reason
        return (
            f"the server answered #{lost.seq} with 404: session {short[lost.session_id]} was gone ({reason}), "
            "and the client opened no new session after it, so an error it raised may be that 404; a client that "
            "recovers opens a new session once and retries the call (docs/failure-modes.md#r01)"
        )
    return None
