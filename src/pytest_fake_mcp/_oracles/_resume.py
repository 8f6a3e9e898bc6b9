"""The resume oracle: a stream cut after an event id (a POST's, or the GET stream) was resumed (GET +
``Last-Event-ID``), not sent again."""

from __future__ import annotations

from collections.abc import Mapping

from .._record._journal import Exchange, Outcome
from ._figures import ServerFigures, fail

__all__ = ["assert_resumed", "resume_findings"]

_CUT = (Outcome.CUT, Outcome.RESET)


def _answered(exchange: Exchange) -> bool:
    return any(m.get("id") == exchange.rpc_id and "method" not in m for m in exchange.response_messages)


def _delivers(resume: Exchange, rpc_id: object) -> bool:
    """Whether a resuming GET sent the answer to request ``rpc_id`` (replayed or live)."""
    return any(m.get("id") == rpc_id and "method" not in m for m in resume.response_messages)


def _reopened(exchange: Exchange, cut: Exchange) -> bool:
    """A later plain GET (no ``Last-Event-ID``) of the cut GET stream's session."""
    return (
        exchange.seq > cut.seq
        and exchange.http_method == "GET"
        and not exchange.last_event_id
        and exchange.session_id == cut.session_id
    )


def _params(exchange: Exchange) -> object:
    body = exchange.request_body
    params = body.get("params") if isinstance(body, dict) else None
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if k != "_meta"}
    return params


def resume_findings(
    figures: ServerFigures, delivered: Mapping[int, frozenset[str]], stored: Mapping[int, frozenset[str]]
) -> list[tuple[Exchange, list[Exchange], list[Exchange]]]:
    """Each POST stream the fake cut before its response, and each GET stream it cut, after the client got an
    event id (``delivered``: the ids each stream's client got, by seq; ``stored``: every id of it, for a GET the
    session's whole GET stream), with the GETs that resumed it and the POSTs that sent its request again (a GET
    stream has no request to send again)."""
    exchanges = figures.exchanges
    found: list[tuple[Exchange, list[Exchange], list[Exchange]]] = []
    for cut in exchanges:
        post = cut.http_method == "POST" and cut.kind == "request"
        if not (post or cut.http_method == "GET") or cut.outcome not in _CUT or (post and _answered(cut)):
            continue
        if not delivered.get(cut.seq):
            continue  # no id reached the client: nothing to resume from
        ids = stored.get(cut.seq, frozenset())
        later = [e for e in exchanges if e.seq > cut.seq]
        resumes = [e for e in later if e.http_method == "GET" and e.last_event_id in ids]
        if not post:
            found.append((cut, resumes, []))
            continue
        # Once a resume delivered its answer, the same request again is a new call of the client's, not a re-send.
        answered_at = next((e.seq for e in resumes if _delivers(e, cut.rpc_id)), None)
        again = [
            e
            for e in later
            if e.http_method == "POST"
            and (answered_at is None or e.seq < answered_at)
            and e.rpc_method == cut.rpc_method
            and e.target == cut.target
            and _params(e) == _params(cut)
        ]
        found.append((cut, resumes, again))
    return found


def assert_resumed(
    figures: ServerFigures, delivered: Mapping[int, frozenset[str]], stored: Mapping[int, frozenset[str]]
) -> None:
    """Every stream cut after an event id (a POST's, or a session's GET stream) was resumed with ``Last-Event-ID``
    naming one of its events, and a POST's request was not sent again."""
    __tracebackhide__ = True
    findings = resume_findings(figures, delivered, stored)
    if not findings:
        fail(
            figures,
            "no stream was cut after an event id, so there was nothing to resume",
            [f"exchanges: {len(figures.exchanges)}; cut POST streams: none that gave the client an id"],
            None,
            "cut one with event_store=True and fake_mcp_server.on('tools/call').cut_after_events(1), or the GET "
            "stream with on(http_method='GET').cut_after_events(1) (docs/resumable-streams.md)",
        )
    bad = [(cut, resumes, again) for cut, resumes, again in findings if not resumes or again]
    if not bad:
        return
    facts = []
    marks: dict[int, str] = {}
    for cut, resumes, again in bad:
        what = " ".join(filter(None, [cut.rpc_method, cut.target])) or "GET stream"
        marks[cut.seq] = f"cut after an id: {what}"
        resumed = f"resumed by GET #{resumes[0].seq}" if resumes else "never resumed (no GET named its events)"
        if cut.http_method == "GET":
            plain = [e.seq for e in figures.exchanges if _reopened(e, cut)]
            sent = f"reopened without Last-Event-ID as #{plain[0]}" if plain else "not reopened"
            if plain:
                marks[plain[0]] = "reopened without Last-Event-ID"
            facts.append(f"#{cut.seq} {what}: {resumed}; {sent} (what it sent meanwhile was lost)")
            continue
        sent = f"sent again as #{', #'.join(str(e.seq) for e in again)}" if again else "not sent again"
        facts.append(f"#{cut.seq} {what}: {resumed}; {sent}")
        for e in again:
            marks[e.seq] = f"{what} sent again"
    hint = (
        "the client re-sent a request whose stream it could have resumed: the server ran it twice "
        "(docs/resumable-streams.md#what-a-client-should-do)"
        if any(again for _, _, again in bad)
        else "a client should GET the endpoint with Last-Event-ID set to the last event id it saw "
        "(docs/resumable-streams.md#what-a-client-should-do)"
    )
    fail(figures, "a cut stream was not resumed", facts, marks, hint)
