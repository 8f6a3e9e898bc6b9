"""RequestContext: the state of one HTTP exchange while the fake answers it.

It reads the body, sends the response (whole, or as an SSE stream), watches for the client
going away, and freezes into the journal's :class:`Exchange` record. One is made per request, so
per-request state never sits on the shared app.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ._journal import Exchange, Outcome, ResponseFormat
from ._protocol import SESSION_HEADER, VERSION_HEADER, Incoming, ParseFailure, dumps, sse_frame, sse_ping
from ._types import JSONObject, JSONValue, Receive, Scope, Send

if TYPE_CHECKING:
    from ._sessions import Session

__all__ = ["TRANSPORT_EXTENSION", "BodyTooLarge", "EventStream", "RequestContext"]

TRANSPORT_EXTENSION = "fake_mcp.transport"
"""Key in ``scope["extensions"]`` of the TCP transport serving the request (set by our listener)."""


# Every exchange the journal keeps holds its request's headers. Names, and the values of headers that take few
# values (Accept, Host, the protocol version, ...), are decoded once and shared, so a session's exchanges do not
# each hold copies of the same strings (issue 11: memory per idle session). Both caches are bounded.
_NAMES: dict[bytes, str] = {}
_VALUES: dict[tuple[bytes, bytes], str] = {}
_SHARED_VALUES = frozenset(
    {
        b"accept",
        b"accept-encoding",
        b"connection",
        b"content-type",
        b"host",
        b"mcp-protocol-version",
        b"origin",
        b"user-agent",
    }
)
_CACHE_LIMIT = 512


def _header_name(raw: bytes) -> str:
    name = _NAMES.get(raw)
    if name is None:
        name = raw.decode("latin-1").lower()
        if len(_NAMES) < _CACHE_LIMIT:
            _NAMES[raw] = name
    return name


def _header_value(raw_name: bytes, raw: bytes) -> str:
    if raw_name.lower() not in _SHARED_VALUES:
        return raw.decode("latin-1")
    key = (raw_name, raw)
    value = _VALUES.get(key)
    if value is None:
        value = raw.decode("latin-1")
        if len(_VALUES) < _CACHE_LIMIT:
            _VALUES[key] = value
    return value


class BodyTooLarge(Exception):
    """The request body passed the server's limit."""


