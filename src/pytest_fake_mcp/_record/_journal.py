"""The journal: one frozen record per HTTP exchange with the fake, queried like pytest-httpx.

The server thread appends; the test thread reads snapshots. Appends and snapshots are single
list/dict operations (atomic under the GIL), so there is no lock on the request path.

A completed exchange may be filed as its field values and its raw request body, and built into its
:class:`Exchange` (the body parsed) when the journal is first read: most exchanges are never read, and a
parsed body is several times the size of its bytes (issue 11: per-request cost, memory per session).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypedDict

from .._wire._types import JSONObject, JSONValue, SessionId

if TYPE_CHECKING:
    from typing import Unpack

__all__ = ["Exchange", "ExchangeFilter", "Journal", "JournalEvent", "Outcome"]


class Outcome(enum.StrEnum):
    """How an exchange ended."""

    IN_FLIGHT = "in-flight"
    """Still being answered when the snapshot was taken."""
    COMPLETE = "complete"
    """The whole response was sent."""
    DISCONNECTED = "disconnected"
    """The client went away before the response was complete."""
    CUT = "cut"
    """A fault ended the response early."""
    RESET = "reset"
    """A fault reset the TCP connection."""
    RELEASED = "released"
    """A held request was let go at teardown without an answer."""


ResponseFormat = Literal["sse", "json", "empty", "text", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One HTTP request to the fake and what it answered.

    ``session_id`` is the ``Mcp-Session-Id`` the request carried; ``response_session_id`` the one
    the response set. ``target`` is the tool, prompt or resource named in ``params``.
    """

    seq: int
    http_method: str
    path: str
    rpc_method: str | None = None
    rpc_id: JSONValue = None
    kind: Literal["request", "notification", "response", "invalid", "stream", "delete", "other"] = "other"
    target: str | None = None
    session_id: SessionId | None = None
    response_session_id: SessionId | None = None
    protocol_version: str | None = None
    last_event_id: str | None = None
    status: int | None = None
    response_format: ResponseFormat = "none"
    error_code: int | None = None
    client: tuple[str, int] | None = None
    started: float = 0.0
    ended: float | None = None
    outcome: Outcome = Outcome.IN_FLIGHT
    faults: tuple[str, ...] = ()
    request_headers: Mapping[str, str] = field(default_factory=dict)
    request_body: JSONValue = None
    response_messages: tuple[JSONObject, ...] = ()
    era: Literal["handshake", "modern"] | None = None
    """The protocol era that answered: ``"handshake"`` (sessions, ``initialize``) or ``"modern"`` (the stateless
    2026-07-28 era, ``server/discover``); None while not yet routed (e.g. refused before)."""
    started_order: int = 0
    """Where this exchange's start falls among the journal's starts and ends (1, 2, …; 0: not from a journal). The
    clock cannot always order them (under virtual time every read is equal); this always does."""
    ended_order: int | None = None
    """Where its end falls in the same count (None: still in flight, or not from a journal)."""

    @property
    def tool(self) -> str | None:
        """The tool name of a ``tools/call``, else None."""
        return self.target if self.rpc_method == "tools/call" else None

    @property
    def connection(self) -> str | None:
        """The client's ``host:port``: one TCP connection."""
        return None if self.client is None else f"{self.client[0]}:{self.client[1]}"

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    def __str__(self) -> str:
        what = self.rpc_method or self.kind
        if self.target:
            what += f" {self.target}"
        sid = f" session={self.session_id[:8]}" if self.session_id else ""
        status = "..." if self.status is None else str(self.status)
        faults = f" [fault: {'; '.join(self.faults)}]" if self.faults else ""
        return f"#{self.seq} {self.http_method} {self.path}{sid} {what} -> {status}{faults}"


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalEvent:
    """Something that happened outside any one exchange: a fault the test fired, a restart."""

    at: float
    after_seq: int
    text: str


