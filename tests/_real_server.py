"""A REAL MCP SDK server (mcp 1.x FastMCP or 2.x MCPServer) on 127.0.0.1, in a thread, for tests.

The server runs uvicorn on a socket we bind (port 0, ``IPPROTO_TCP`` so Nagle is off, protocol.md §6
item 23) in a background thread with its own loop. A plain-ASGI wrapper records every exchange
(HTTP method, JSON-RPC method, ``mcp-session-id`` sent, status) and can hold requests at a gate,
so tests can assert the wire and force interleavings without sleeps.

Example::

    with run_real_server() as server:
        ...  # point a client at server.url
        assert len(server.records(rpc_method="initialize")) == 1
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from _reference_server import serve_in_thread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["SESSION_NOT_FOUND", "Gate", "RealServer", "Rejection", "WireRecord", "run_real_server"]

DRIVER_HEADER = "x-test-driver"
"""Requests made by the test itself (``drop_session``) carry this header and are marked ``driver``."""

_WAIT = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WireRecord:
    """One HTTP exchange as the server saw it."""

    seq: int
    http_method: str
    rpc_method: str | None
    session_id: str | None
    status: int
    driver: bool


class Gate:
    """Holds matching requests before the SDK app sees them, until released (or ``parties`` arrived).

    Thread-safe: the server loop holds requests; the test thread waits for arrivals and releases.
    """

    def __init__(
        self,
        *,
        http_method: str = "POST",
        rpc_method: str | None = None,
        session_id: str | None = None,
        parties: int | None = None,
    ) -> None:
        self.http_method = http_method
        self.rpc_method = rpc_method
        self.session_id = session_id
        self.parties = parties
        self._arrived = 0
        self._released = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        return (
            f"Gate(http_method={self.http_method!r}, rpc_method={self.rpc_method!r}, "
            f"session_id={self.session_id!r}, parties={self.parties!r}, arrived={self._arrived})"
        )

    def matches(self, http_method: str, rpc_method: str | None, session_id: str | None) -> bool:
        return (
            http_method == self.http_method
            and (self.rpc_method is None or rpc_method == self.rpc_method)
            and (self.session_id is None or session_id == self.session_id)
        )

    @property
    def arrived(self) -> int:
        with self._cond:
            return self._arrived

    def release(self) -> None:
        with self._cond:
            self._released = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # the server loop is already closed
                loop.call_soon_threadsafe(event.set)

    def wait_arrived(self, count: int = 1, timeout: float = _WAIT) -> None:
        """Block (in a worker thread: ``await asyncio.to_thread(gate.wait_arrived)``) until ``count`` arrived."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._arrived >= count, timeout):
                raise TimeoutError(f"{self!r}: {count} requests expected within {timeout}s")

    async def pass_through(self) -> None:
        event = asyncio.Event()
        with self._cond:
            self._arrived += 1
            self._cond.notify_all()
            if not self._released:
                self._waiters.append((asyncio.get_running_loop(), event))
            full = self.parties is not None and self._arrived >= self.parties
            if self._released:
                event.set()
        if full:
            self.release()
        async with asyncio.timeout(_WAIT):  # bounded: a forgotten gate must not hang the run
            await event.wait()


