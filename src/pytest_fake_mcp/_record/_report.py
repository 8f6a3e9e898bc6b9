"""Renders journal data for people: the sequence diagram, failure messages and the HTML trace.

Every message that shows exchanges goes through here, so they all have one shape: what was
expected and what was found, the exchanges as a client/server diagram, then one hint. What the
exchanges mean (which id is stale, which DELETE harmless) is decided in ``_analysis``.

Over the 400-line soft cap on purpose: the text diagram and the HTML trace are drawn from the same
rows (:func:`diagram_rows`); splitting them would split one layout in two.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from .._wire._protocol import AUTH_SERVER_PATHS as _AUTH_PATHS
from ._analysis import CLIENT_CLOSED, id_uses, is_unknown_tool_call, short_id, short_ids
from ._journal import Exchange, JournalEvent, Outcome
from ._sessions import EndReason, SessionRecord

__all__ = [
    "MAX_EXCHANGES",
    "DiagramRow",
    "TraceData",
    "describe_sessions",
    "diagram_legend",
    "diagram_rows",
    "diagram_shown",
    "mark_shown",
    "numbered",
    "plural",
    "render_diagram",
    "render_failure",
    "render_held_past_bound",
    "render_html",
    "render_unfired_faults",
]

_MAX_LABEL: Final = 56
_SLOW: Final = 0.1
_KEEP_HEAD: Final = 20
_KEEP_TAIL: Final = 30
MAX_EXCHANGES: Final = 80
"""Past this many exchanges the diagram elides unremarkable runs in the middle."""


# --- the diagram ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagramRow:
    """One line of the diagram: an exchange arrow, a fault or event, or an elided run."""

    kind: Literal["exchange", "fault", "event", "closed", "elided"]
    text: str
    """The arrow's label, or the fault/event/elision text."""
    elapsed_ms: float | None = None
    when: str = ""
    """The left column: the time since the first row (``12.3ms``), or, where the clock cannot order the rows
    (virtual time: :func:`numbered`), the exchange's number ``#n``, its place in arrival order."""
    result: str = ""
    note: str = ""
    exchange: Exchange | None = None


def _label(exchange: Exchange, short: Mapping[str, str], stale: bool) -> str:
    if exchange.path.startswith(_AUTH_PATHS):  # the authorization server's exchanges (docs/authorization.md)
        body = exchange.request_body
        grant = body.get("grant_type") if isinstance(body, dict) else None
        return f"{exchange.http_method} {exchange.path}" + (f" {grant}" if isinstance(grant, str) else "")
    if exchange.http_method == "POST":
        if exchange.kind == "response":
            label = f"response id={exchange.rpc_id}"
        else:
            label = exchange.rpc_method or "(invalid body)"
            if exchange.target:
                label += f" {exchange.target}"
    elif exchange.http_method == "GET":
        label = "GET stream" + (f" Last-Event-ID={exchange.last_event_id}" if exchange.last_event_id else "")
    else:
        label = exchange.http_method
    if len(label) > _MAX_LABEL:
        label = label[: _MAX_LABEL - 1] + "…"
    if exchange.session_id is not None:
        label += f" [{short.get(exchange.session_id, short_id(exchange.session_id))}{'!' if stale else ''}]"
    return label


def _result(exchange: Exchange, short: Mapping[str, str], kept: set[str] | None) -> str:
    if exchange.status is None:
        text = {
            Outcome.IN_FLIGHT: "… (no answer yet)",
            Outcome.RESET: "connection reset",
            Outcome.RELEASED: "held, never answered",
            Outcome.DISCONNECTED: "client left before the answer",
        }.get(exchange.outcome, f"no status ({exchange.outcome})")
    else:
        text = str(exchange.status)
    new_sid = exchange.response_session_id
    if new_sid is not None and new_sid != exchange.session_id:
        text += f" sid={short.get(new_sid, short_id(new_sid))}"
        if kept is not None and new_sid not in kept:
            text += " (not kept)"
    if exchange.error_code is not None and exchange.status == 200:
        text += f" error {exchange.error_code}"
    elif is_unknown_tool_call(exchange):
        text += " unknown tool"
    if exchange.status is not None and exchange.outcome in (Outcome.CUT, Outcome.DISCONNECTED, Outcome.RESET):
        text += f" ({exchange.outcome})"
    elif exchange.outcome is Outcome.IN_FLIGHT and exchange.response_format == "sse":
        text += " …"  # a stream still open; a whole answer already sent is only not journaled yet
    duration = exchange.duration
    if duration is not None and duration >= _SLOW:
        text += f" after {duration * 1000:.0f}ms" if duration < 1 else f" after {duration:.1f}s"
    return text


