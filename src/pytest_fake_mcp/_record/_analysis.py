"""What the journal's data means: stale and harmless uses of session ids, unknown-tool calls, crossed tasks.

The facts both the oracles (``_oracles``) and the renderer (``_report``) rely on, decided once here: the
diagram's ``!`` marks and notes are :func:`stale_uses` and :func:`harmless_uses`, the very sets
``assert_no_stale_session_ids`` fails on. Session ids are shortened here too (:func:`short_ids`), since
every ``{seq: why}`` names them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from ._journal import Exchange
from ._sessions import SessionRecord

__all__ = [
    "CLIENT_CLOSED",
    "CROSSED_TASKS_HINT",
    "crossed_tasks",
    "event_order",
    "harmless_uses",
    "id_uses",
    "in_flight_together",
    "is_unknown_tool_call",
    "opened_together",
    "short_id",
    "short_ids",
    "stale_uses",
    "told_ended",
]

CLIENT_CLOSED: Final = "client closed (mark_client_closed)"
"""The journal event :meth:`FakeMCPServer.mark_client_closed` notes."""

_MIN_ID: Final = 4


def short_id(session_id: str | None) -> str:
    """The first four characters of a session id ('' for None)."""
    return "" if session_id is None else session_id[:_MIN_ID]


def short_ids(session_ids: Iterable[str | None]) -> dict[str, str]:
    """Each id shortened to the shortest common prefix length (at least 4) that keeps them apart."""
    ids = sorted({s for s in session_ids if s})
    width = _MIN_ID
    while width < max((len(s) for s in ids), default=0) and len({s[:width] for s in ids}) < len(ids):
        width += 1
    return {s: s[:width] for s in ids}


# --- session ids the client should not have sent -------------------------------------------------


def told_ended(
    exchanges: Sequence[Exchange], sessions: Sequence[SessionRecord] = ()
) -> dict[str, tuple[float, Exchange]]:
    """For each session id, when the client was first told its session is over, and by which exchange.

    The client is told by the first answer to a request carrying the id that began after the
    session ended on the server (whatever its status: usually the 404), by any 404 to a request
    carrying it, or by the 2xx to its own DELETE; the moment is when that answer was complete.
    """
    ended = {s.id: s.ended for s in sessions if s.ended is not None}
    told: dict[str, tuple[float, Exchange]] = {}
    for e in sorted(exchanges, key=lambda e: e.seq):
        sid = e.session_id
        if sid is None:
            continue
        end = ended.get(sid)
        if (
            (end is not None and e.started >= end)
            or e.status == 404
            or (e.http_method == "DELETE" and e.status is not None and 200 <= e.status < 300)
        ):
            at = math.inf if e.ended is None else e.ended
            if sid not in told or at < told[sid][0]:
                told[sid] = (at, e)
    return told


def stale_uses(
    exchanges: Sequence[Exchange], sessions: Sequence[SessionRecord] = (), *, strict: bool = False
) -> dict[int, str]:
    """The exchanges that carried a session id they should not have: ``{seq: why}``.

    Two rules (the definition behind ``assert_no_stale_session_ids``):

    * An ``initialize`` that carries any ``Mcp-Session-Id``.
    * Once the client was told a session is over (:func:`told_ended`), a request carrying its id
      that started after that answer was complete: a retry, a GET reconnect, a second DELETE. The
      request that learnt it, and any that started before that answer was complete (sent alongside
      it), are not stale. The first ``notifications/initialized`` of a session is never stale: the
      2.x SDK client's DELETE can overtake it; nor is the first GET stream after it, which the SDK
      clients open as they send that notification, before its answer can tell them anything. A
      later GET (a reconnect) is stale.

    One DELETE of a session the *server* ended (the SDK transport's close after a 404) is harmless
    and not stale (see :func:`harmless_uses`) unless ``strict``.

    Without ``sessions`` only the answers count (404s and DELETEs), which is what a journal alone shows.
    """
    return id_uses(exchanges, sessions, strict=strict)[0]


def harmless_uses(exchanges: Sequence[Exchange], sessions: Sequence[SessionRecord] = ()) -> dict[int, str]:
    """The DELETEs of a session the server had already ended, one per session: allowed, shown as a note.

    A client on the SDK's default transport (``terminate_on_close=True``) that meets a 404 opens a new
    transport and closes the old one, which sends one DELETE with the dead id (answered 404). The spec
    allows it and it harms nothing; ``assert_no_stale_session_ids(strict=True)`` counts it as stale.
    """
    return id_uses(exchanges, sessions, strict=False)[1]


def id_uses(
    exchanges: Sequence[Exchange], sessions: Sequence[SessionRecord], *, strict: bool
) -> tuple[dict[int, str], dict[int, str]]:
    """``(stale, harmless)`` uses of session ids, each ``{seq: why}``.

    "Started after the client was told" is read on the clock. Where the clock reads alike (virtual time, where a
    whole run can read one instant) it cannot say, and neither can the journal's order alone: the fake may finish
    a 404 before a request the client had already decided to send arrives. There only a request that is certainly
    the client's answer to the 404 counts: the very request the 404 answered, sent again with the same id
    (:func:`_retried_after_404`).
    """
    told = told_ended(exchanges, sessions)
    refused = _refused_requests(exchanges)
    short = short_ids(e.session_id for e in exchanges)
    stale: dict[int, str] = {}
    harmless: dict[int, str] = {}
    notified: set[str] = set()
    streamed: set[str] = set()
    deleted: set[str] = set()
    for e in sorted(exchanges, key=lambda e: e.seq):
        sid = e.session_id
        if sid is None:
            continue
        if e.rpc_method == "notifications/initialized" and sid not in notified:
            notified.add(sid)
            continue
        if e.http_method == "GET" and sid in notified and sid not in streamed:
            streamed.add(sid)
            continue
        learner = _learnt_before(e, told.get(sid), refused)
        if learner is not None:
            by_server = not (learner.http_method == "DELETE" and learner.status != 404)
            how = learner.status if by_server else "DELETE"
            if e.rpc_method == "initialize":
                stale[e.seq] = "stale session id on initialize"
            elif e.http_method == "DELETE" and by_server and sid not in deleted and not strict:
                harmless[e.seq] = f"note: DELETE of {short[sid]}, already ended ({how} at #{learner.seq}): harmless"
            else:
                stale[e.seq] = f"stale: {short[sid]} already ended ({how or learner.outcome} at #{learner.seq})"
        elif e.rpc_method == "initialize":
            stale[e.seq] = "session id on initialize"
        if e.http_method == "DELETE":
            deleted.add(sid)
    return stale, harmless


def _request_key(e: Exchange) -> tuple[str | None, str, str | None, str] | None:
    """What makes a request the same request again: its session id, HTTP and JSON-RPC method and JSON-RPC id."""
    if e.rpc_id is None or isinstance(e.rpc_id, (dict, list)):
        return None
    return (e.session_id, e.http_method, e.rpc_method, repr(e.rpc_id))


def _refused_requests(exchanges: Sequence[Exchange]) -> dict[tuple[str | None, str, str | None, str], Exchange]:
    """Each request the fake answered 404 (by its `_request_key`), the first to end in the journal's count."""
    refused: dict[tuple[str | None, str, str | None, str], Exchange] = {}
    for e in exchanges:
        key = _request_key(e)
        if key is None or e.status != 404 or e.ended_order is None or not e.started_order:
            continue
        first = refused.get(key)
        if first is None or e.ended_order < (first.ended_order or math.inf):
            refused[key] = e
    return refused


def _retried_after_404(
    e: Exchange, refused: Mapping[tuple[str | None, str, str | None, str], Exchange]
) -> Exchange | None:
    """The 404 that ``e`` sends again: the same request (same session id, methods and JSON-RPC id), answered
    404 and complete before ``e`` started in the journal's count. The client saw that 404, since it answers it."""
    key = _request_key(e)
    first = None if key is None else refused.get(key)
    if first is None or first.seq == e.seq or not e.started_order:
        return None
    return first if e.started_order > (first.ended_order or math.inf) else None


def _learnt_before(
    e: Exchange,
    told: tuple[float, Exchange] | None,
    refused: Mapping[tuple[str | None, str, str | None, str], Exchange],
) -> Exchange | None:
    """The exchange whose answer told the client, before ``e`` started, that ``e``'s session is over (or None).

    The clock decides when it can: ``e`` started after ``told`` (:func:`told_ended`) was complete. When ``e``
    started at the very clock reading ``told`` was complete at, ``e`` counts only if it is the request a 404
    answered, sent again (:func:`_retried_after_404`): a request sent alongside the 404's may reach the fake after
    the 404 was complete, in the same reading, without the client having seen it, and a false alarm is worse
    than a miss.
    """
    if told is None:
        return None
    at, learner = told
    if e.started > at:
        return learner
    if e.started == at:
        return _retried_after_404(e, refused)
    return None


# --- order: which exchanges were in flight together ---------------------------------------------


def event_order(
    exchanges: Sequence[Exchange],
) -> tuple[Callable[[Exchange], float], Callable[[Exchange], float]]:
    """``(start, end)``: where each exchange began and ended, comparable across ``exchanges``.

    The journal's count of starts and ends (``started_order``, ``ended_order``) when every exchange has one: it
    orders them on a socket and under virtual time alike, where every clock read of a run can be equal. Else
    (exchanges not from a journal) the clock. An exchange still in flight ends at infinity.
    """
    if exchanges and all(e.started_order for e in exchanges):
        return (
            lambda e: float(e.started_order),
            lambda e: math.inf if e.ended_order is None else float(e.ended_order),
        )
    return (lambda e: e.started), (lambda e: math.inf if e.ended is None else e.ended)


def in_flight_together(exchanges: Sequence[Exchange]) -> list[tuple[Exchange, Exchange]]:
    """The pairs, in start order, of an exchange and the next one to start while it was still in flight.

    Any two exchanges in flight at once make at least one such pair.
    """
    start, end = event_order(exchanges)
    ordered = sorted(exchanges, key=start)
    return [(earlier, later) for earlier, later in itertools.pairwise(ordered) if start(later) < end(earlier)]


def opened_together(exchanges: Sequence[Exchange]) -> list[tuple[Exchange, Exchange]]:
    """The pairs of ``initialize`` requests, one and the next to arrive, that the client sent without waiting for
    the first session to be up: the next arrived while the first was in flight (:func:`in_flight_together`), or
    before any request used the session the first one opened (its ``notifications/initialized``, which an SDK
    client sends as soon as the answer arrives).

    Judged by order alone, so a run on a socket and the same run under virtual time (where the fake answers at
    once and every clock read is equal) find the same pairs.
    """
    inits = sorted((e for e in exchanges if e.rpc_method == "initialize"), key=lambda e: e.seq)
    overlapping = {(a.seq, b.seq) for a, b in in_flight_together(inits)}
    used: dict[str, list[int]] = {}
    for e in exchanges:
        if e.session_id is not None:
            used.setdefault(e.session_id, []).append(e.seq)
    pairs = []
    for first, then in itertools.pairwise(inits):
        minted = first.response_session_id
        unused = minted is not None and not any(first.seq < seq < then.seq for seq in used.get(minted, ()))
        if (first.seq, then.seq) in overlapping or unused:
            pairs.append((first, then))
    return pairs


# --- calls and tasks ------------------------------------------------------------------------------


def is_unknown_tool_call(exchange: Exchange) -> bool:
    """True if ``exchange`` called a tool the fake does not serve (answered ``Unknown tool: <name>``)."""
    if exchange.rpc_method != "tools/call" or exchange.kind != "request":
        return False
    expected = f"Unknown tool: {exchange.target}"
    for message in exchange.response_messages:
        result = message.get("result")
        if isinstance(result, dict) and result.get("isError") is True:
            content = result.get("content")
            if isinstance(content, list) and content and isinstance(content[0], dict):
                return content[0].get("text") == expected
    return False


CROSSED_TASKS_HINT: Final = (
    "enter and exit the SDK's contexts (streamable_http_client, ClientSession) in one task: give each "
    "session an owner task that opens it, waits, and closes it (docs/failure-modes.md#t01)"
)
"""The fix of anyio's "Attempted to exit cancel scope in a different task than it was entered in"."""


def crossed_tasks(exc: BaseException | None) -> bool:
    """Whether ``exc`` (its groups, causes and contexts included) is anyio's cancel-scope error of a context
    entered in one task and exited in another."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if "cancel scope in a different task" in str(e):
            return True
        pending += [e.__cause__, e.__context__]
        if isinstance(e, BaseExceptionGroup):
            pending += e.exceptions
    return False