@dataclass(slots=True, kw_only=True)
class Rejection:
    """Answer matching requests in place of the SDK app (e.g. a 404 for a session it still has)."""

    status: int
    body: bytes
    content_type: str | None
    http_method: str
    rpc_method: str | None
    times: int | None

    def matches(self, http_method: str, rpc_method: str | None) -> bool:
        return (self.times is None or self.times > 0) and (
            http_method == self.http_method and (self.rpc_method is None or rpc_method == self.rpc_method)
        )

    async def send(self, send: Send) -> None:
        headers = [(b"content-length", str(len(self.body)).encode())]
        if self.content_type is not None:
            headers.append((b"content-type", self.content_type.encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


SESSION_NOT_FOUND = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
"""The body the 2.x SDK server sends with its 404 for an unknown session id (protocol.md §1.5)."""


class _Recorder:
    """Plain-ASGI wrapper: record each exchange at response start, apply gates, replay the body."""

    def __init__(self, app: ASGIApp, server: RealServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        rpc_method: str | None = None
        with contextlib.suppress(ValueError):
            parsed = json.loads(body) if body else None
            if isinstance(parsed, dict) and isinstance(parsed.get("method"), str):
                rpc_method = parsed["method"]
        method: str = scope["method"]
        session_id = headers.get("mcp-session-id")
        for gate in self.server.gates():
            if gate.matches(method, rpc_method, session_id):
                await gate.pass_through()
        rejection = self.server._take_rejection(method, rpc_method, session_id)
        if rejection is not None:
            self.server._record(method, rpc_method, session_id, rejection.status, DRIVER_HEADER in headers)
            await rejection.send(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        status = 0

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                self.server._record(method, rpc_method, session_id, status, DRIVER_HEADER in headers)
            await send(message)

        try:
            await self.app(scope, replay, recording_send)
        finally:
            if status == 0:
                self.server._record(method, rpc_method, session_id, 0, DRIVER_HEADER in headers)


def _build_app(json_response: bool, executions: Counter[str], lock: threading.Lock) -> ASGIApp:
    """The SDK's own high-level server with echo/count/fail tools, for whichever mcp line is installed."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP  # type: ignore[attr-defined,unused-ignore]

        server: Any = FastMCP("real", json_response=json_response)
        make_app = server.streamable_http_app
    else:
        server = MCPServer("real")

        def make_app() -> Any:
            return server.streamable_http_app(json_response=json_response)

    def executed(name: str) -> None:
        with lock:
            executions[name] += 1

    @server.tool()  # type: ignore[untyped-decorator,unused-ignore]
    def echo(text: str) -> str:
        """Return the text."""
        executed("echo")
        return text

    @server.tool()  # type: ignore[untyped-decorator,unused-ignore]
    def count() -> int:
        """Count how many times this tool ran."""
        executed("count")
        return executions["count"]

    @server.tool()  # type: ignore[untyped-decorator,unused-ignore]
    def fail(reason: str = "boom") -> str:
        """Always fail (the SDK turns the exception into an isError result)."""
        executed("fail")
        raise ValueError(reason)

    app: ASGIApp = make_app()
    return app


class RealServer:
    """Handle to a running real server: URL, wire records, tool executions, session drops, gates."""

    def __init__(self, *, json_response: bool) -> None:
        self.json_response = json_response
        self.url = ""
        self._lock = threading.Lock()
        self._records: list[WireRecord] = []
        self._gates: list[Gate] = []
        self._rejections: list[Rejection] = []
        self._executions: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"RealServer(url={self.url!r}, json_response={self.json_response}, records={len(self._records)})"

    def _record(self, method: str, rpc: str | None, sid: str | None, status: int, driver: bool) -> None:
        with self._lock:
            self._records.append(
                WireRecord(
                    seq=len(self._records),
                    http_method=method,
                    rpc_method=rpc,
                    session_id=sid,
                    status=status,
                    driver=driver,
                )
            )

    def records(
        self,
        *,
        http_method: str | None = None,
        rpc_method: str | None = None,
        include_driver: bool = False,
    ) -> list[WireRecord]:
        """A snapshot of the exchanges, oldest first, filtered; the test's own requests are left out."""
        with self._lock:
            snapshot = list(self._records)
        return [
            r
            for r in snapshot
            if (include_driver or not r.driver)
            and (http_method is None or r.http_method == http_method)
            and (rpc_method is None or r.rpc_method == rpc_method)
        ]

    def executions(self, tool: str) -> int:
        """How many times ``tool`` ran on the server."""
        with self._lock:
            return self._executions[tool]

    def gate(self, **kwargs: Any) -> Gate:
        """Add a `Gate` (see its arguments); it stays until `remove_gate` or server exit."""
        gate = Gate(**kwargs)
        with self._lock:
            self._gates.append(gate)
        return gate

    def remove_gate(self, gate: Gate) -> None:
        gate.release()
        with self._lock:
            self._gates.remove(gate)

    def gates(self) -> list[Gate]:
        with self._lock:
            return list(self._gates)

    def reject(
        self,
        *,
        status: int = 404,
        body: bytes = SESSION_NOT_FOUND,
        content_type: str | None = "application/json",
        http_method: str = "POST",
        rpc_method: str | None = None,
        times: int | None = None,
    ) -> Rejection:
        """Answer matching requests with ``status``/``body`` instead of the SDK (``times=None``: always)."""
        rejection = Rejection(
            status=status,
            body=body,
            content_type=content_type,
            http_method=http_method,
            rpc_method=rpc_method,
            times=times,
        )
        with self._lock:
            self._rejections.append(rejection)
        return rejection

    def _take_rejection(self, method: str, rpc: str | None, sid: str | None) -> Rejection | None:
        with self._lock:
            for rejection in self._rejections:
                if rejection.matches(method, rpc):
                    if rejection.times is not None:
                        rejection.times -= 1
                    return rejection
        return None

    def drop_session(self, session_id: str) -> int:
        """Make the server forget a session (a DELETE sent by the test); returns the status.

        Blocking stdlib HTTP: call it from a worker thread in async tests (``asyncio.to_thread``).
        """
        request = urllib.request.Request(
            self.url, method="DELETE", headers={"mcp-session-id": session_id, DRIVER_HEADER: "1"}
        )
        try:
            with urllib.request.urlopen(request, timeout=_WAIT) as response:
                status: int = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
            exc.close()
        return status


@contextlib.contextmanager
def run_real_server(*, json_response: bool = False) -> Iterator[RealServer]:
    """Start a real SDK server on 127.0.0.1:<free port>; stop it (and every task it left) on exit.

    Raises:
        RuntimeError: if the server does not start or stop within 10 s.
    """
    handle = RealServer(json_response=json_response)
    app = _Recorder(_build_app(json_response, handle._executions, handle._lock), handle)
    with serve_in_thread(app, "real MCP server") as port:
        handle.url = f"http://127.0.0.1:{port}/mcp"
        try:
            yield handle
        finally:
            for gate in handle.gates():
                gate.release()