def diagram_rows(
    exchanges: Sequence[Exchange],
    events: Sequence[JournalEvent] = (),
    *,
    sessions: Sequence[SessionRecord] | None = None,
    marks: Mapping[int, str] | None = None,
    max_exchanges: int = MAX_EXCHANGES,
) -> list[DiagramRow]:
    """The diagram as rows, in order; ``marks`` (``{seq: note}``) defaults to :func:`stale_uses`."""
    exchanges = sorted(exchanges, key=lambda e: e.seq)
    stale, harmless = id_uses(exchanges, sessions or (), strict=False)
    notes = {**harmless, **stale} if marks is None else {**harmless, **marks}
    short = short_ids([e.session_id for e in exchanges] + [e.response_session_id for e in exchanges])
    kept = None if sessions is None else {s.id for s in sessions}
    times = [e.started for e in exchanges] + [ev.at for ev in events]
    t0 = min(times) if times else 0.0
    by_number = numbered(exchanges)
    moved = len({e.started for e in exchanges}) > 1

    def when(exchange: Exchange) -> str:
        elapsed = f"{(exchange.started - t0) * 1000:.1f}ms"
        if not by_number:
            return elapsed
        return f"#{exchange.seq} {elapsed}" if moved else f"#{exchange.seq}"

    shown = _shown(exchanges, notes, max_exchanges)
    rows: list[DiagramRow] = []
    pending = sorted(events, key=lambda ev: (ev.after_seq, ev.at))
    hidden: list[Exchange] = []

    def flush_hidden() -> None:
        if hidden:
            rows.append(
                DiagramRow(
                    kind="elided",
                    text=f"⋮ {len(hidden)} exchanges not shown (#{hidden[0].seq}–#{hidden[-1].seq})",
                )
            )
            hidden.clear()

    def event_row(event: JournalEvent) -> DiagramRow:
        kind: Literal["event", "closed"] = "closed" if event.text == CLIENT_CLOSED else "event"
        return DiagramRow(kind=kind, text=event.text)

    # The era is drawn once the 2026-07-28 era is in play (a modern exchange or a discover probe); a
    # handshake-only conversation stays as it always was drawn.
    with_era = any(e.era == "modern" or e.rpc_method == "server/discover" for e in exchanges)
    for exchange in exchanges:
        while pending and pending[0].after_seq < exchange.seq:
            flush_hidden()
            rows.append(event_row(pending.pop(0)))
        if exchange.seq not in shown:
            hidden.append(exchange)
            continue
        flush_hidden()
        rows.append(
            DiagramRow(
                kind="exchange",
                text=_label(exchange, short, exchange.seq in stale or notes.get(exchange.seq, "").startswith("stale")),
                elapsed_ms=(exchange.started - t0) * 1000,
                when=when(exchange),
                result=_result(exchange, short, kept) + (f" [{exchange.era or '-'}]" if with_era else ""),
                note=notes.get(exchange.seq, ""),
                exchange=exchange,
            )
        )
        rows.extend(DiagramRow(kind="fault", text=f"fault: {fault}") for fault in exchange.faults)
    flush_hidden()
    rows.extend(event_row(event) for event in pending)
    return rows


def numbered(exchanges: Sequence[Exchange]) -> bool:
    """Whether the diagram numbers its rows: two exchanges started at one clock reading, so time cannot order them.

    Under virtual time (`explore`, a race) the clock moves only when every task waits on a timer, so a whole run
    can read ``0.0ms``; then each row shows ``#n``, the order the exchanges reached the fake (and, if the clock did
    move, the time too).
    """
    starts = [e.started for e in exchanges]
    return len(set(starts)) < len(starts)


def diagram_legend(exchanges: Sequence[Exchange], sessions: Sequence[SessionRecord] | None = None) -> str:
    """The line above a diagram in a failure message: what its columns mean (and ``(not kept)``, when drawn)."""
    order = (
        "#n: arrival order, as the clock read alike for several (virtual time moves only on timers);"
        if numbered(exchanges)
        else "arrival order,"
    )
    legend = f"Exchanges ({order} each answer on its request's row; ✂ under a row acted on it"
    if sessions is not None and _not_kept(exchanges, {s.id for s in sessions}):
        legend += (
            "; sid=… (not kept): the answer named a session id the server then did not keep, as the mcp 2.x server "
            "does when it refuses a request that had none (docs/protocol.md)"
        )
    return legend + "):"


