"""Faults that act on the answer as it streams: slow SSE events, cut streams, malformed responses.

Each fault installs a :class:`Tap` on its request (``RequestContext.wrap_send``): the app answers
as usual and the tap delays, rewrites, swallows or cuts what it sends. The tool has run by then, which
is the point (faults.md R12: the server did the work, the client never heard).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ._answers import priming_event
from ._faults import Fault, Hit, Release, bogus_session_id, end_connection
from ._faults import _wait as wait_seconds
from ._gate import Waitable, describe_wait
from ._journal import Outcome
from ._protocol import SESSION_HEADER, dumps

if TYPE_CHECKING:
    from ._types import JSONObject, Message, Send

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

    def __init__(self, hit: Hit, send: Send) -> None:
        self.hit = hit
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
        request = self.hit.request
        if not body or body.startswith(b":") or not request.response_messages or request.incoming is None:
            return None
        last = request.response_messages[-1]
        if "method" in last or last.get("id") != request.incoming.id:
            return None
        return last if "result" in last or "error" in last else None

    def swallow(self, response: JSONObject) -> None:
        """``response`` never reaches the client: take it off the journal's record, note it for the ledger."""
        request = self.hit.request
        with contextlib.suppress(ValueError):
            request.response_messages.remove(response)
        self.hit.script.undelivered.add(request)

    async def cut_now(self, *, reset: bool) -> None:
        """End the answer here: RST, or a clean end (chunk terminator for SSE; FIN with a content-length)."""
        self.cut = True
        request = self.hit.request
        request.outcome = Outcome.RESET if reset else Outcome.CUT
        if reset or not self.chunked:
            await end_connection(request, reset=reset)
        else:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def give_up(self, release: Release) -> None:
        self.cut = True
        await self.hit.give_up(release)


class _RewriteTap(Tap):
    """Rewrites the response's bytes; holds the headers of a JSON answer so content-length stays right."""

    def __init__(self, hit: Hit, send: Send, rewrite: Any) -> None:
        super().__init__(hit, send)
        self.rewrite = rewrite
        self.start: Message | None = None

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
        payload: bytes = self.rewrite(self, response)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDelay(Fault):
    """Wait before each SSE event of the answer (the headers go out at once)."""

    seconds: float = 0.0
    until: Waitable | None = None

    async def apply(self, hit: Hit) -> None:
        fault = self

        class _Slow(Tap):
            async def on_body(self, message: Message) -> None:
                body = message.get("body", b"")
                if body and not body.startswith(b":"):
                    end = await self.hit.hold(wait_seconds(fault.seconds, fault.until))
                    if isinstance(end, Release):
                        await self.give_up(end)
                        return
                await self.send(message)

        hit.request.wrap_send(lambda send: _Slow(hit, send))

    def __str__(self) -> str:
        return f"Delay each SSE event {describe_wait(self.seconds, self.until)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CutStreamAfterCall(Fault):
    """Let the method run, then end the stream where its response would be: clean EOF or reset."""

    reset: bool = False
    event_ids: bool = False

    async def apply(self, hit: Hit) -> None:
        fault = self

        class _Cut(Tap):
            async def on_start(self, message: Message) -> None:
                await self.send(message)
                if fault.event_ids and self.chunked:
                    priming = priming_event(hit.request)
                    await self.send({"type": "http.response.body", "body": priming, "more_body": True})

            async def on_body(self, message: Message) -> None:
                response = self.response_in(message)
                if response is None:
                    await self.send(message)
                    return
                self.swallow(response)
                await self.cut_now(reset=fault.reset)

        hit.request.wrap_send(lambda send: _Cut(hit, send))

    def __str__(self) -> str:
        how = "TCP reset" if self.reset else "clean EOF"
        ids = " after an id: event" if self.event_ids else ""
        return f"Cut the stream after the method ran, before its response ({how}){ids}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WrongId(Fault):
    """Answer with a JSON-RPC id the client never sent."""

    async def apply(self, hit: Hit) -> None:
        def rewrite(tap: Tap, response: JSONObject) -> bytes:
            wrong = dict(response)
            old = response.get("id")
            wrong["id"] = old + 1000 if isinstance(old, int) else f"{old}-wrong"
            messages = hit.request.response_messages
            messages[messages.index(response)] = wrong
            return dumps(wrong)

        hit.request.wrap_send(lambda send: _RewriteTap(hit, send, rewrite))

    def __str__(self) -> str:
        return "Answer with a wrong JSON-RPC id"


@dataclass(frozen=True, slots=True, kw_only=True)
class BadJSON(Fault):
    """Answer with a body that is not JSON (the method still ran)."""

    async def apply(self, hit: Hit) -> None:
        def rewrite(tap: Tap, response: JSONObject) -> bytes:
            tap.swallow(response)
            return b'{"jsonrpc": "2.0", "id": ' + dumps(response.get("id")) + b', "result": {'

        hit.request.wrap_send(lambda send: _RewriteTap(hit, send, rewrite))

    def __str__(self) -> str:
        return "Answer with invalid JSON"


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncate(Fault):
    """Send the first half of the response's bytes, then end the stream (chunk end) or close (content-length)."""

    async def apply(self, hit: Hit) -> None:
        class _Truncate(Tap):
            async def on_body(self, message: Message) -> None:
                response = self.response_in(message)
                if response is None:
                    await self.send(message)
                    return
                self.swallow(response)
                body = message["body"]
                await self.send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
                await self.cut_now(reset=False)

        hit.request.wrap_send(lambda send: _Truncate(hit, send))

    def __str__(self) -> str:
        return "Truncate the response body"


@dataclass(frozen=True, slots=True, kw_only=True)
class WrongContentType(Fault):
    """Answer with another content-type (default ``text/html``), body unchanged."""

    content_type: str = "text/html"

    async def apply(self, hit: Hit) -> None:
        text = self.content_type

        class _Retype(Tap):
            async def on_start(self, message: Message) -> None:
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-type"]
                request = hit.request
                request.response_headers = [(k, v) for k, v in request.response_headers if k != "content-type"]
                request.response_headers.append(("content-type", text))
                await self.send({**message, "headers": [*headers, (b"content-type", text.encode("latin-1"))]})

        hit.request.wrap_send(lambda send: _Retype(hit, send))

    def __str__(self) -> str:
        return f"Answer with content-type {self.content_type}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BogusSessionId(Fault):
    """Put an ``Mcp-Session-Id`` the fake never issued on the answer (a header-echoing proxy)."""

    only_errors: bool = True
    answers: ClassVar[bool] = False

    async def apply(self, hit: Hit) -> None:
        only_errors = self.only_errors

        class _Bogus(Tap):
            async def on_start(self, message: Message) -> None:
                if only_errors and message["status"] < 400:
                    await self.send(message)
                    return
                bogus = bogus_session_id()
                request = hit.request
                request.response_headers = [(k, v) for k, v in request.response_headers if k != SESSION_HEADER]
                request.response_headers.append((SESSION_HEADER, bogus))
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != SESSION_HEADER.encode()]
                await self.send({**message, "headers": [*headers, (SESSION_HEADER.encode(), bogus.encode())]})

        hit.request.wrap_send(lambda send: _Bogus(hit, send))

    def __str__(self) -> str:
        return "Add a bogus Mcp-Session-Id to " + ("error answers" if self.only_errors else "the answer")
