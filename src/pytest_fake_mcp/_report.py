"""Renders journal data as text: the sequence diagram every failure message uses."""

from __future__ import annotations

from collections.abc import Sequence

from ._journal import Exchange, JournalEvent, Outcome

__all__ = ["render_diagram", "short_id"]

_ARROW_WIDTH = 34


def short_id(session_id: str | None) -> str:
    return "" if session_id is None else session_id[:4]


def _label(exchange: Exchange, live_ids: set[str]) -> str:
    if exchange.http_method == "POST":
        label = exchange.rpc_method or "(invalid body)"
        if exchange.target:
            label += f" {exchange.target}"
    elif exchange.http_method == "GET":
        label = "GET stream"
    else:
        label = exchange.http_method
    if exchange.session_id is not None:
        stale = "!" if exchange.rpc_method == "initialize" else ""
        label += f" [{short_id(exchange.session_id)}{stale}]"
    return label


def _result(exchange: Exchange) -> str:
    if exchange.status is None:
        text = {
            Outcome.IN_FLIGHT: "... (no answer yet)",
            Outcome.RESET: "connection reset",
            Outcome.RELEASED: "held, never answered",
        }.get(exchange.outcome, f"no status ({exchange.outcome})")
    else:
        text = str(exchange.status)
    if exchange.response_session_id and exchange.rpc_method == "initialize" and exchange.status == 200:
        text += f" sid={short_id(exchange.response_session_id)}"
    if exchange.error_code is not None and exchange.status == 200:
        text += f" error {exchange.error_code}"
    if exchange.outcome in (Outcome.CUT, Outcome.DISCONNECTED) and exchange.status is not None:
        text += f" ({exchange.outcome})"
    return text


def _note(exchange: Exchange) -> str:
    if exchange.rpc_method == "initialize" and exchange.session_id is not None:
        return "   ← stale session id on initialize"
    return ""


def render_diagram(exchanges: Sequence[Exchange], events: Sequence[JournalEvent] = ()) -> str:
    """The exchanges as a client/server sequence diagram, one arrow per exchange, time on the left.

    Example output::

          0.0ms  client ── initialize ──────────────▶ server   200 sid=3f2a
          2.0ms  client ── tools/call echo [3f2a] ───▶ server   200
                 ✂ fault: drop_session(3f2a)
    """
    if not exchanges and not events:
        return "(no exchanges with the fake MCP server)"
    t0 = min([e.started for e in exchanges] + [ev.at for ev in events])
    lines: list[str] = []
    pending_events = sorted(events, key=lambda ev: (ev.after_seq, ev.at))
    live: set[str] = set()
    for exchange in exchanges:
        while pending_events and pending_events[0].after_seq < exchange.seq:
            lines.append(f"{'':>9}  ✂ {pending_events.pop(0).text}")
        label = _label(exchange, live)
        arrow = f"── {label} "
        arrow = arrow + "─" * max(1, _ARROW_WIDTH - len(arrow))
        elapsed = (exchange.started - t0) * 1000
        lines.append(f"{elapsed:7.1f}ms  client {arrow}▶ server   {_result(exchange)}{_note(exchange)}")
        for fault in exchange.faults:
            lines.append(f"{'':>9}  ✂ fault: {fault}")
    for event in pending_events:
        lines.append(f"{'':>9}  ✂ {event.text}")
    return "\n".join(lines)
