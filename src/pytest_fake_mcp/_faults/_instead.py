"""Faults that act instead of the fake's answer: a status, a session-loss shape, a cut, a refusal, silence.

Each sends the whole answer itself or ends the exchange (``answers = True``), so the fake's own
answer never runs and nothing can be scripted after it on the same line.
"""

from __future__ import annotations

import http
from dataclasses import dataclass
from typing import Any, ClassVar

from .._fake._shapes import SessionLossShape, answer_with_shape
from .._record._journal import Outcome
from .._wire._protocol import INTERNAL_ERROR, INVALID_REQUEST, MODERN_VERSIONS, dumps, error_body, error_response
from ._fault import Fault, Firing, Release, end_connection, priming_event

__all__ = [
    "CloseConnection",
    "CutStream",
    "EndStream",
    "Hang",
    "HoldStream",
    "RefuseInitialize",
    "Reset",
    "Respond",
    "RespondShape",
    "SessionCap",
    "StrictInitialize",
]

_SSE_HEADERS = (
    ("cache-control", "no-cache, no-transform"),
    ("connection", "keep-alive"),
    ("content-type", "text/event-stream"),
)
_GET_STREAM_HEADERS = (("cache-control", "no-cache, no-transform"), ("content-type", "text/event-stream"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Hang(Fault):
    """Accept the request and never answer (let go at teardown: ``Outcome.RELEASED``)."""

    answers: ClassVar[bool] = True

    async def apply(self, firing: Firing) -> None:
        end = await firing.hold(None)
        if isinstance(end, Release):
            await firing.give_up(end)
        else:
            firing.request.end_without_answer(Outcome.DISCONNECTED)

    def __str__(self) -> str:
        return "Hang (accept, never answer)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset(Fault):
    """Reset the TCP connection (RST) before any answer."""

    answers: ClassVar[bool] = True

    async def apply(self, firing: Firing) -> None:
        firing.request.end_without_answer(Outcome.RESET)
        await end_connection(firing.request, reset=True)

    def __str__(self) -> str:
        return "Reset the connection"


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseConnection(Fault):
    """Close the TCP connection cleanly (FIN) before the status line."""

    answers: ClassVar[bool] = True

    async def apply(self, firing: Firing) -> None:
        firing.request.end_without_answer(Outcome.CUT)
        await end_connection(firing.request, reset=False)

    def __str__(self) -> str:
        return "Close the connection before the status line"


@dataclass(frozen=True, slots=True, kw_only=True)
class Respond(Fault):
    """Answer with this status instead of the fake's answer (body: JSON-RPC error, raw, or none)."""

    answers: ClassVar[bool] = True
    status: int
    body: bytes | dict[str, Any] | None = None
    content_type: str | None = None
    code: int | None = None
    message: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    jsonrpc_body: bool = True
    """True (default for >= 400): a JSON-RPC error body as the SDK transport sends."""

    async def apply(self, firing: Firing) -> None:
        request = firing.request
        headers = list(self.headers)
        if isinstance(self.body, dict):
            await request.respond_json(self.status, self.body, headers=headers)
        elif self.body is not None:
            content_type = self.content_type or "text/plain; charset=utf-8"
            await request.respond(self.status, self.body, content_type=content_type, headers=headers)
        elif self.jsonrpc_body and self.status >= 400:
            body = error_body(firing.flavour, self.error_code, self.error_message)
            await request.respond_json(self.status, body, headers=headers)
        else:
            await request.respond(self.status, b"", content_type=self.content_type, headers=headers)

    @property
    def error_code(self) -> int:
        if self.code is not None:
            return self.code
        return INTERNAL_ERROR if self.status >= 500 else INVALID_REQUEST

    @property
    def error_message(self) -> str:
        if self.message is not None:
            return self.message
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return f"HTTP {self.status}"

    def __str__(self) -> str:
        if isinstance(self.body, dict):
            body = f"body {dumps(self.body).decode()[:60]}"
        elif self.body is not None:
            body = f"body {self.body[:40]!r}"
        elif self.jsonrpc_body and self.status >= 400:
            body = f"JSON-RPC {self.error_code} {self.error_message!r}"
        else:
            body = "an empty body"
        return f"Answer {self.status} with {body}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RespondShape(Fault):
    """Answer with one of the session-loss shapes (or a control)."""

    answers: ClassVar[bool] = True
    shape: SessionLossShape

    async def apply(self, firing: Firing) -> None:
        await answer_with_shape(firing.request, self.shape)

    def __str__(self) -> str:
        return f"Answer {self.shape}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CutStream(Fault):
    """Start the SSE answer (200), then end it before the method runs: clean EOF or reset.

    An answer that waits for the method (JSON mode, the modern era) has sent nothing yet: the cut closes the
    connection before the status line.
    """

    answers: ClassVar[bool] = True
    reset: bool = False
    event_ids: bool = False
    """Send a priming event with an ``id:`` first, so the client may resume with ``Last-Event-ID``."""

    async def apply(self, firing: Firing) -> None:
        request = firing.request
        if firing.sse:  # a JSON-mode server sends nothing before the method ran: the cut comes before the status
            await request.start(200, [*_SSE_HEADERS, *firing.session_headers(), ("x-accel-buffering", "no")], "sse")
            if self.event_ids:
                await request.write(priming_event(request))
        if self.reset or not firing.sse:
            request.end_without_answer(Outcome.RESET if self.reset else Outcome.CUT)
            await end_connection(request, reset=self.reset)
            return
        await request.write(b"", more=False)
        request.outcome = Outcome.CUT

    def __str__(self) -> str:
        how = "TCP reset" if self.reset else "clean EOF"
        ids = " after an id: event" if self.event_ids else ""
        return f"Cut the SSE stream before the method runs ({how}){ids}"

    def unfit(self, era: str) -> str | None:
        if era == "modern" and self.event_ids:
            return "the modern era resumes no stream, so an id: event means nothing there; drop event_ids=True"
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndStream(Fault):
    """Accept the GET stream (200 text/event-stream) and end it at once."""

    answers: ClassVar[bool] = True

    async def apply(self, firing: Firing) -> None:
        await firing.request.start(200, [*_GET_STREAM_HEADERS, *firing.session_headers()], "sse")
        await firing.request.write(b"", more=False)

    def __str__(self) -> str:
        return "Open the stream and end it at once"

    def unfit(self, era: str) -> str | None:
        return "the modern era has no GET stream (it answers a GET 405)" if era == "modern" else None


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldStream(Fault):
    """Accept the GET stream and keep it open (silent) until teardown, whatever happens to the session."""

    answers: ClassVar[bool] = True

    async def apply(self, firing: Firing) -> None:
        await firing.request.start(200, [*_GET_STREAM_HEADERS, *firing.session_headers()], "sse")
        end = await firing.hold(None)
        if isinstance(end, Release):
            await firing.give_up(end)

    def __str__(self) -> str:
        return "Open the stream and hold it open"

    def unfit(self, era: str) -> str | None:
        return "the modern era has no GET stream (it answers a GET 405)" if era == "modern" else None


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictInitialize(Fault):
    """Refuse an ``initialize`` carrying ``Mcp-Session-Id``: "already initialized" if live, else 400."""

    answers: ClassVar[bool] = True

    def fires(self, firing: Firing) -> bool:
        return firing.request.rpc_method == "initialize" and firing.request.session_id is not None

    async def apply(self, firing: Firing) -> None:
        session = firing.request.session
        if session is not None and session.live:
            await answer_with_shape(firing.request, SessionLossShape.ALREADY_INITIALIZED)
            return
        body = error_body(firing.flavour, INVALID_REQUEST, "Bad Request: initialize must not carry Mcp-Session-Id")
        await firing.request.respond_json(400, body)

    def __str__(self) -> str:
        return "Refuse it as a strict server does (400: 'Server already initialized' on a live session)"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCap(Fault):
    """Refuse a request that would open a session while ``limit`` sessions are live."""

    answers: ClassVar[bool] = True
    limit: int
    shape: SessionLossShape = SessionLossShape.TOO_MANY_SESSIONS

    def fires(self, firing: Firing) -> bool:
        return firing.request.session_id is None and firing.live_sessions() >= self.limit

    async def apply(self, firing: Firing) -> None:
        await answer_with_shape(firing.request, self.shape)

    def __str__(self) -> str:
        return f"Refuse a new session past {self.limit} live with {self.shape}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RefuseInitialize(Fault):
    """Refuse ``initialize`` as a modern-only server does: 400, -32022, naming the versions it serves."""

    answers: ClassVar[bool] = True
    supported: tuple[str, ...] = MODERN_VERSIONS

    async def apply(self, firing: Firing) -> None:
        message = firing.request.incoming
        requested = message.params.get("protocolVersion") if message is not None else None
        data: dict[str, Any] = {"supported": list(self.supported)}
        if isinstance(requested, str):
            data["requested"] = requested
        body = error_response(message.id if message else None, -32022, "Unsupported protocol version", data)
        await firing.request.respond_json(400, body)

    def __str__(self) -> str:
        return f"Refuse initialize (400 -32022, supported {list(self.supported)})"
