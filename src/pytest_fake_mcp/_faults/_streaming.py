"""Faults that act while the answer streams: slow SSE events, a cut after the method ran, malformed answers.

Each puts a :class:`Tap` on its request (``firing.tap``): the app answers as usual and the tap delays,
rewrites, swallows or cuts what it sends. The method has run by then, which is the point: the server
did the work and the client never heard (the side-effect ledger marks such a run undelivered).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._fake._gate import Waitable, describe_wait
from .._record._journal import Outcome
from .._wire._protocol import SESSION_HEADER, dumps
from ._fault import Fault, Firing, Release, end_connection, priming_event, wait

if TYPE_CHECKING:
    from .._wire._types import JSONObject, Message, Send

__all__ = [
    "BadJSON",
    "BogusSessionId",
    "CutStreamAfterCall",
    "EventDelay",
    "Tap",
    "Truncate",
    "WrongContentType",
    "WrongId",
]


class Tap:
    """Sits between the app and the wire for one request; subclasses override ``on_start``/``on_body``."""

    def __init__(self, firing: Firing, send: Send) -> None:
        self.firing = firing
        self.send = send
        self.cut = False
        self.chunked = True

    async def __call__(self, message: Message) -> None:
        if self.cut:
            return  # the wire is gone: the app's later writes go nowhere
        if message["type"] == "http.response.start":
            self.chunked = not any(name.lower() == b"content-length" for name, _ in message.get("headers", []))
            await self.on_start(message)
        else:
            await self.on_body(message)

    async def on_start(self, message: Message) -> None:
        await self.send(message)

    async def on_body(self, message: Message) -> None:
        await self.send(message)

    def response_in(self, message: Message) -> JSONObject | None:
        """The JSON-RPC response to this request that ``message`` carries, if it carries it."""
        body = message.get("body", b"")
        request = self.firing.request
        if not body or body.startswith(b":") or not request.response_messages or request.incoming is None:
            return None
        last = request.response_messages[-1]
        if "method" in last or last.get("id") != request.incoming.id:
            return None
        return last if "result" in last or "error" in last else None

    async def cut_now(self, *, reset: bool) -> None:
        """End the answer here: RST, or a clean end (chunk terminator for SSE; FIN with a content-length)."""
        self.cut = True
        request = self.firing.request
        request.outcome = Outcome.RESET if reset else Outcome.CUT
        if reset or not self.chunked:
            await end_connection(request, reset=reset)
        else:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def give_up(self, release: Release) -> None:
        self.cut = True
        await self.firing.give_up(release)


class _SlowTap(Tap):
    def __init__(self, firing: Firing, send: Send, fault: EventDelay) -> None:
        super().__init__(firing, send)
        self.fault = fault

    async def on_body(self, message: Message) -> None:
        body = message.get("body", b"")
        if body and not body.startswith(b":"):
            end = await self.firing.hold(wait(self.fault.seconds, self.fault.until))
            if isinstance(end, Release):
                await self.give_up(end)
                return
        await self.send(message)


class _CutTap(Tap):
    def __init__(self, firing: Firing, send: Send, fault: CutStreamAfterCall) -> None:
        super().__init__(firing, send)
        self.fault = fault

    async def on_start(self, message: Message) -> None:
        await self.send(message)
        if self.fault.event_ids and self.chunked and self.firing.request.events is None:  # a store primes itself
            priming = priming_event(self.firing.request)
            await self.send({"type": "http.response.body", "body": priming, "more_body": True})

    async def on_body(self, message: Message) -> None:
        response = self.response_in(message)
        if response is None:
            await self.send(message)
            return
        self.firing.swallow(response)
        await self.cut_now(reset=self.fault.reset)


class _RewriteTap(Tap):
    """Rewrites the response's bytes; holds the headers of a JSON answer so content-length stays right."""

    def __init__(self, firing: Firing, send: Send) -> None:
        super().__init__(firing, send)
        self.start: Message | None = None

    def rewrite(self, response: JSONObject) -> bytes:
        raise NotImplementedError

    async def on_start(self, message: Message) -> None:
        if self.chunked:
            await self.send(message)
        else:
            self.start = message

    async def on_body(self, message: Message) -> None:
        response = self.response_in(message)
        if response is None:
            await self._flush(None)
            await self.send(message)
            return
        payload = self.rewrite(response)
        body = b"event: message\r\ndata: " + payload + b"\r\n\r\n" if self.chunked else payload
        await self._flush(len(body))
        await self.send({**message, "body": body})

    async def _flush(self, length: int | None) -> None:
        start, self.start = self.start, None
        if start is None:
            return
        if length is not None:
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            start = {**start, "headers": [*headers, (b"content-length", str(length).encode())]}
        await self.send(start)