def _not_kept(exchanges: Sequence[Exchange], kept: set[str]) -> bool:
    named = (e.response_session_id for e in exchanges if e.response_session_id != e.session_id)
    return any(sid is not None and sid not in kept for sid in named)


def _shown(exchanges: Sequence[Exchange], notes: Mapping[int, str], limit: int) -> set[int]:
    """The seqs to draw: all of them, or past ``limit`` the head, the tail and the remarkable ones."""
    seqs = [e.seq for e in exchanges]
    if len(seqs) <= limit:
        return set(seqs)
    keep = set(seqs[:_KEEP_HEAD]) | set(seqs[-_KEEP_TAIL:])
    for index, exchange in enumerate(exchanges):
        if exchange.seq in notes or exchange.faults:
            keep.update(seqs[max(0, index - 1) : index + 2])
    # A run of one or two hidden exchanges costs as many lines as its elision line: show it.
    run: list[int] = []
    for seq in [*seqs, None]:
        if seq is not None and seq not in keep:
            run.append(seq)
            continue
        if 0 < len(run) < 3:
            keep.update(run)
        run = []
    return keep


def render_diagram(
    exchanges: Sequence[Exchange],
    events: Sequence[JournalEvent] = (),
    *,
    sessions: Sequence[SessionRecord] | None = None,
    marks: Mapping[int, str] | None = None,
    max_exchanges: int = MAX_EXCHANGES,
) -> str:
    """The exchanges as a client/server sequence diagram: one arrow an exchange, time on the left.

    Session ids are shortened (``[3f2a]``); ``!`` marks an id used after the client was told its
    session ended (:func:`stale_uses`); ``✂`` lines are faults, under the exchange they acted on,
    or events (``drop_session``) where they happened. ``marks`` maps an exchange's ``seq`` to a
    note drawn at the end of its line (default: why it is stale). Example::

         0.0ms  client ── initialize ────────────────────────▶ server   200 sid=3f2a
         1.2ms  client ── notifications/initialized [3f2a] ──▶ server   202
         2.0ms  client ── tools/call echo [3f2a] ────────────▶ server   200
                ✂ drop_session(3f2a9c00)
         9.8ms  client ── tools/call echo [3f2a] ────────────▶ server   404
        10.5ms  client ── initialize [3f2a!] ────────────────▶ server   404   ← stale session id on initialize

    Once the 2026-07-28 era is in play (a modern exchange, or a ``server/discover`` probe), every answer
    ends with the era that gave it: ``200 [modern]``, ``400 [handshake]``.

    Where the clock cannot order the rows (two started at one reading: under virtual time, in a race, it moves
    only on timers), each row shows ``#n``, the order its request reached the fake, then the time if it moved
    at all (:func:`numbered`; :func:`diagram_legend` says so above the diagram)::

        #1  client ── initialize ────────────────────────▶ server   200 sid=3f2a
        #2  client ── initialize ────────────────────────▶ server   200 sid=9c41
        #3  client ── notifications/initialized [3f2a] ──▶ server   202
    """
    if not exchanges and not events:
        return "(no exchanges with the fake MCP server)"
    rows = diagram_rows(exchanges, events, sessions=sessions, marks=marks, max_exchanges=max_exchanges)
    arrows = [r for r in rows if r.kind == "exchange"]
    time_width = max((len(r.when) for r in arrows), default=5)
    label_width = max((len(r.text) for r in arrows), default=0)
    result_width = max((len(r.result) for r in arrows if r.note), default=0)
    pad = " " * (time_width + 2)
    glyph = {"fault": "✂ ", "event": "✂ ", "closed": "■ ", "elided": ""}
    lines = []
    for row in rows:
        if row.kind != "exchange":
            lines.append(f"{pad}{glyph[row.kind]}{row.text}")
            continue
        arrow = f"── {row.text} " + "─" * (label_width - len(row.text) + 2) + "▶"
        line = f"{row.when:>{time_width}}  client {arrow} server   "
        line += f"{row.result:<{result_width}}   ← {row.note}" if row.note else row.result
        lines.append(line)
    return "\n".join(lines)


# --- failure messages ----------------------------------------------------------------------------


