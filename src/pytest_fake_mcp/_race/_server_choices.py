"""ServerChoices: what the fake decides per request of a race (hold, lose the session, refuse), and how it is drawn.

`ServerChoicesMiddleware` wraps the in-process fake's app for one example: as each request arrives it draws
from the example how long the answer is held, whether the request's session is lost just before it, and
whether it is refused with an error status.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .._wire._types import Receive, Scope, Send
    from ._example import Race

__all__ = ["ServerChoices", "ServerChoicesMiddleware"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerChoices:
    """What the fake decides per request, drawn from the same example as the schedule.

    Args:
        max_hold: each request is held 0..max_hold virtual ticks before the fake sees it (release order).
        lose_sessions: at most this many times, the session a request names is dropped just before it
            (the request then gets the fake's 404).
        status_errors: the statuses a request may be answered with instead (e.g. ``(503,)``); off by default.
    """

    max_hold: int = 2
    lose_sessions: int = 0
    status_errors: tuple[int, ...] = ()
    tick: float = 0.001


class ServerChoicesMiddleware:
    """Plain-ASGI wrapper: asks the example how long to hold each request, and whether to lose its session."""

    def __init__(self, app: Any, race: Race, choices: ServerChoices) -> None:
        self.app = app
        self.race = race
        self.choices = choices
        self.number = 0
        self.losses = 0

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine of its own: the fake's app is awaited straight from the transport's await, with one
        # frame less to pass through at each of the request's steps; the draws still happen as the request
        # arrives (the transport awaits this call at once).
        if scope["type"] != "http" or scope["method"] == "GET":
            return self.app(scope, receive, send)  # type: ignore[no-any-return]
        self.number += 1
        n, choices, race = self.number, self.choices, self.race
        race._on_wire()  # the request reached the fake
        hold = 0
        if choices.max_hold:  # the label is noted only in a reported example: built only then
            label = f"hold request {n}" if race._choices.reporting else None
            hold = race._draw_integer(0, choices.max_hold, label)
        session_id = _header(scope, b"mcp-session-id") if self.losses < choices.lose_sessions else None
        if session_id and race._draw_boolean(f"lose before {n}"):
            self.losses += 1
            dropped = self.app.drop_session(session_id)  # the fake's own app, which this wraps
            race.server.journal.note(f"race: session {session_id[:8]} lost before request {n} -> {dropped}")
        status = 0
        if choices.status_errors:
            status = race._draw_choice((0, *choices.status_errors), f"status of request {n}")
        if status:
            race.server.journal.note(f"race: request {n} answered {status} by the race gate")
            return self._refuse(status, send)
        answering = True

        async def send_start(message: dict[str, Any]) -> None:
            # Hold the answer, not the request: the fake has seen the request when it arrived, so what it
            # records stays in the order the client sent things.
            if hold:
                await asyncio.sleep(hold * choices.tick)
            await send(message)
            race._on_wire()  # the answer went out

        def send_held(message: dict[str, Any]) -> Awaitable[None]:
            # Only the start of the answer needs a coroutine here; the rest goes straight to ``send``.
            nonlocal answering
            if answering and message["type"] == "http.response.start":
                answering = False
                return send_start(message)
            return send(message)

        return self.app(scope, receive, send_held)  # type: ignore[no-any-return]

    async def _refuse(self, status: int, send: Send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        self.race._on_wire()  # the answer went out
        await send({"type": "http.response.body", "body": b""})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None