class _WrongIdTap(_RewriteTap):
    def rewrite(self, response: JSONObject) -> bytes:
        wrong = dict(response)
        old = response.get("id")
        wrong["id"] = old + 1000 if isinstance(old, int) else f"{old}-wrong"
        self.firing.request.replace_recorded(response, wrong)
        return dumps(wrong)


class _BadJSONTap(_RewriteTap):
    def rewrite(self, response: JSONObject) -> bytes:
        self.firing.swallow(response)
        return b'{"jsonrpc": "2.0", "id": ' + dumps(response.get("id")) + b', "result": {'


class _TruncateTap(Tap):
    async def on_body(self, message: Message) -> None:
        response = self.response_in(message)
        if response is None:
            await self.send(message)
            return
        self.firing.swallow(response)
        body = message["body"]
        await self.send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        await self.cut_now(reset=False)


class _RetypeTap(Tap):
    def __init__(self, firing: Firing, send: Send, content_type: str) -> None:
        super().__init__(firing, send)
        self.content_type = content_type

    async def on_start(self, message: Message) -> None:
        headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-type"]
        self.firing.request.replace_recorded(header=("content-type", self.content_type))
        await self.send({**message, "headers": [*headers, (b"content-type", self.content_type.encode("latin-1"))]})


class _BogusSessionTap(Tap):
    def __init__(self, firing: Firing, send: Send, only_errors: bool) -> None:
        super().__init__(firing, send)
        self.only_errors = only_errors

    async def on_start(self, message: Message) -> None:
        if self.only_errors and message["status"] < 400:
            await self.send(message)
            return
        bogus = f"bogus{uuid.uuid4().hex[5:]}"
        self.firing.request.replace_recorded(header=(SESSION_HEADER, bogus))
        headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != SESSION_HEADER.encode()]
        await self.send({**message, "headers": [*headers, (SESSION_HEADER.encode(), bogus.encode())]})


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDelay(Fault):
    """Wait before each SSE event of the answer (the headers go out at once)."""

    seconds: float = 0.0
    until: Waitable | None = None

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _SlowTap(firing, send, self))

    def __str__(self) -> str:
        return f"Delay each SSE event {describe_wait(self.seconds, self.until)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CutStreamAfterCall(Fault):
    """Let the method run, then end the stream where its response would be: clean EOF or reset."""

    reset: bool = False
    event_ids: bool = False

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _CutTap(firing, send, self))

    def __str__(self) -> str:
        how = "TCP reset" if self.reset else "clean EOF"
        ids = " after an id: event" if self.event_ids else ""
        return f"Cut the stream after the method ran, before its response ({how}){ids}"

    def unfit(self, era: str) -> str | None:
        if era == "modern" and self.event_ids:
            return "the modern era resumes no stream, so an id: event means nothing there; drop event_ids=True"
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class WrongId(Fault):
    """Answer with a JSON-RPC id the client never sent."""

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _WrongIdTap(firing, send))

    def __str__(self) -> str:
        return "Answer with a wrong JSON-RPC id"


@dataclass(frozen=True, slots=True, kw_only=True)
class BadJSON(Fault):
    """Answer with a body that is not JSON (the method still ran)."""

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _BadJSONTap(firing, send))

    def __str__(self) -> str:
        return "Answer with invalid JSON"


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncate(Fault):
    """Send the first half of the response's bytes, then end the stream (chunk end) or close (content-length)."""

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _TruncateTap(firing, send))

    def __str__(self) -> str:
        return "Truncate the response body"


@dataclass(frozen=True, slots=True, kw_only=True)
class WrongContentType(Fault):
    """Answer with another content-type (default ``text/html``), body unchanged."""

    content_type: str = "text/html"

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _RetypeTap(firing, send, self.content_type))

    def __str__(self) -> str:
        return f"Answer with content-type {self.content_type}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BogusSessionId(Fault):
    """Put an ``Mcp-Session-Id`` the fake never issued on the answer (a header-echoing proxy)."""

    only_errors: bool = True

    async def apply(self, firing: Firing) -> None:
        firing.tap(lambda send: _BogusSessionTap(firing, send, self.only_errors))

    def __str__(self) -> str:
        return "Add a bogus Mcp-Session-Id to " + ("error answers" if self.only_errors else "the answer")