class RequestContext:
    """One request in flight: its parsed parts, its response so far, and its journal entry."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, *, seq: int, started: float) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self.seq = seq
        self.started = started
        self.http_method: str = scope["method"].upper()
        self.path: str = scope.get("path", "")
        self.headers: dict[str, str] = {}
        self.header_list: list[tuple[str, str]] = []
        for raw_name, raw_value in scope.get("headers", []):
            name, value = _header_name(raw_name), _header_value(raw_name, raw_value)
            self.header_list.append((name, value))
            # Repeated headers (1.x sends two Accept lines) are joined as HTTP allows.
            self.headers[name] = f"{self.headers[name]}, {value}" if name in self.headers else value
        client = scope.get("client")
        self.client: tuple[str, int] | None = None
        if client:  # uvicorn's tuple is one per connection: kept as it is, every exchange on it shares it
            shared = type(client) is tuple and len(client) == 2 and type(client[1]) is int
            self.client = client if shared else (client[0], int(client[1]))
        self.transport: asyncio.BaseTransport | None = scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
        self.body = b""
        self.message: Incoming | ParseFailure | None = None
        self.session: Session | None = None
        self.new_session: Session | None = None
        self.extra_headers: list[tuple[str, str]] = []
        """Headers a fault adds to whatever response is sent."""
        self.faults: list[str] = []
        self.era: Literal["handshake", "modern"] | None = None
        """The era answering the request, set by the app when it routes it."""
        self.cache_hint: tuple[int, str] | None = None
        """``(ttlMs, cacheScope)`` a fault gives this request's modern result (None: the fake's default)."""
        self.discover_versions: tuple[str, ...] | None = None
        """The ``supportedVersions`` a fault makes this request's ``server/discover`` answer name."""
        self.status: int | None = None
        self.response_headers: list[tuple[str, str]] = []
        self.response_format: ResponseFormat = "none"
        self.response_messages: list[JSONObject] = []
        self.outcome = Outcome.IN_FLIGHT
        self.ended: float | None = None
        self.disconnected = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self._more_body = True
        self.response_started = False
        self.response_finished = False

    # --- request side ------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self.headers.get(SESSION_HEADER)

    @property
    def protocol_version(self) -> str | None:
        return self.headers.get(VERSION_HEADER)

    @property
    def incoming(self) -> Incoming | None:
        return self.message if isinstance(self.message, Incoming) else None

    @property
    def rpc_method(self) -> str | None:
        return self.incoming.method if self.incoming else None

    async def read_body(self, limit: int | None) -> None:
        """Read the whole body; raise BodyTooLarge past ``limit`` bytes."""
        declared = self.headers.get("content-length", "")
        if limit is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge
        chunks: list[bytes] = []
        size = 0
        while self._more_body:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
                self._more_body = False
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit is not None and size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
            self._more_body = message.get("more_body", False)
        self.body = b"".join(chunks)

    def watch_disconnect(self) -> None:
        """Start noticing the client going away (after the body was read)."""
        if self._watcher is None and not self.disconnected.is_set():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
                return

    # --- response side -----------------------------------------------------------------------

    async def start(self, status: int, headers: Iterable[tuple[str, str]], fmt: ResponseFormat) -> None:
        """Send the status line and headers."""
        self.status = status
        self.response_format = fmt
        self.response_headers = [*headers, *self.extra_headers]
        self.response_started = True
        await self._send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.response_headers],
            }
        )

    async def write(self, chunk: bytes, *, more: bool = True) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": more})
        if not more:
            self.response_finished = True

    async def respond(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
        fmt: ResponseFormat | None = None,
    ) -> None:
        """Send a whole response with a content-length."""
        all_headers = list(headers)
        if content_type is not None:
            all_headers.append(("content-type", content_type))
        all_headers.append(("content-length", str(len(body))))
        if fmt is None:
            fmt = "empty" if not body else ("json" if content_type == "application/json" else "text")
        await self.start(status, all_headers, fmt)
        await self.write(body, more=False)

    async def respond_json(self, status: int, message: JSONObject, *, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.record_message(message)
        await self.respond(status, dumps(message), content_type="application/json", headers=headers, fmt="json")

    async def send_event(self, message: JSONObject, event_id: str | None = None) -> None:
        self.record_message(message)
        await self.write(sse_frame(message, event_id))

    async def send_ping(self) -> None:
        await self.write(sse_ping())

    async def finish(self) -> None:
        if self.response_started and not self.response_finished:
            await self.write(b"", more=False)

    def record_message(self, message: JSONObject) -> None:
        self.response_messages.append(message)

    def replace_recorded(
        self, old: JSONObject | None = None, new: JSONObject | None = None, *, header: tuple[str, str] | None = None
    ) -> None:
        """Change what the journal records as the response: message ``old`` becomes ``new`` (None: it was
        never delivered), and ``header`` replaces every header of that name."""
        if old is not None:
            with contextlib.suppress(ValueError):
                index = self.response_messages.index(old)
                if new is None:
                    del self.response_messages[index]
                else:
                    self.response_messages[index] = new
        if header is not None:
            self.response_headers = [(k, v) for k, v in self.response_headers if k != header[0]]
            self.response_headers.append(header)

    def wrap_send(self, wrapper: Callable[[Send], Send]) -> None:
        """Let a fault see, change, hold or swallow every ASGI message this request sends from now on."""
        self._send = wrapper(self._send)

    def end_without_answer(self, outcome: Outcome) -> None:
        """A fault took the request over: the app must not answer it (``outcome`` goes to the journal)."""
        self.outcome = outcome
        self.response_started = True

    def abort_connection(self) -> bool:
        """Reset the TCP connection under this request, if there is one (False in-process)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        abort = getattr(transport, "abort", None)
        if abort is None:
            transport.close()
        else:
            abort()
        return True

    async def close(self, now: float) -> None:
        self.ended = now
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self.outcome is Outcome.IN_FLIGHT:
            if self.response_finished:
                self.outcome = Outcome.COMPLETE
            elif self.disconnected.is_set():
                self.outcome = Outcome.DISCONNECTED
            else:
                self.outcome = Outcome.CUT

    # --- journal -----------------------------------------------------------------------------

    def snapshot(self) -> Exchange:
        """The exchange as it stands (called from any thread; reads only)."""
        incoming = self.incoming
        kind: Any
        if self.http_method == "GET":
            kind = "stream"
        elif self.http_method == "DELETE":
            kind = "delete"
        elif self.http_method != "POST":
            kind = "other"
        elif incoming is None:
            kind = "invalid"
        elif incoming.is_request:
            kind = "request"
        elif incoming.is_notification:
            kind = "notification"
        else:
            kind = "response"
        body: JSONValue = incoming.raw if incoming else None
        if isinstance(self.message, ParseFailure):
            body = self.message.body
        return Exchange(
            seq=self.seq,
            http_method=self.http_method,
            path=self.path,
            rpc_method=incoming.method if incoming else None,
            rpc_id=incoming.id if incoming else None,
            kind=kind,
            target=incoming.target if incoming else None,
            session_id=self.session_id,
            response_session_id=next((v for k, v in self.response_headers if k == SESSION_HEADER), None),
            protocol_version=self.protocol_version,
            last_event_id=self.headers.get("last-event-id"),
            status=self.status,
            response_format=self.response_format,
            error_code=_error_code(self.response_messages),
            client=self.client,
            started=self.started,
            ended=self.ended,
            outcome=self.outcome,
            faults=tuple(self.faults),
            request_headers=MappingProxyType(dict(self.headers)),
            request_body=body,
            response_messages=tuple(self.response_messages),
            era=self.era,
        )


def _error_code(messages: list[JSONObject]) -> int | None:
    for message in reversed(messages):
        error = message.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            return int(error["code"])
    return None


class EventStream:
    """What a method emits while it runs (notifications, progress), sent on its SSE stream before its answer.

    One waiter per wait, woken by an emit, the method's end or the ping timer: the SSE answer of every
    request goes through here, so it avoids a queue and a getter task per turn (issue 11).
    """

    def __init__(self) -> None:
        self._events: deque[JSONObject] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def emit(self, message: JSONObject) -> None:
        self._events.append(message)
        self._wake()

    def _wake(self, *_: object) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pump(self, request: RequestContext, task: asyncio.Task[JSONObject], ping_interval: float) -> JSONObject:
        """Send each event as it comes and a ping every ``ping_interval`` s of quiet, until ``task`` ends;
        return its result (events emitted before its end are sent first)."""
        loop = asyncio.get_running_loop()
        task.add_done_callback(self._wake)
        events = self._events
        while True:
            while events:
                await request.send_event(events.popleft())
            if task.done():
                return task.result()
            self._waiter = loop.create_future()
            timer = loop.call_later(ping_interval, self._wake)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None
            if not events and not task.done():
                await request.send_ping()