_SHOWN: Final = "_fake_mcp_diagram_shown"


def mark_shown(error: BaseException, url: str) -> BaseException:
    """Note on ``error`` that its message already draws the diagram of the server at ``url``."""
    shown: frozenset[str] = getattr(error, _SHOWN, frozenset())
    setattr(error, _SHOWN, shown | {url})
    return error


def diagram_shown(error: BaseException | None, url: str) -> bool:
    """True if ``error``'s message already draws the diagram of the server at ``url`` (see :func:`mark_shown`)."""
    return error is not None and url in getattr(error, _SHOWN, frozenset())


def render_failure(
    headline: str,
    facts: Sequence[str],
    exchanges: Sequence[Exchange],
    events: Sequence[JournalEvent],
    sessions: Sequence[SessionRecord],
    *,
    marks: Mapping[int, str] | None = None,
    hint: str,
) -> str:
    """A failing helper's message: expected vs actual, the figures behind it, the diagram, one hint."""
    parts = [headline]
    parts += [f"  {fact}" for fact in facts]
    parts.append(diagram_legend(exchanges, sessions))
    diagram = render_diagram(exchanges, events, sessions=sessions, marks=marks)
    parts += [f"  {line}" for line in diagram.splitlines()]
    parts.append(f"Hint: {hint}")
    return "\n".join(parts)


def describe_sessions(sessions: Sequence[SessionRecord], exchanges: Sequence[Exchange]) -> list[str]:
    """One line per session: its short id, how it began and ended, and how much it carried."""
    short = short_ids([s.id for s in sessions] + [e.session_id for e in exchanges])
    lines = []
    for s in sessions:
        state = "live" if s.live else f"ended by {_ended_by(s.end_reason)}"
        lines.append(
            f"session {short.get(s.id, short_id(s.id))}: opened by #{s.created_by}, "
            f"{s.initialize_count} initialize, {plural(_carried(s), 'later request')} carried its id, {state}"
        )
    return lines


