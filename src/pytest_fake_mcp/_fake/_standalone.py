"""StandaloneStreams: each session's standalone GET stream with the event store on, stored and resumed.

As a real SDK server built with an ``EventStore`` (measured on mcp 2.x and 1.x, docs/resumable-streams.md#get-stream):

- a session's GET stream is one stored stream across its GETs: what the server sends on it is stored whether a
  GET is open or not, and each event on the wire carries its id; a plain GET gets no priming event;
- a GET with ``Last-Event-ID`` naming one of its events replays the session's later events, each with its id
  (never a 409, whatever is open); if the session has a GET stream open, the replay then ends; if not, a fresh
  priming event follows (2025-11-25+, by the GET's ``MCP-Protocol-Version``, with ``retry:``) and the GET becomes
  the session's GET stream: later events go out on it, and a plain GET meanwhile gets 409.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from .._record._journal import Outcome
from .._wire._protocol import DEFAULT_NEGOTIATED_VERSION, VERSION_HEADER, sse_frame
from ._events import PRIMING_SINCE, EventStore, StoredEvent, StreamLog, priming_frame

if TYPE_CHECKING:
    from .._record._sessions import Session, SessionRegistry
    from .._wire._types import JSONObject, Message, Send
    from ._announce import Announcer, Outbox
    from ._request import RequestContext

__all__ = ["StandaloneStreams"]

Hold = Callable[["RequestContext", "asyncio.Event", "Outbox | None"], Awaitable[None]]
"""How the app holds a GET stream open (pings, the outbox's messages) until the session, client or server ends it."""


class StandaloneStreams:
    """The standalone GET streams of a fake with the event store on (the app makes one; nothing without a store)."""

    def __init__(
        self, store: Callable[[], EventStore | None], sessions: SessionRegistry, announcer: Announcer, hold: Hold
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._announcer = announcer
        self._hold = hold

    def find(self, event_id: str) -> StoredEvent | None:
        """The event of a session's GET stream ``event_id`` names (None: a POST's, or none)."""
        store = self._store()
        event = store.find(event_id) if store is not None else None
        return event if event is not None and event.stream.standalone else None

    def unheard(self, message: JSONObject, heard: Collection[str]) -> None:
        """Store ``message`` on the GET stream of every live session but those in ``heard`` (their open GET
        stream stores it as it sends it): a real server stores it whether or not a GET is open."""
        store = self._store()
        if store is None:
            return
        for session in self._sessions.live():
            if session.id not in heard:
                store.session_stream(session.id).add(dict(message))

    async def carry(self, request: RequestContext, session: Session, store: EventStore, *, prime: bool = False) -> None:
        """Hold ``request`` (its head sent) open as ``session``'s GET stream: each message it sends is stored
        with its id; what it had no time to send is stored when it ends. ``prime``: a priming event first."""
        log = store.session_stream(session.id)
        request.events = log
        log.carrier = request.seq
        stop = asyncio.Event()  # the session ended, or a fault cut the stream: it is no longer the session's
        request.wrap_send(lambda send: _watching(request, send, stop))
        ended = asyncio.ensure_future(session.ended_event.wait())
        ended.add_done_callback(lambda _: stop.set())
        with self._announcer.stream(session.id) as outbox:
            try:
                if prime:
                    await request.write(priming_frame(log.add(None), store.retry_ms))
                await self._hold(request, stop, outbox)
            finally:
                ended.cancel()
                log.carrier = None
                for message in outbox.drain() if outbox is not None else ():
                    log.add(message)

    async def resume(
        self, request: RequestContext, session: Session, event: StoredEvent, headers: list[tuple[str, str]]
    ) -> None:
        """Answer a GET whose ``Last-Event-ID`` names ``event``, of a session's GET stream (``find``)."""
        log = event.stream
        await request.start(200, headers, "sse")
        if log.session_id != session.id:  # another session's event: unknown to this session's stream
            await request.finish()
            return
        if not await _replay(request, log, event.id):
            return  # a fault ended it
        if session.get_stream_open:  # the session's GET stream is open: the replay ends (measured)
            await request.finish()
            return
        session.get_stream_open = True
        try:
            version = request.first_headers.get(VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
            await self.carry(request, session, log.store, prime=version >= PRIMING_SINCE)
        finally:
            session.get_stream_open = False


def _watching(request: RequestContext, send: Send, stop: asyncio.Event) -> Send:
    """``send``, setting ``stop`` once the answer has ended under it (a fault's cut)."""

    async def watched(message: Message) -> None:
        await send(message)
        if request.outcome is not Outcome.IN_FLIGHT:
            stop.set()

    return watched


async def _replay(request: RequestContext, log: StreamLog, last_event_id: str) -> bool:
    """Send ``log``'s message events after ``last_event_id`` again, each with its id, until none is left (those
    stored meanwhile too); False once the answer was ended (a fault cut it)."""
    sent = log.carried.setdefault(request.seq, [])
    cursor = last_event_id
    while missed := log.after(cursor):
        for event in missed:
            message = event.message
            if message is None:  # (``after`` gives message events only)
                continue
            sent.append(event.id)
            request.record_message(message)
            await request.write(sse_frame(message, event.id))
            if request.outcome is not Outcome.IN_FLIGHT:
                return False
            cursor = event.id
    return True
