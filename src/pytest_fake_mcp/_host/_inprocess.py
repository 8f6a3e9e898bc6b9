"""The fake in-process: its app on the current loop, and every httpx/httpx2 client routed to it.

`InProcessFake` builds a `FakeMCPServer` with no listener, no socket and no thread: the app answers
on whatever loop awaits it. While it is open, every ``httpx.AsyncClient`` and ``httpx2.AsyncClient``
(built by the code under test or by the MCP SDK, before or after, without their cooperation) sends
requests for the fake's origin to the app through `StreamingASGITransport`; other origins go to the
network as usual. The routing patches the public ``AsyncHTTPTransport.handle_async_request`` of both
libraries (the network transport a client builds by default) while any in-process fake is open and restores
it when the last one closes: a request reaches it through the client's own layers, as one to the network.

Unlike ``httpx.ASGITransport``, which buffers a whole response, the transport hands the body to the
client as the app sends it, so SSE answers stream and a GET stream stays open until either side
ends it. Closing the response tells the app the client disconnected.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import unquote

from .._compat import default_ssl_context, usable
from .._fake._app import FakeMCPApp
from .._wire._errors import LifecycleError
from .._wire._options import FakeMCPOptions
from ._server import FakeMCPServer

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from .._wire._types import Scope

__all__ = ["InProcessFake", "StreamingASGITransport", "streaming_asgi_transport"]

T = TypeVar("T")
_LIBRARIES: Final = ("httpx", "httpx2")
_FIRST_PORT: Final = 1
_CLIENT_PORTS: Final = 50000


class _InProcessListener:
    """Stands in for `Listener` on the in-process path: no thread, ``call(fn)`` runs ``fn`` here and now."""

    running = False  # no uvicorn thread: held requests are drained by the run, not by a listener loop
    loop: asyncio.AbstractEventLoop | None = None
    open_connections = 0  # no sockets: whether the fake is quiet is the app's requests alone

    def __init__(self, port: int) -> None:
        self.host = "127.0.0.1"
        self.port = port

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def call(self, fn: Callable[[], T], *, timeout: float = 0.0) -> T:
        return fn()

    def start(self) -> None:
        raise LifecycleError("down() is not available on an in-process fake: it has no port to close")

    def stop(self) -> None:
        raise LifecycleError("down() is not available on an in-process fake: it has no port to close")


class InProcessFake:
    """A `FakeMCPServer` answering in-process; every httpx/httpx2 client reaches it at ``fake.url``.

    Example::

        with InProcessFake() as fake:
            asyncio.run(client_code(fake.server.url))   # any loop; no socket is opened
            print(fake.server.journal)
    """

    def __init__(self, options: FakeMCPOptions | None = None, *, wrap: Callable[[Any], Any] | None = None) -> None:
        self.options = options or FakeMCPOptions()
        self.app = FakeMCPApp(self.options)
        self.port = 0
        self.server: FakeMCPServer | None = None
        self._wrap = wrap
        self.asgi: Any = self.app
        self.transports: list[StreamingASGITransport] = []
        # The transport standing in for each client's network transport, held by this fake, not by the module:
        # a fake's app can reach the very clients that call it (a race's draws reach the code under test), and
        # a module-level weak-key table whose values reach their keys would keep every such fake for good. Here
        # the entries live and die with the fake (and are dropped by `renew`).
        self._stand_ins: weakref.WeakKeyDictionary[Any, StreamingASGITransport] = weakref.WeakKeyDictionary()

    @property
    def url(self) -> str:
        return self.open_server().url

    def open_server(self) -> FakeMCPServer:
        """The server of the open fake (a `LifecycleError` if it is not open)."""
        if self.server is None:
            raise LifecycleError("InProcessFake is not open: use `with InProcessFake() as fake:`")
        return self.server

    def open(self) -> FakeMCPServer:
        """Register the route and return the server (the ``with`` block does this)."""
        self.port = _ROUTER.add(self)
        self.server = FakeMCPServer(self.app, _InProcessListener(self.port))  # type: ignore[arg-type]
        self.server._reset(self.options)
        self.asgi = self._wrap(self.app) if self._wrap is not None else self.app
        return self.server

    def renew(self) -> FakeMCPServer:
        """Ready the open fake for a new run on a new loop: as clean as just opened, on the same route."""
        server = self.open_server()
        app = self.app
        app.requests.clear()  # the previous run's loop is closed: nothing of it is in flight any more
        app.in_flight = 0
        app.reopen()
        server._reset(self.options)
        self.asgi = self._wrap(app) if self._wrap is not None else app
        self.transports.clear()
        self._stand_ins.clear()
        return server

    def close(self) -> None:
        """Remove the route (other origins are unaffected)."""
        if self.port:
            _ROUTER.remove(self.port)
            self.port = 0

    def __enter__(self) -> InProcessFake:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def transport_for(self, network: Any, library: str) -> StreamingASGITransport:
        """The transport standing in for ``network`` (a client's ``AsyncHTTPTransport``: one connection's port)."""
        transport = self._stand_ins.get(network)
        if transport is None:
            transport = streaming_asgi_transport(library, self, client_port=_CLIENT_PORTS + len(self.transports) + 1)
            self.transports.append(transport)
            self._stand_ins[network] = transport
        return transport

    @property
    def open_exchanges(self) -> int:
        """Requests whose app task is still running (an open stream, a held request)."""
        return sum(t.running for t in self.transports)


class _Router:
    """The origin -> in-process fake table, and the network transports' routing patch while it is not empty."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.routes: dict[int, InProcessFake] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def add(self, fake: InProcessFake) -> int:
        with self._lock:
            port = next(p for p in itertools.count(_FIRST_PORT) if p not in self.routes)
            if not self.routes:
                self._patch()
            self.routes[port] = fake
            return port

    def remove(self, port: int) -> None:
        with self._lock:
            self.routes.pop(port, None)
            if not self.routes:
                self._restore()

    def _patch(self) -> None:
        for library in _LIBRARIES:
            try:
                module = importlib.import_module(library)
            except ImportError:
                continue
            # The network transport every client builds by default (and for a proxy): a client's request to the
            # fake's origin reaches it through the client's own layers, mounts and wrapping transports included.
            cls = module.AsyncHTTPTransport
            if any(owner is cls for owner, _, _ in self._saved):
                continue  # httpx2 can register itself under the name httpx
            original = cls.__dict__.get("handle_async_request")
            self._saved.append((cls, "handle_async_request", original))
            cls.handle_async_request = _routing(cls.handle_async_request, library)
            # Loading the CA bundle costs ~25 ms per client, far more than a whole in-process run: one
            # context per default configuration while routing (requests to the fake never use it).
            if usable(default_ssl_context(library)):
                transports = importlib.import_module(f"{library}._transports.default")
                make = getattr(transports, "create_ssl_context")  # noqa: B009 - absent from some stubs
                self._saved.append((transports, "create_ssl_context", make))
                setattr(transports, "create_ssl_context", _memo_default_ssl(make))  # noqa: B010

    def _restore(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_ROUTER: Final = _Router()


def _routing(original: Any, library: str) -> Callable[[Any, Any], Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        url = request.url
        if url.host == "127.0.0.1" and url.scheme == "http":
            fake = _ROUTER.routes.get(url.port)
            if fake is not None:
                transport: Any = fake.transport_for(self, library)
                return await transport.handle_async_request(request)
        return await original(self, request)

    return handle_async_request


_SSL_CONTEXTS: dict[tuple[Any, bool, bool], Any] = {}


def _memo_default_ssl(make: Callable[..., Any]) -> Callable[..., Any]:
    contexts = _SSL_CONTEXTS

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if cert is not None or not isinstance(verify, bool):
            return make(verify=verify, cert=cert, trust_env=trust_env)
        key = (make, verify, trust_env)
        if key not in contexts:
            contexts[key] = make(verify=verify, cert=cert, trust_env=trust_env)
        return contexts[key]

    return create_ssl_context


class StreamingASGITransport:
    """Base for the per-library transports built by `streaming_asgi_transport` (for type hints)."""

    fake: InProcessFake
    running: int


_CLASSES: dict[str, type] = {}


def streaming_asgi_transport(library: str, fake: InProcessFake, *, client_port: int) -> StreamingASGITransport:
    """A transport of ``library`` (``"httpx"`` or ``"httpx2"``) sending every request to ``fake``'s app."""
    cls = _CLASSES.get(library)
    if cls is None:
        cls = _CLASSES[library] = _transport_class(importlib.import_module(library))
    transport: StreamingASGITransport = cls(fake, client_port)
    return transport


def _transport_class(http: Any) -> type:
    class _ResponseStream(http.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, exchange: _Exchange) -> None:
            self._exchange = exchange

        async def __aiter__(self) -> Any:
            exchange, chunks = self._exchange, self._exchange.chunks
            while True:
                chunk = chunks.popleft() if chunks else await exchange.next_chunk()
                if chunk is None:
                    break
                yield chunk
            if exchange.failed:
                raise http.RemoteProtocolError("the fake ended the response before it was complete")

        async def aclose(self) -> None:
            self._exchange.disconnect()

    class _Transport(http.AsyncBaseTransport, StreamingASGITransport):  # type: ignore[misc]
        def __init__(self, fake: InProcessFake, client_port: int) -> None:
            self.fake = fake
            self.client = ("127.0.0.1", client_port)
            self.running = 0
            self._numbers = itertools.count(1)

        async def handle_async_request(self, request: Any) -> Any:
            body = request.content if isinstance(request.stream, http.ByteStream) else await request.aread()
            url = request.url
            scope: Scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": request.method,
                "headers": [(name.lower(), value) for name, value in request.headers.raw],
                "scheme": url.scheme,
                "path": unquote(url.path),
                "raw_path": url.raw_path.split(b"?")[0],
                "query_string": url.query,
                "server": (url.host, url.port),
                "client": self.client,
                "root_path": "",
            }
            exchange = _Exchange(body, request.method)
            name = f"fake-mcp app {request.method} #{next(self._numbers)} of client :{self.client[1]}"
            task = asyncio.get_running_loop().create_task(self._serve(exchange, scope), name=name)
            exchange.task = task
            try:
                # Awaited directly, not shielded: a cancelled caller cancels `started`, which every later use
                # checks (`done()`); a shield would cost a future and a loop step per request.
                status, headers = await exchange.started
            except asyncio.CancelledError:
                exchange.disconnect()
                raise
            extensions = by_status.get(status)
            if extensions is None:
                # What a network transport reports too: httpx reads both for its log line on every response.
                reason = http.codes.get_reason_phrase(status).encode("ascii")
                extensions = by_status[status] = {"http_version": b"HTTP/1.1", "reason_phrase": reason}
            return http.Response(status, headers=headers, stream=_ResponseStream(exchange), extensions=extensions)

        async def _serve(self, exchange: _Exchange, scope: Scope) -> None:
            self.running += 1
            try:
                await self.fake.asgi(scope, exchange.receive, exchange.send)
            except BaseException as exc:
                exchange.fail(exc)
                if not isinstance(exc, Exception):
                    raise
            finally:
                self.running -= 1
                exchange.finish()

        async def aclose(self) -> None:
            pass

    by_status: dict[int, dict[str, bytes]] = {}  # each response gets a copy (httpx copies what it is given)
    return _Transport


class _Exchange:
    """One request's ASGI side: the body to receive, the answer as it is sent, the disconnect.

    The answer's body chunks queue in ``chunks`` as the app sends them, then ``None``; one reader takes
    them, the response stream (what ``asyncio.Queue`` does for one reader and no bound, without its
    bookkeeping). ``disconnected``, set by `disconnect` and awaited by `receive`, is an ``asyncio.Event``'s
    flag and waiters, likewise (an event per request, most never awaited).
    """

    def __init__(self, body: bytes, method: str) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self.body = body
        self.head = method == "HEAD"
        self.started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = loop.create_future()
        self.chunks: deque[bytes | None] = deque()
        self._reader: asyncio.Future[None] | None = None  # while the reader waits for a chunk
        self.disconnected = False
        self._gone: list[asyncio.Future[None]] | None = None  # receive() calls waiting for the disconnect
        self.body_sent = False
        self.complete = False
        self.failed = False
        self.task: asyncio.Task[None] | None = None

    def put(self, chunk: bytes | None) -> None:
        self.chunks.append(chunk)
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def next_chunk(self) -> bytes | None:
        chunks = self.chunks
        while not chunks:
            reader = self._reader = self.loop.create_future()
            try:
                await reader
            finally:
                self._reader = None
        return chunks.popleft()

    async def receive(self) -> dict[str, Any]:
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if not self.disconnected:
            waiter = self.loop.create_future()
            gone = self._gone = self._gone or []
            gone.append(waiter)
            try:
                await waiter
            finally:
                gone.remove(waiter)
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.disconnected and message["type"] == "http.response.body":
            return
        if message["type"] == "http.response.start":
            if not self.started.done():
                headers = [(bytes(name), bytes(value)) for name, value in message.get("headers", [])]
                self.started.set_result((message["status"], headers))
        elif message["type"] == "http.response.body" and not self.complete:
            chunk = message.get("body", b"")
            if chunk and not self.head:
                self.put(bytes(chunk))
            if not message.get("more_body", False):
                self.complete = True
                self.put(None)
                self.disconnect()  # as uvicorn does once the answer is complete

    def disconnect(self) -> None:
        if not self.disconnected:
            self.disconnected = True
            for waiter in self._gone or ():
                if not waiter.done():
                    waiter.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if not self.started.done():
            self.started.set_exception(exc if isinstance(exc, Exception) else ConnectionError(repr(exc)))
            self.started.exception()  # retrieved here: the caller may have gone
        self.failed = True

    def finish(self) -> None:
        if not self.started.done():
            self.started.set_exception(ConnectionError("the fake ended the request without answering"))
            self.started.exception()
        if not self.complete:
            self.complete = True
            self.failed = True
            self.put(None)
