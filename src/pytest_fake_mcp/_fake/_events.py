"""EventStore: the opt-in event store (``event_store=True``): SSE event ids, priming events and replays.

As a real SDK server built with an ``EventStore`` (measured on mcp 2.x and 1.x, docs/resumable-streams.md):

- every event of a POST's SSE answer carries ``id:`` (a uuid4, as the SDK's example store mints them);
- at protocol version 2025-11-25 and later the answer opens with a priming event: ``id:``, empty ``data:``
  and, when ``retry_interval`` is set, ``retry:`` (milliseconds);
- a GET with ``Last-Event-ID`` naming a stored event gets 200 ``text/event-stream`` with the events of that
  stream after it, each with its own id; if the stream is no longer attached to its POST, a fresh priming
  event (2025-11-25+) follows, then the stream's later events as they come, and it stays open;
- a ``Last-Event-ID`` the store does not know gets 200 ``text/event-stream`` with an empty body, ended at once;
- a session's standalone GET stream is one stored stream across its GETs (``session_stream``), served and resumed
  by ``_fake/_standalone.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._record._journal import Outcome
from .._wire._protocol import DEFAULT_NEGOTIATED_VERSION, VERSION_HEADER, sse_frame

if TYPE_CHECKING:
    from .._wire._types import JSONObject
    from ._request import RequestContext

__all__ = ["PRIMING_SINCE", "EventStore", "StoredEvent", "StreamLog", "priming_frame", "stream_version"]

PRIMING_SINCE: Final = "2025-11-25"
"""The first protocol version whose SSE answers open with a priming event (older clients cannot parse one)."""


def priming_frame(event_id: str, retry_ms: int | None) -> bytes:
    """The priming event as sse-starlette frames it: ``id``, empty ``data``, then ``retry`` if set."""
    retry = b"" if retry_ms is None else f"retry: {retry_ms}\r\n".encode()
    return f"id: {event_id}\r\ndata: \r\n".encode() + retry + b"\r\n"


def stream_version(request: RequestContext) -> str:
    """The protocol version the SDK decides priming by: ``initialize``'s ``protocolVersion``, else the header."""
    message = request.message
    if message is not None and getattr(message, "method", None) == "initialize":
        version = getattr(message, "params", {}).get("protocolVersion")
        return str(version) if version is not None else DEFAULT_NEGOTIATED_VERSION
    return request.first_headers.get(VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored event: its id, its stream and its message (None: a priming event)."""

    id: str
    stream: StreamLog
    message: JSONObject | None


class StreamLog:
    """The events of one stream (one POST's SSE answer), in order, and who is waiting for the next one."""

    def __init__(self, store: EventStore, session_id: str | None, seq: int, version: str) -> None:
        self.store = store
        self.session_id = session_id
        self.seq = seq
        """The journal seq of the POST whose answer this stream is (0: a session's standalone GET stream)."""
        self.version = version
        self.events: list[StoredEvent] = []
        self.origin: RequestContext | None = None
        self.carrier: int | None = None
        """A standalone GET stream's: the seq of the GET that carries it live now (None: no GET is open)."""
        self.carried: dict[int, list[str]] = {}
        """A standalone GET stream's: by the seq of each GET that carried it, the ids it sent, in order."""
        self._grew = asyncio.Event()

    @property
    def standalone(self) -> bool:
        """A session's standalone GET stream (``_fake/_standalone.py``), not a POST's answer."""
        return self.seq == 0

    def add(self, message: JSONObject | None) -> str:
        """Store ``message`` (None: a priming event) and return its new id."""
        event = StoredEvent(str(uuid.uuid4()), self, message)
        self.events.append(event)
        self.store.index[event.id] = event
        if message is not None and self.carrier is not None:
            self.carried.setdefault(self.carrier, []).append(event.id)
        self._grew.set()
        self._grew = asyncio.Event()
        return event.id

    def priming(self) -> bytes | None:
        """A new priming event for this stream (stored), or None before 2025-11-25."""
        if self.version < PRIMING_SINCE:
            return None
        return priming_frame(self.add(None), self.store.retry_ms)

    def after(self, event_id: str) -> list[StoredEvent]:
        """The stream's message events after ``event_id`` (priming events are not replayed)."""
        ids = [event.id for event in self.events]
        start = ids.index(event_id) + 1 if event_id in ids else len(ids)
        return [event for event in self.events[start:] if event.message is not None]

    def grew(self) -> Coroutine[object, object, bool]:
        """Set when the next event is stored."""
        return self._grew.wait()

    @property
    def attached(self) -> bool:
        """Its POST still streams to the client (a resume then gets the replay and the stream ends)."""
        origin = self.origin
        return origin is not None and origin.outcome is Outcome.IN_FLIGHT and not origin.response_finished


class EventStore:
    """Every stream's events by id, for one fake server (cleared when the server is reset)."""

    def __init__(self, retry_ms: int | None) -> None:
        self.retry_ms = retry_ms
        self.index: dict[str, StoredEvent] = {}
        self.streams: list[StreamLog] = []
        self.standalone: dict[str, StreamLog] = {}
        """Each session's standalone GET stream, by session id: one stream across its GETs, as the SDK's."""

    def open(self, request: RequestContext) -> StreamLog:
        """The log of ``request``'s SSE answer; its events get ids from now on."""
        session = request.session
        log = StreamLog(self, session.id if session is not None else None, request.seq, stream_version(request))
        log.origin = request
        self.streams.append(log)
        return log

    def find(self, event_id: str) -> StoredEvent | None:
        return self.index.get(event_id)

    def session_stream(self, session_id: str) -> StreamLog:
        """The log of ``session_id``'s standalone GET stream (made when first needed)."""
        log = self.standalone.get(session_id)
        if log is None:
            log = self.standalone[session_id] = StreamLog(self, session_id, 0, DEFAULT_NEGOTIATED_VERSION)
        return log

    def figures(self, delivered: Mapping[int, int]) -> tuple[dict[int, frozenset[str]], dict[int, frozenset[str]]]:
        """By the seq of each stream's request: the ids its client got (the priming events before, and the events
        up to, its ``delivered[seq]``-th message event), and every id it stored; for each GET that carried a
        session's standalone stream, the ids it delivered and every id of that stream. Safe from another thread."""
        got: dict[int, frozenset[str]] = {}
        every: dict[int, frozenset[str]] = {}
        for log in list(self.streams):
            events = list(log.events)
            budget = delivered.get(log.seq, 0)
            mine = []
            for event in events:
                if event.message is not None:
                    if budget == 0:
                        break
                    budget -= 1
                mine.append(event.id)
            got[log.seq] = frozenset(mine)
            every[log.seq] = frozenset(event.id for event in events)
        for log in list(self.standalone.values()):  # by the seq of each GET that carried it
            ids = frozenset(event.id for event in list(log.events))
            for seq, sent in list(log.carried.items()):
                got[seq] = frozenset(sent[: delivered.get(seq, 0)])
                every[seq] = ids
        return got, every

    async def replay(
        self,
        request: RequestContext,
        last_event_id: str,
        headers: Iterable[tuple[str, str]],
        *,
        until: Iterable[asyncio.Event],
        ping_interval: float,
        delivered: Callable[[int], None] = lambda seq: None,
    ) -> None:
        """Answer a GET with ``Last-Event-ID`` as the SDK's ``_replay_events`` does; a stream it follows ends when
        one of ``until`` is set (the session ended, the server closing) or the client leaves. ``delivered(seq)``: the
        result of exchange ``seq`` reached the client after all (the side-effect ledger says so)."""
        event = self.find(last_event_id)
        await request.start(200, list(headers), "sse")
        if event is None:  # unknown id: the SDK's store returns no stream, and the response ends empty
            await request.finish()
            return
        log = event.stream
        cursor = last_event_id
        for replayed in log.after(cursor):
            if not await _send(request, replayed, delivered):
                return
            cursor = replayed.id
        if log.attached:  # the SDK sends the replay and ends: the POST still carries the live events
            await request.finish()
            return
        version = request.first_headers.get(VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        if version >= PRIMING_SINCE:
            primer = log.add(None)
            await request.write(priming_frame(primer, self.retry_ms))
            cursor = primer
        await self._follow(request, log, cursor, list(until), ping_interval, delivered)

    async def _follow(
        self,
        request: RequestContext,
        log: StreamLog,
        cursor: str,
        until: list[asyncio.Event],
        ping_interval: float,
        delivered: Callable[[int], None],
    ) -> None:
        """Send the stream's later events as they are stored, with pings, until the client or server ends it."""
        stops = [asyncio.ensure_future(event.wait()) for event in until]
        stops.append(asyncio.ensure_future(request.disconnected.wait()))
        try:
            while request.outcome is Outcome.IN_FLIGHT:
                grew = asyncio.ensure_future(log.grew())
                try:
                    done, _ = await asyncio.wait([grew, *stops], timeout=ping_interval, return_when="FIRST_COMPLETED")
                finally:
                    grew.cancel()
                if any(stop in done for stop in stops):
                    break
                if grew not in done:
                    await request.send_ping()
                    continue
                for event in log.after(cursor):
                    if not await _send(request, event, delivered):
                        return
                    cursor = event.id
        finally:
            for stop in stops:
                stop.cancel()
        if not request.disconnected.is_set() and request.outcome is Outcome.IN_FLIGHT:
            await request.finish()


async def _send(request: RequestContext, event: StoredEvent, delivered: Callable[[int], None]) -> bool:
    """Send one stored event again, with its id; False once the answer was ended (a fault cut it)."""
    message = event.message
    if message is None:
        return True
    request.record_message(message)
    await request.write(sse_frame(message, event.id))
    reached = any(m is message for m in request.response_messages[-1:])  # a fault's cut takes it off the record
    if reached and "method" not in message and ("result" in message or "error" in message):
        delivered(event.stream.seq)
    return request.outcome is Outcome.IN_FLIGHT
