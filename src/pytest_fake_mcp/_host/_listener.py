"""Listener: uvicorn on 127.0.0.1, on a port we bind, in a background thread with its own loop.

We bind the socket ourselves (port 0, ``IPPROTO_TCP`` so asyncio turns Nagle off, as the SDK
servers' uvicorn does) and hand it to uvicorn, so there is no probe-then-bind race under xdist.
Readiness comes from uvicorn's own startup. Stopping ends open streams, closes the connections and ends
the serve task itself, with no fixed sleep (a stop costs milliseconds), and leaves no thread, socket or
task behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import socket
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._compat import H11_ENTRIES, UVICORN_PROTOCOL, UVICORN_SERVER, require, usable
from .._fake._request import TRANSPORT_EXTENSION
from .._wire._errors import LifecycleError

if TYPE_CHECKING:
    from .._fake._app import FakeMCPApp
    from .._wire._types import ASGIApp, Receive, Scope, Send

__all__ = ["Listener", "running_listeners"]

T = TypeVar("T")
_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0


class _TransportApp:
    """Puts the connection's transport into each request's scope, for connection faults."""

    def __init__(self, app: Any, transport: _BatchingTransport) -> None:
        self._app = app
        self._transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("extensions", {})[TRANSPORT_EXTENSION] = self._transport
        await self._app(scope, receive, send)


class _BatchingTransport:
    """A connection's transport whose writes can be gathered and sent as one.

    uvicorn writes a response's head, each body chunk and the chunked terminator separately: one ``send()``
    system call and one TCP segment each, and the client wakes for each. Between :meth:`hold` and
    :meth:`release` (no await in between, so no timing changes) the writes are joined: a whole response, or a
    final SSE event with its terminator, goes out in one write (issue 11: per-request cost). Everything else is
    the wrapped transport's.
    """

    __slots__ = ("_held", "_holding", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: list[bytes] = []
        self._holding = 0

    def hold(self) -> None:
        self._holding += 1

    def release(self) -> None:
        self._holding -= 1
        if not self._holding and self._held:
            self.flush()

    def flush(self) -> None:
        """Send what is held now, as one write (the hold goes on for what comes after)."""
        if self._held:
            held, self._held = self._held, []
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._holding:
            if data:
                self._held.append(bytes(data))
        else:
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


@functools.cache
def _connection_class() -> type:
    """h11's server connection, with a shorter way to the same response head for a streamed body.

    For a body of unknown length (an SSE stream) h11 rebuilds the response's headers twice, re-validating every
    header each time, to remove ``Content-Length`` and add ``Transfer-Encoding: chunked``: a sixth of the server's
    HTTP work per SSE answer (issue 11). When there is nothing to remove (no framing header given, an HTTP/1.1
    peer, a connection kept alive), appending the one header gives the same bytes; every other case goes to h11.
    Private names of h11 (`_compat.H11_ENTRIES`); another h11 without them gets its own `Connection`.
    """
    import h11

    if not all(usable(entry) for entry in H11_ENTRIES):
        return h11.Connection
    from h11._headers import Headers

    chunked = (b"Transfer-Encoding", b"transfer-encoding", b"chunked")
    framing = (b"content-length", b"transfer-encoding")
    no_body = (204, 304)

    class FakeMCPConnection(h11.Connection):
        def _clean_up_response_headers_for_sending(self, response: h11.Response) -> h11.Response:
            if type(response) is not h11.Response or not self._cstate.keep_alive:
                return super()._clean_up_response_headers_for_sending(response)
            items: list[tuple[bytes, bytes, bytes]] = response.headers._full_items
            sized = False
            for _, name, _ in items:
                if name in framing:
                    if name == b"transfer-encoding":
                        return super()._clean_up_response_headers_for_sending(response)
                    sized = True
            if sized:
                return response  # a Content-Length body kept alive: h11 would build the same response again
            version = self.their_http_version
            if (
                response.status_code in no_body
                or self._request_method in (b"HEAD", b"CONNECT")
                or version is None
                or version < b"1.1"
            ):
                return super()._clean_up_response_headers_for_sending(response)
            return h11.Response(
                headers=Headers([*items, chunked]),
                status_code=response.status_code,
                http_version=response.http_version,
                reason=response.reason,
            )

    return FakeMCPConnection


@functools.cache
def _protocol_class() -> type:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    connection_class = _connection_class()

    class FakeMCPH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if connection_class is not type(self.conn):  # a subclass adding no state: the same object, retyped
                self.conn.__class__ = connection_class

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            batching = self.batching = _BatchingTransport(transport)
            self.transport = batching  # type: ignore[assignment]
            self.app = _TransportApp(self.app, batching)

        def on_response_complete(self) -> None:
            # The answer is whole: send it before uvicorn's bookkeeping for the next request (the keep-alive timer,
            # h11's next cycle), not after, so the client is not kept waiting for it (issue 11).
            self.batching.flush()
            super().on_response_complete()

    return FakeMCPH11Protocol


class Listener:
    """One uvicorn server in one thread, serving ``app`` until :meth:`stop`.

    Example::

        listener = Listener(app)
        listener.start()
        print(listener.url)  # http://127.0.0.1:53211
        listener.stop()
    """

    def __init__(
        self, app: FakeMCPApp, *, host: str = "127.0.0.1", port: int = 0, front: ASGIApp | None = None
    ) -> None:
        self.app = app
        self.front = front
        """What uvicorn serves in front of ``app`` (e.g. the control API), if not ``app`` itself."""
        self.host = host
        self.port = port
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._server: Any = None
        self._stop_requested: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def open_connections(self) -> int:
        """TCP connections uvicorn has open now (read from any thread)."""
        server = self._server
        return 0 if server is None else len(server.server_state.connections)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        if self.running:
            raise LifecycleError(f"Cannot start the listener: already RUNNING at {self.origin}")
        require(UVICORN_SERVER)  # here, on the caller's thread: a changed uvicorn fails the start at once
        require(UVICORN_PROTOCOL)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self.app.reopen()
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(target=self._run, args=(sock,), name=f"fake-mcp:{self.port}", daemon=True)
        self._thread.start()
        _RUNNING.add(self)
        if not self._ready.wait(_START_TIMEOUT):
            raise LifecycleError(f"fake MCP server on {self.origin} did not start within {_START_TIMEOUT}s")
        if self._startup_error is not None:
            self._thread.join(_STOP_TIMEOUT)
            raise LifecycleError(f"fake MCP server on {self.origin} failed to start: {self._startup_error!r}")

    def _run(self, sock: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        self.app.loop = loop
        try:
            loop.run_until_complete(self._serve(sock))
        except BaseException as exc:  # reported to start() or kept for stop()
            self._startup_error = exc
        finally:
            try:
                _cancel_leftovers(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                sock.close()
                self._ready.set()

    async def _serve(self, sock: socket.socket) -> None:
        """Start uvicorn on ``sock``, serve until :meth:`stop`, then end every connection ourselves.

        uvicorn's own ``serve()`` polls ``should_exit`` every 0.1 s and sleeps 0.1 s more in its shutdown;
        driving its startup and our shutdown from an event makes a stop cost milliseconds.
        """
        import uvicorn

        stop = self._stop_requested = asyncio.Event()
        server = self._server = uvicorn.Server(_config(self.front or self.app))
        server.lifespan = server.config.lifespan_class(server.config)
        await server.startup(sockets=[sock])
        # uvicorn's tick keeps its Date header fresh; it only sleeps, so cancelling it is the whole of its shutdown.
        ticker = asyncio.get_running_loop().create_task(server.main_loop())
        self._ready.set()
        try:
            await stop.wait()
        finally:
            ticker.cancel()
            await _shutdown(server)

    def call(self, fn: Callable[[], T], *, timeout: float = _STOP_TIMEOUT) -> T:
        """Run ``fn`` on the server loop and return its result (directly if already on it)."""
        loop = self.loop
        if loop is None or not self.running:
            return fn()
        try:
            if asyncio.get_running_loop() is loop:
                return fn()
        except RuntimeError:
            pass
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise LifecycleError(
                f"fake MCP server on {self.origin} did not run {fn!r} within {timeout}s: its loop is blocked "
                "(a sync handler that blocks? use an async handler)"
            ) from None

    def stop(self) -> None:
        """End open streams, stop uvicorn and join the thread."""
        thread = self._thread
        if thread is None:
            return
        if self.loop is not None and thread.is_alive():

            def request_exit() -> None:
                self.app.close()
                if self._stop_requested is not None:
                    self._stop_requested.set()

            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(request_exit)
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            raise LifecycleError(f"fake MCP server on {self.origin} did not stop within {_STOP_TIMEOUT}s")
        self._thread = None
        self.loop = None
        _RUNNING.discard(self)


_RUNNING: weakref.WeakSet[Listener] = weakref.WeakSet()


def running_listeners() -> list[Listener]:
    """Every listener of this process started and not yet stopped (the pool's idle ones too)."""
    return [listener for listener in list(_RUNNING) if listener.running]


_GRACE = 1.0
"""How long a stop lets requests still being answered finish (the app has ended its streams) before cancelling."""
_logging_configured = False


def _config(app: ASGIApp) -> Any:
    """The uvicorn config of a listener; uvicorn's logging set-up (a ``dictConfig``) runs once per process."""
    import uvicorn

    global _logging_configured
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        log_config=uvicorn.config.LOGGING_CONFIG if not _logging_configured else None,
        access_log=False,
        http=_protocol_class(),
        ws="none",
    )
    _logging_configured = True
    config.load()
    return config


async def _shutdown(server: Any) -> None:
    """Stop accepting, close idle connections now and busy ones once answered (cancelled past a grace), end all."""
    for listening in server.servers:
        listening.close()
    state = server.server_state
    for connection in list(state.connections):
        connection.shutdown()
    if state.tasks:
        _, late = await asyncio.wait(list(state.tasks), timeout=_GRACE)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=_GRACE)
    for connection in list(state.connections):
        transport = connection.transport
        if not transport.is_closing():
            transport.abort()
    for listening in server.servers:
        await listening.wait_closed()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