def plural(n: int, word: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _carried(session: SessionRecord) -> int:
    """The exchanges that carried the session's id: its ``requests`` without the one that minted it."""
    return sum(1 for seq in session.requests if seq != session.created_by)


def _ended_by(reason: EndReason | None) -> str:
    return (
        {
            EndReason.DELETE: "the client's DELETE",
            EndReason.DROPPED: "a drop (drop_session or a fault)",
            EndReason.RESTART: "a restart",
            EndReason.IDLE: "idle expiry",
        }.get(reason, str(reason))
        if reason is not None
        else "nothing"
    )


# --- the HTML trace (--fake-mcp-trace) -------------------------------------------------------------

_CSS: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.2em;word-break:break-all}h2{font-size:1.05em;margin-top:2em}
pre{background:#f6f6f6;padding:1em;overflow:auto;font:12px/1.35 ui-monospace,monospace}
table.seq{border-collapse:collapse;font:13px ui-monospace,monospace}
table.seq td{padding:2px 8px;white-space:nowrap}
td.t{text-align:right;color:#777}td.c,td.s{font-weight:bold;border-left:2px solid #999;border-right:2px solid #999}
td.a{position:relative;min-width:22em;text-align:center;border-bottom:2px solid #36c}
td.a::after{content:"▶";position:absolute;right:-6px;bottom:-9px;color:#36c}
tr.stale td.a{border-bottom-color:#c33;color:#c33}tr.stale td.a::after{color:#c33}
td.n{color:#c33;font-weight:bold}td.r.e{color:#c33}
tr.ev td{color:#a50;font-style:italic}tr.closed td{color:#555}tr.el td{color:#999}
details{margin:.2em 0}summary{cursor:pointer;font-family:ui-monospace,monospace}
"""


def render_html(title: str, failure: str, servers: Sequence[tuple[str, TraceData]]) -> str:
    """A self-contained HTML page (no scripts, no external assets) showing each server's exchanges."""
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"]
    if failure:
        body.append(f"<details open><summary>failure</summary><pre>{esc(failure)}</pre></details>")
    for name, data in servers:
        body.append(f"<h2>{esc(name)}</h2>")
        rows = diagram_rows(data.exchanges, data.events, sessions=data.sessions, max_exchanges=10**9)
        body.append('<table class="seq">')
        body.append('<tr><td></td><td class="c">client</td><td></td><td class="s">server</td><td></td><td></td></tr>')
        for row in rows:
            if row.kind != "exchange":
                cls = {"fault": "ev", "event": "ev", "closed": "closed", "elided": "el"}[row.kind]
                glyph = {"fault": "✂ ", "event": "✂ ", "closed": "■ ", "elided": ""}[row.kind]
                body.append(
                    f'<tr class="{cls}"><td></td><td class="c"></td><td colspan="1">{esc(glyph + row.text)}</td>'
                    '<td class="s"></td><td></td><td></td></tr>'
                )
                continue
            exchange = row.exchange
            stale = "!]" in row.text
            error = exchange is not None and (exchange.status is None or exchange.status >= 400)
            body.append(
                f'<tr class="{"stale" if stale else ""}"><td class="t">{esc(row.when)}</td><td class="c"></td>'
                f'<td class="a">{esc(row.text)}</td><td class="s"></td>'
                f'<td class="r{" e" if error else ""}">{esc(row.result)}</td>'
                f'<td class="n">{esc("← " + row.note) if row.note else ""}</td></tr>'
            )
        body.append("</table>")
        body.append("<h2>Exchanges in detail</h2>")
        body.extend(_exchange_details(e) for e in data.exchanges)
        text = render_diagram(data.exchanges, data.events, sessions=data.sessions)
        body.append(f"<h2>Text diagram</h2><pre>{esc(text)}</pre>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _exchange_details(exchange: Exchange) -> str:
    esc = html.escape
    request = json.dumps(exchange.request_body, indent=2, default=str)[:4000]
    response = "\n".join(json.dumps(m, default=str) for m in exchange.response_messages)[:4000]
    headers = "\n".join(f"{k}: {v}" for k, v in exchange.request_headers.items())
    return (
        f"<details><summary>{esc(str(exchange))}</summary><pre>{esc(headers)}\n\n{esc(request)}</pre>"
        f"<pre>{esc(response or '(no JSON-RPC messages in the answer)')}</pre></details>"
    )


class TraceData(Protocol):
    """What a trace of one server holds (``ServerFigures`` is one): exchanges, events, sessions."""

    @property
    def exchanges(self) -> Sequence[Exchange]: ...

    @property
    def events(self) -> Sequence[JournalEvent]: ...

    @property
    def sessions(self) -> Sequence[SessionRecord]: ...


def render_held_past_bound(
    seqs: Sequence[int], limit: float, exchanges: Sequence[Exchange], events: Sequence[JournalEvent]
) -> str:
    """The teardown message for requests a fault still held at ``hold_timeout``: what was held, the diagram, a hint."""
    by_seq = {e.seq: e for e in exchanges}
    lines = [
        f"The fake still held {len(seqs)} request(s) at hold_timeout={limit:g}s and reset their connection(s), "
        "so the test could not wait on them for ever:"
    ]
    for seq in seqs:
        exchange = by_seq.get(seq)
        if exchange is None:
            lines.append(f"  - exchange #{seq}")
            continue
        what = " ".join(str(part) for part in (exchange.http_method, exchange.rpc_method, exchange.target) if part)
        held_by = f", held by: {exchange.faults[0]}" if exchange.faults else ""
        lines.append(f"  - #{seq} {what}{held_by}")
    marks = dict.fromkeys(seqs, f"held until hold_timeout={limit:g}s")
    lines += ["", render_diagram(exchanges, events, marks=marks), ""]
    lines.append(
        "Hint: a fault held a request the client awaited without a bound (.hang(), .delay(until=gate) with the "
        "gate never opened, a held stream): release it in the test, give the client a timeout (asyncio.timeout), "
        "or raise the bound with @pytest.mark.fake_mcp_server(hold_timeout=...) (docs/fixtures.md#hold-timeout)."
    )
    return "\n".join(lines)


def render_unfired_faults(
    problems: Sequence[tuple[str, Sequence[str]]],
    exchanges: Sequence[Exchange],
    events: Sequence[JournalEvent],
    *,
    hint: str,
) -> str:
    """The teardown message for scripted faults that did not fire: each with its near misses, the diagram, a hint."""
    lines = [f"{len(problems)} scripted fault(s) did not fire as scripted:"]
    for problem, near_misses in problems:
        lines.append(f"  - {problem}")
        lines.extend(f"      near miss: {miss}" for miss in near_misses)
    lines += ["", render_diagram(exchanges, events), "", f"Hint: {hint}"]
    return "\n".join(lines)
