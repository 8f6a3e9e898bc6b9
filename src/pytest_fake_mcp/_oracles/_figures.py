"""ServerFigures: what one fake server saw, frozen at one moment, and the failure every oracle raises over it.

Each oracle (``_reuse``, ``_calls``, ``_versions``) reads a :class:`ServerFigures` and, when it fails,
calls :func:`fail`: what was expected and what was found, the exchanges as a sequence diagram
with the culprits marked, then one hint (drawn by ``_record``'s renderer).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .._record._analysis import CLIENT_CLOSED, event_order, harmless_uses, is_unknown_tool_call, short_ids
from .._record._journal import Exchange, JournalEvent
from .._record._report import mark_shown, render_failure
from .._record._sessions import SessionRecord

__all__ = ["ServerFigures", "count", "fail", "in_flight_peak"]


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
        return len(in_flight_peak(self.exchanges))

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


def fail(
    figures: ServerFigures, headline: str, facts: list[str], marks: Mapping[int, str] | None, hint: str
) -> NoReturn:
    """Raise the oracle's AssertionError: ``headline``, ``facts``, the diagram with ``marks``, ``hint``."""
    __tracebackhide__ = True
    message = render_failure(
        headline, facts, figures.exchanges, figures.events, figures.sessions, marks=marks, hint=hint
    )
    raise mark_shown(AssertionError(message), figures.url)


def count(name: str, value: Any, minimum: int = 0) -> int:
    """``value`` if it is an int >= ``minimum`` (an oracle's count argument), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an int >= {minimum}")
    return value


def in_flight_peak(exchanges: tuple[Exchange, ...]) -> list[Exchange]:
    """The largest set of JSON-RPC requests in flight together (an answer complete frees its slot)."""
    requests = [e for e in exchanges if e.kind == "request" and e.http_method == "POST"]
    start, end = event_order(requests)  # the journal's order: virtual time can read the same for every event
    points = sorted(
        [(start(e), 1, e) for e in requests] + [(end(e), 0, e) for e in requests if end(e) != math.inf],
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
