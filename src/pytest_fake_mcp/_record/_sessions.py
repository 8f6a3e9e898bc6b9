"""Sessions the fake has opened: the live table the app consults, and their history.

Mutations run on the server's event loop; the test thread reads frozen snapshots.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass
from typing import Any

from .._wire._types import SessionId

__all__ = ["EndReason", "Session", "SessionRecord", "SessionRegistry"]


class EndReason(enum.StrEnum):
    """Why a session ended."""

    DELETE = "delete"
    """The client sent DELETE."""
    DROPPED = "dropped"
    """A test or fault dropped it: its id answers 404 from then on."""
    RESTART = "restart"
    """The server restarted and forgot every session."""
    IDLE = "idle"
    """It was idle longer than the server's idle timeout."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """A snapshot of one session: when and how it began and ended, and what it carried."""

    id: SessionId
    created: float
    created_by: int
    """The ``seq`` of the exchange that minted the id."""
    protocol_version: str | None
    initialize_count: int
    ended: float | None
    end_reason: EndReason | None
    requests: tuple[int, ...]
    """The ``seq`` of every exchange of this session: the one that minted its id, then each that carried it."""

    @property
    def live(self) -> bool:
        return self.end_reason is None

    def __str__(self) -> str:
        state = "live" if self.live else f"ended ({self.end_reason})"
        return f"session {self.id[:8]}: {self.initialize_count} initialize, {len(self.requests)} requests, {state}"


class Session:
    """A session's mutable server-side state; one per minted id."""

    # Slots: a fake holds every session of a test (thousands in a scale run); a __dict__ each was a tenth of
    # an idle session's memory (issue 11).
    __slots__ = (
        "_ended_event",
        "created",
        "created_by",
        "end_reason",
        "ended",
        "get_stream_open",
        "id",
        "initialize_count",
        "initialized",
        "last_activity",
        "log_level",
        "protocol_version",
        "requests",
        "state",
    )

    def __init__(self, session_id: SessionId, *, created: float, created_by: int) -> None:
        self.id = session_id
        self.created = created
        self.created_by = created_by
        self.last_activity = created
        self.protocol_version: str | None = None
        self.initialize_count = 0
        self.initialized = False
        self.ended: float | None = None
        self.end_reason: EndReason | None = None
        self.requests: list[int] = []
        self.state: dict[str, Any] = {}
        """Per-session scratch space for handlers (``ctx.state``)."""
        self.log_level: str | None = None
        self.get_stream_open = False
        self._ended_event: asyncio.Event | None = None

    @property
    def live(self) -> bool:
        return self.end_reason is None

    @property
    def ended_event(self) -> asyncio.Event:
        """Set when the session ends; open streams wait on it (created on the loop that waits)."""
        if self._ended_event is None:
            self._ended_event = asyncio.Event()
            if not self.live:
                self._ended_event.set()
        return self._ended_event

    def end(self, reason: EndReason, now: float) -> None:
        if not self.live:
            return
        self.end_reason = reason
        self.ended = now
        if self._ended_event is not None:
            self._ended_event.set()

    def expire_if_idle(self, now: float, idle_timeout: float | None) -> None:
        """End this session if it was idle longer than ``idle_timeout`` (an open GET stream keeps it alive)."""
        idle = idle_timeout is not None and now - self.last_activity > idle_timeout
        if idle and self.live and not self.get_stream_open:
            self.end(EndReason.IDLE, self.last_activity + (idle_timeout or 0.0))

    def snapshot(self) -> SessionRecord:
        return SessionRecord(
            id=self.id,
            created=self.created,
            created_by=self.created_by,
            protocol_version=self.protocol_version,
            initialize_count=self.initialize_count,
            ended=self.ended,
            end_reason=self.end_reason,
            requests=tuple(self.requests),
        )


class SessionRegistry:
    """The session table: mint, look up, expire and end sessions."""

    def __init__(self) -> None:
        self._sessions: dict[SessionId, Session] = {}
        self._live: dict[SessionId, Session] = {}
        """The sessions that may still be live, in the order they were added; an ended one leaves it when
        :meth:`live` finds it ended. Each session opened reads the live ones (the idle expiry and the cap): not
        every session the server ever had, ended ones included (issue 11)."""

    def mint(self, *, now: float, seq: int) -> Session:
        """A new session, not yet in the table (the opening request decides if it is kept)."""
        return Session(uuid.uuid4().hex, created=now, created_by=seq)

    def add(self, session: Session) -> None:
        self._sessions[session.id] = session
        if session.live:
            self._live[session.id] = session

    def get(self, session_id: SessionId) -> Session | None:
        return self._sessions.get(session_id)

    def live(self) -> list[Session]:
        table = self._live
        found: list[Session] = []
        for session in list(table.values()):
            if session.live:
                found.append(session)
            else:
                table.pop(session.id, None)
        return found

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    def expire_idle(self, now: float, idle_timeout: float | None) -> None:
        """End sessions idle longer than ``idle_timeout`` (an open GET stream keeps one alive)."""
        if idle_timeout is None:
            return
        for session in self.live():
            session.expire_if_idle(now, idle_timeout)

    def end_all(self, reason: EndReason, now: float) -> list[Session]:
        ended = self.live()
        for session in ended:
            session.end(reason, now)
        return ended

    def clear(self) -> None:
        for session in self.live():
            session.end(EndReason.RESTART, session.last_activity)
        self._sessions = {}
        self._live = {}

    def snapshots(self) -> tuple[SessionRecord, ...]:
        return tuple(s.snapshot() for s in self.all())
