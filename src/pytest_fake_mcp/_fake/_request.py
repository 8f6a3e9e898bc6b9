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

from .._record._journal import EXCHANGE_FIELDS, Exchange, Outcome, ResponseFormat
from .._wire._protocol import SESSION_HEADER, VERSION_HEADER, Incoming, ParseFailure, dumps, sse_frame, sse_ping
from .._wire._types import JSONObject, JSONValue, Receive, Scope, Send

if TYPE_CHECKING:
    from .._record._sessions import Session
    from ._events import StreamLog

__all__ = ["TRANSPORT_EXTENSION", "BodyTooLarge", "EventStream", "RequestContext"]

TRANSPORT_EXTENSION = "fake_mcp.transport"
"""Key in ``scope["extensions"]`` of the TCP transport serving the request (set by our listener)."""


# Every exchange the journal keeps holds its request's headers. Names, and the values of headers that take few
# values (Accept, Host, the protocol version, ...), are decoded once and shared, so a session's exchanges do not
# each hold copies of the same strings (issue 11: memory per idle session). Both caches are bounded.
_NAMES: dict[bytes, tuple[str, dict[bytes, str] | None]] = {}
"""A raw header name -> its decoded name, and the cache of its decoded values if it takes few values."""
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


def _decoded(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [_header(*line) for line in headers]


def _header(raw_name: bytes, raw: bytes) -> tuple[str, str]:
    known = _NAMES.get(raw_name)
    if known is None:
        known = (raw_name.decode("latin-1").lower(), {} if raw_name.lower() in _SHARED_VALUES else None)
        if len(_NAMES) < _CACHE_LIMIT:
            _NAMES[raw_name] = known
    name, values = known
    if values is None:
        return name, raw.decode("latin-1")
    value = values.get(raw)
    if value is None:
        value = raw.decode("latin-1")
        if len(values) < _CACHE_LIMIT:
            values[raw] = value
    return name, value


class BodyTooLarge(Exception):
    """The request body passed the server's limit."""


class RequestContext:
    """One request in flight: its parsed parts, its response so far, and its journal entry."""

    # What every request starts with and most never change, set here once rather than in each __init__ (issue 11).
    body = b""
    message: Incoming | ParseFailure | None = None
    session: Session | None = None
    new_session: Session | None = None
    era: Literal["handshake", "modern"] | None = None
    """The era answering the request, set by the app when it routes it."""
    cache_hint: tuple[int, str] | None = None
    """``(ttlMs, cacheScope)`` a fault gives this request's modern result (None: the fake's default)."""
    discover_versions: tuple[str, ...] | None = None
    """The ``supportedVersions`` a fault makes this request's ``server/discover`` answer name."""
    events: StreamLog | None = None
    """The event store's log of this request's SSE answer (``event_store=True``): its events get ``id:`` lines."""
    status: int | None = None
    response_format: ResponseFormat = "none"
    outcome = Outcome.IN_FLIGHT
    ended: float | None = None
    _headers_view: MappingProxyType[str, str] | None = None
    _watcher: asyncio.Task[None] | None = None
    _gone: asyncio.Event | None = None
    """Set once the client went away; made when first needed (most requests never need it)."""
    _watch = False
    _more_body = True
    response_started = False
    response_finished = False

    def __init__(self, scope: Scope, receive: Receive, send: Send, *, seq: int, started: float) -> None:
        self.scope = scope
        self._receive = receive
        self._send = self._raw_send = send
        self.seq = seq
        self.started = started
        self.http_method: str = scope["method"].upper()
        self.path: str = scope.get("path", "")
        header_list = self.header_list = _decoded(scope.get("headers", ()))
        headers = self.headers = dict(header_list)
        self.first_headers: dict[str, str] = headers
        """Each header's first line (as Starlette's ``Headers.get`` reads it); the same dict unless one repeats."""
        if len(headers) != len(header_list):  # one repeats (1.x sends two Accept lines): joined as HTTP allows
            headers.clear()
            first = self.first_headers = {}
            for name, value in header_list:
                if name in headers:
                    headers[name] = f"{headers[name]}, {value}"
                else:
                    headers[name] = first[name] = value
        client = scope.get("client")
        self.client: tuple[str, int] | None = None
        if client:  # uvicorn's tuple is one per connection: kept as it is, every exchange on it shares it
            shared = type(client) is tuple and len(client) == 2 and type(client[1]) is int
            self.client = client if shared else (client[0], int(client[1]))
        extensions = scope.get("extensions")
        self.transport: asyncio.BaseTransport | None = extensions.get(TRANSPORT_EXTENSION) if extensions else None
        self._batch: Any = self.transport if hasattr(self.transport, "hold") else None
        """Our listener's transport, which can send several writes as one (None in-process)."""
        self.extra_headers: list[tuple[str, str]] = []
        """Headers a fault adds to whatever response is sent."""
        self.faults: list[str] = []
        self.response_headers: list[tuple[str, str]] = []
        self.response_messages: list[JSONObject] = []

    @property
    def over_listener(self) -> bool:
        """Whether our listener serves this request over a socket (False in-process)."""
        return self._batch is not None

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
                self._disconnected.set()
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
        """Notice the client going away from now on (after the body was read).

        The watch starts when first needed, i.e. when something reads :attr:`disconnected`: a request answered
        at once never needs one, and a watcher task per request was a fifth of its cost (issue 11).
        """
        self._watch = True

    @property
    def _disconnected(self) -> asyncio.Event:
        gone = self._gone
        if gone is None:
            gone = self._gone = asyncio.Event()
        return gone

    @property
    def disconnected(self) -> asyncio.Event:
        """Set once the client went away (watched from the first read of this, after the body)."""
        if self._watch and self._watcher is None and not self._disconnected.is_set():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_receive())
        return self._disconnected

    async def _watch_receive(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._disconnected.set()
                return

    def _gone_now(self) -> bool:
        """Whether the client has already gone, asked without waiting (no watcher ran)."""
        waiting = self._receive().__await__()
        try:
            message = waiting.send(None)
        except StopIteration as done:
            message = done.value
        else:  # still connected: the receive waits for more; abandon it
            waiting.close()
            return False
        if isinstance(message, dict) and message.get("type") == "http.disconnect":
            self._disconnected.set()
        return self._disconnected.is_set()

    # --- response side -----------------------------------------------------------------------

    async def start(self, status: int, headers: Iterable[tuple[str, str]], fmt: ResponseFormat) -> None:
        """Send the status line and headers (and, with an event store, the SSE answer's priming event)."""
        await self._send(self._head(status, [*headers, *self.extra_headers], fmt))
        if self.events is not None and fmt == "sse":
            priming = self.events.priming()
            if priming is not None:
                await self.write(priming)

    def _head(self, status: int, headers: list[tuple[str, str]], fmt: ResponseFormat) -> dict[str, Any]:
        """Record the response's head (``headers`` is kept as it is) and return its ASGI message."""
        self.status = status
        self.response_format = fmt
        self.response_headers = headers
        self.response_started = True
        lines = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        return {"type": "http.response.start", "status": status, "headers": lines}

    async def write(self, chunk: bytes, *, more: bool = True) -> None:
        batch = self._batch if not more and self._send is self._raw_send else None
        if batch is None:
            await self._send({"type": "http.response.body", "body": chunk, "more_body": more})
        else:  # the last chunk and the end of the body in one write
            batch.hold()
            try:
                await self._send({"type": "http.response.body", "body": chunk, "more_body": False})
            finally:
                batch.release()
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
        batch = self._hold()
        try:  # head and body in one write
            await self.start(status, all_headers, fmt)
            await self.write(body, more=False)
        finally:
            if batch is not None:
                batch.release()

    async def respond_json(self, status: int, message: JSONObject, *, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.record_message(message)
        await self.respond(status, dumps(message), content_type="application/json", headers=headers, fmt="json")

    async def respond_sse(self, status: int, headers: Iterable[tuple[str, str]], message: JSONObject) -> None:
        """Send a whole SSE answer of one event: head, event and end in one write."""
        batch = self._hold()
        try:
            await self.start(status, headers, "sse")
            await self.send_event(message, last=True)
        finally:
            if batch is not None:
                batch.release()

    def _hold(self) -> Any:
        """Hold the connection's writes until the returned batch's ``release()`` (None: a fault watches the sends,
        and may hold one of them, or no listener batches them)."""
        batch = self._batch if self._send is self._raw_send else None
        if batch is not None:
            batch.hold()
        return batch

    async def send_event(self, message: JSONObject, event_id: str | None = None, *, last: bool = False) -> None:
        """Send one SSE event; ``last`` also ends the stream (in the same write)."""
        self.record_message(message)
        if event_id is None and self.events is not None:
            event_id = self.events.add(message)
        await self.write(sse_frame(message, event_id), more=not last)

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
        watcher = self._watcher
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self._settle(watcher)

    def close_at_once(self, now: float) -> bool:
        """:meth:`close` if it has nothing to wait for (no watcher task to end), without a coroutine: True if
        done (most requests; issue 11), False if the caller must await :meth:`close`."""
        if self._watcher is not None:
            return False
        self.ended = now
        self._settle(None)
        return True

    def _settle(self, watcher: asyncio.Task[None] | None) -> None:
        """The request's outcome, once it ended (``watcher``: the disconnect watch that ran, if one did)."""
        if self.outcome is Outcome.IN_FLIGHT:
            if self.response_finished:
                self.outcome = Outcome.COMPLETE
            elif (self._gone is not None and self._gone.is_set()) or (
                self._watch and watcher is None and self._gone_now()
            ):
                self.outcome = Outcome.DISCONNECTED
            else:
                self.outcome = Outcome.CUT

    # --- journal -----------------------------------------------------------------------------

    def _request_headers(self) -> MappingProxyType[str, str]:
        """A read-only view of the request's headers, made once (they never change after ``__init__``)."""
        view = self._headers_view
        if view is None:
            view = self._headers_view = MappingProxyType(self.headers)
        return view

    def snapshot(self) -> Exchange:
        """The exchange as it stands (called from any thread; reads only)."""
        values, body = self.record()
        fields = dict(zip(EXCHANGE_FIELDS, values, strict=True))
        if body is not None and self.incoming is not None:
            fields["request_body"] = self.incoming.raw
        return Exchange(**fields)

    def record(self) -> tuple[tuple[Any, ...], bytes | None]:
        """The exchange's field values in :data:`EXCHANGE_FIELDS` order, for :meth:`Journal.file`, and the raw
        request body its ``request_body`` parses from (None: the values hold it)."""
        incoming = self.incoming
        method = self.http_method
        kind: str
        body: bytes | None = None
        request_body: JSONValue = None
        if method == "POST":
            if incoming is None:
                kind = "invalid"
                if isinstance(self.message, ParseFailure):
                    request_body = self.message.body
            else:
                kind = "request" if incoming.is_request else "notification" if incoming.is_notification else "response"
                body = self.body
        else:
            kind = "stream" if method == "GET" else "delete" if method == "DELETE" else "other"
        headers = self.response_headers
        response_session_id = None
        for name, value in headers:
            if name == SESSION_HEADER:
                response_session_id = value
                break
        messages = self.response_messages
        request_headers = self.headers
        return (
            self.seq,
            method,
            self.path,
            incoming.method if incoming else None,
            incoming.id if incoming else None,
            kind,
            incoming.target if incoming else None,
            request_headers.get(SESSION_HEADER),
            response_session_id,
            request_headers.get(VERSION_HEADER),
            request_headers.get("last-event-id"),
            self.status,
            self.response_format,
            _error_code(messages) if messages else None,
            self.client,
            self.started,
            self.ended,
            self.outcome,
            tuple(self.faults) if self.faults else (),
            self._request_headers(),
            request_body,
            tuple(messages),
            self.era,
        ), body


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

    @property
    def pending(self) -> bool:
        """Whether events wait to be sent."""
        return bool(self._events)

    async def first_turn(self) -> None:
        """Let the loop run once: a task created just before takes its first step (ready callbacks run in order).

        A bare yield: the caller's next step is queued behind that task's, so both run in the same loop turn (a
        future resolved by a callback took two turns, each an ``epoll_wait`` under uvicorn; issue 11).
        """
        await asyncio.sleep(0)

    def emit(self, message: JSONObject) -> None:
        self._events.append(message)
        self._wake()

    def _wake(self, *_: object) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pump(self, request: RequestContext, task: asyncio.Future[JSONObject], ping_interval: float) -> JSONObject:
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