class ExchangeFilter(TypedDict, total=False):
    """Keyword filters of :meth:`Journal.get_requests`; every given one must match."""

    http_method: str
    method: str
    rpc_id: JSONValue
    tool: str
    target: str
    session_id: SessionId | None
    status: int
    kind: str
    faulted: bool
    era: str


def matches(exchange: Exchange, filters: Mapping[str, Any]) -> bool:
    """True if ``exchange`` satisfies every filter."""
    for name, wanted in filters.items():
        if name == "method":
            actual: Any = exchange.rpc_method
        elif name == "faulted":
            actual = bool(exchange.faults)
        else:
            actual = getattr(exchange, name)
        if name == "http_method" and isinstance(wanted, str):
            wanted = wanted.upper()
        if actual != wanted:
            return False
    return True


_FILTER_NAMES = frozenset(ExchangeFilter.__annotations__)
_ORDER_FIELDS: Final = ("started_order", "ended_order")
EXCHANGE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Exchange) if f.name not in _ORDER_FIELDS)
"""The order of the field values :meth:`Journal.file` takes (all but the two the journal counts itself)."""
_BODY_INDEX = EXCHANGE_FIELDS.index("request_body")


class _Filed:
    """A completed exchange not built yet: its field values, and the raw request body to parse (None: parsed)."""

    __slots__ = ("body", "ended_order", "started_order", "values")

    def __init__(self, values: tuple[Any, ...], body: bytes | None) -> None:
        self.values = values
        self.body = body
        self.started_order = 0
        self.ended_order: int | None = None

    def build(self) -> Exchange:
        values = self.values
        if self.body is not None:
            values = (*values[:_BODY_INDEX], json.loads(self.body), *values[_BODY_INDEX + 1 :])
        return Exchange(
            **dict(zip(EXCHANGE_FIELDS, values, strict=True)),
            started_order=self.started_order,
            ended_order=self.ended_order,
        )


_Entry = Callable[[], Exchange] | _Filed | Exchange


class Journal:
    """Every exchange the fake served in this test, in arrival order.

    Example::

        exchanges = fake_mcp_server.journal.get_requests(method="tools/call", tool="echo")
        assert [e.status for e in exchanges] == [200]
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        render: Callable[[tuple[Exchange, ...], tuple[JournalEvent, ...]], str] | None = None,
    ) -> None:
        self._clock = clock
        self._render = render
        self._seq = itertools.count(1)
        # One entry per exchange, in arrival (seq) order: its snapshot function while in flight, then its filed
        # record. A reader on the test thread copies it in one step (atomic under the GIL), so a snapshot never
        # shows an exchange without the ones that arrived before it; filing replaces a value in place.
        self._entries: dict[int, _Entry] = {}
        self._started: dict[int, float] = {}
        # Starts and ends counted in the order they happen: the exchanges' order where the clock cannot tell
        # (virtual time), so overlap is judged alike on a socket and under `explore`.
        self._ticks = itertools.count(1)
        self._start_order: dict[int, int] = {}
        self._events: list[JournalEvent] = []
        self._last_seq = 0

    def now(self) -> float:
        return self._clock()

    def next_seq(self) -> int:
        self._last_seq = next(self._seq)
        return self._last_seq

    def begin(self, seq: int, snapshot: Callable[[], Exchange], *, started: float | None = None) -> None:
        """Register an exchange in flight; ``snapshot`` freezes its current state (``started``: its start, if known,
        saves :meth:`finish` a snapshot)."""
        if started is not None:
            self._started[seq] = started
        self._start_order[seq] = next(self._ticks)
        self._entries[seq] = snapshot

    def finish(self, exchange: Exchange) -> None:
        """File a completed exchange; one begun before the last :meth:`clear` is dropped.

        A stream still open when a test ends finishes after the reset: it belongs to that test,
        not the next, and its ``seq`` may already name a new exchange.
        """
        self._file(exchange.seq, exchange.started, exchange)

    def file(self, seq: int, started: float, values: tuple[Any, ...], body: bytes | None = None) -> None:
        """:meth:`finish` an exchange given as its field values (in :data:`EXCHANGE_FIELDS` order), built when
        first read; ``body``: the raw request body, parsed then into ``request_body`` (valid JSON)."""
        self._file(seq, started, _Filed(values, body))

    def _file(self, seq: int, started: float, item: Exchange | _Filed) -> None:
        entries = self._entries
        snapshot = entries.get(seq)
        if snapshot is None or isinstance(snapshot, (Exchange, _Filed)):
            return  # not begun since the last clear(), or filed already
        began = self._started.get(seq)
        if (snapshot().started if began is None else began) != started:
            return  # begun before the last clear(): its seq names an exchange of this test
        started_order = self._start_order.pop(seq, 0)
        if isinstance(item, Exchange):
            item = dataclasses.replace(item, started_order=started_order, ended_order=next(self._ticks))
        else:
            item.started_order = started_order
            item.ended_order = next(self._ticks)
        entries[seq] = item
        self._started.pop(seq, None)

    def note(self, text: str) -> None:
        """Record an event that belongs to no single exchange (e.g. a fault fired from the test)."""
        self._events.append(JournalEvent(at=self._clock(), after_seq=self._last_seq, text=text))

    def clear(self) -> None:
        self._seq = itertools.count(1)
        self._entries = {}
        self._started = {}
        self._ticks = itertools.count(1)
        self._start_order = {}
        self._events = []
        self._last_seq = 0

    @property
    def exchanges(self) -> tuple[Exchange, ...]:
        """A snapshot of every exchange, completed and in flight, in arrival order."""
        entries = self._entries
        out: list[Exchange] = []
        for seq, entry in list(entries.items()):
            if isinstance(entry, Exchange):
                out.append(entry)
            elif isinstance(entry, _Filed):
                exchange = entry.build()
                if entries.get(seq) is entry:  # built once; a clear() meanwhile replaced the dict
                    entries[seq] = exchange
                out.append(exchange)
            else:
                snapshot = entry()
                order = self._start_order.get(seq, 0)
                out.append(dataclasses.replace(snapshot, started_order=order) if order else snapshot)
        return tuple(out)

    @property
    def events(self) -> tuple[JournalEvent, ...]:
        return tuple(self._events)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)

    def __len__(self) -> int:
        return len(self._entries)

    def get_requests(self, **filters: Unpack[ExchangeFilter]) -> list[Exchange]:
        """Every exchange matching all ``filters`` (pytest-httpx's ``get_requests``).

        Example::

            assert len(fake_mcp_server.journal.get_requests(method="initialize")) == 1
        """
        unknown = set(filters) - _FILTER_NAMES
        if unknown:
            from .._wire._errors import ScriptError

            raise ScriptError(f"get_requests() got unknown filter(s) {sorted(unknown)}; known: {sorted(_FILTER_NAMES)}")
        return [e for e in self.exchanges if matches(e, filters)]

    def get_request(self, **filters: Unpack[ExchangeFilter]) -> Exchange | None:
        """The one exchange matching ``filters``, or None.

        Raises:
            AssertionError: if more than one exchange matches.
        """
        __tracebackhide__ = True
        found = self.get_requests(**filters)
        if len(found) > 1:
            listing = "\n".join(f"  {e}" for e in found)
            raise AssertionError(
                f"get_request({_format_filters(filters)}) matched {len(found)} exchanges, expected at most 1:\n"
                f"{listing}\nHint: use get_requests() to get all of them."
            )
        return found[0] if found else None

    def __str__(self) -> str:
        """The sequence diagram (the renderer is given by whoever made the journal), else one line per exchange."""
        if self._render is not None:
            return self._render(self.exchanges, self.events)
        return "\n".join(str(exchange) for exchange in self.exchanges)


def _format_filters(filters: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in filters.items())
