"""A REAL low-level MCP SDK server on 127.0.0.1 in a thread: the reference the differential test compares to.

It is built the way ``Server.streamable_http_app(host="127.0.0.1")`` builds it (2.x; FastMCP's does the same in
1.x): a low-level ``Server`` with two tools, ``echo(text)`` and ``route(region, shards)`` (both arguments mirrored into
``Mcp-Param-*`` headers in the 2026-07-28 era), behind a ``StreamableHTTPSessionManager`` (stateful,
DNS-rebinding protection on for loopback), mounted at ``/mcp`` by a Starlette ``Route`` with no method filter, with
the manager's ``run()`` as the app's lifespan. Works with mcp 1.x (decorator API) and 2.x (``on_*`` handlers).

uvicorn serves it on a socket we bind (``IPPROTO_TCP``, so Nagle is off: protocol.md §6 item 23), in a thread
with its own loop. Readiness is uvicorn's own ``startup``; stopping is ``should_exit`` + ``join``, and leftover
tasks are cancelled before the loop closes (§6 item 27).

Example::

    with reference_server(json_response=True) as url:
        httpx.post(url, ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import socket
import threading
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["MCP_MAJOR", "ROUTE_SCHEMA", "reference_server", "serve_in_thread"]

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])
"""The installed SDK line: 1 or 2."""

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0
_ALLOWED_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_ALLOWED_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
_ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ROUTE_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "shards": {"type": "integer", "x-mcp-header": "Shards"},
    },
    "required": ["region"],
}
"""``route``: arguments a modern client mirrors into ``Mcp-Param-Region`` / ``Mcp-Param-Shards``."""


def _echo_result(name: str, arguments: dict[str, Any] | None) -> Any:
    import mcp.types as types

    if name == "route":
        text = f"{(arguments or {}).get('region')}/{(arguments or {}).get('shards', 1)}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=False)
    if name != "echo":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Unknown tool: {name}")], isError=True
        )
    text = str((arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=False)


def _tools() -> list[Any]:
    import mcp.types as types

    return [
        types.Tool(name="echo", description="Echo the text back.", inputSchema=_ECHO_SCHEMA),
        types.Tool(name="route", description="Say where the call was routed.", inputSchema=ROUTE_SCHEMA),
    ]


def _low_level_server() -> Any:
    """``Server("reference")`` serving ``echo`` and ``logging/setLevel`` (the fake serves both), in the line's API."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    if MCP_MAJOR >= 2:

        async def list_tools_v2(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=_tools())

        async def call_tool_v2(ctx: Any, params: Any) -> Any:
            return _echo_result(params.name, params.arguments)

        async def set_level_v2(ctx: Any, params: Any) -> Any:
            return types.EmptyResult()

        from mcp.shared.exceptions import MCPDeprecationWarning

        with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28, still served in the handshake era
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            return Server(
                "reference", on_list_tools=list_tools_v2, on_call_tool=call_tool_v2, on_set_logging_level=set_level_v2
            )

    server = Server("reference")

    @server.list_tools()
    async def list_tools_v1() -> list[Any]:
        return _tools()

    @server.call_tool()
    async def call_tool_v1(name: str, arguments: dict[str, Any]) -> Any:
        return _echo_result(name, arguments)

    @server.set_logging_level()
    async def set_level_v1(level: Any) -> None:
        return None

    return server


class _ManagerEndpoint:
    """Plain ASGI endpoint handing every request to the session manager (the SDK's ``StreamableHTTPASGIApp``)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._manager.handle_request(scope, receive, send)


def _starlette_app(json_response: bool) -> Any:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=_low_level_server(),
        json_response=json_response,
        stateless=False,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(_ALLOWED_HOSTS),
            allowed_origins=list(_ALLOWED_ORIGINS),
        ),
    )
    # An object endpoint is mounted as raw ASGI with no method filter, as the SDK mounts it.
    return Starlette(routes=[Route("/mcp", endpoint=_ManagerEndpoint(manager))], lifespan=lambda app: manager.run())


class _Runner:
    """uvicorn serving one app on a pre-bound socket, in a thread with its own loop."""

    def __init__(self, app: Any, name: str) -> None:
        import uvicorn

        ready = threading.Event()
        self.ready = ready

        class _Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                try:
                    await super().startup(sockets=sockets)
                finally:
                    ready.set()

        config = uvicorn.Config(
            app, lifespan="on", log_level="error", access_log=False, ws="none", timeout_graceful_shutdown=2
        )
        self.server = _Server(config)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        self.name = name
        self.thread = threading.Thread(target=self._run, name=f"{name}:{self.port}", daemon=True)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self.server.serve(sockets=[self.sock]))
        except BaseException as exc:  # uvicorn calls sys.exit() on a failed startup
            self.error = exc
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self.sock.close()
                self.ready.set()

    def start(self) -> None:
        self.thread.start()
        if not self.ready.wait(_START_TIMEOUT):
            self.stop()
            raise RuntimeError(f"{self.name} on port {self.port} did not start within {_START_TIMEOUT}s")
        if not self.server.started:
            self.thread.join(_STOP_TIMEOUT)
            raise RuntimeError(f"{self.name} on port {self.port} failed to start: {self.error!r}")

    def stop(self) -> None:
        loop = self.loop
        if loop is not None and self.thread.is_alive():

            def request_exit() -> None:
                self.server.should_exit = True

            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(request_exit)
        self.thread.join(_STOP_TIMEOUT)
        if self.thread.is_alive():
            raise RuntimeError(f"{self.name} on port {self.port} did not stop within {_STOP_TIMEOUT}s")


@contextlib.contextmanager
def serve_in_thread(app: Any, name: str = "reference MCP server") -> Iterator[int]:
    """Serve any ASGI ``app`` (lifespan on) on 127.0.0.1 for the block; yields the port."""
    runner = _Runner(app, name)
    try:
        runner.start()
    except BaseException:
        runner.sock.close()
        raise
    try:
        yield runner.port
    finally:
        runner.stop()


@contextlib.contextmanager
def reference_server(json_response: bool = False) -> Iterator[str]:
    """A running real SDK server for the block; yields its endpoint URL ``http://127.0.0.1:PORT/mcp``."""
    with serve_in_thread(_starlette_app(json_response)) as port:
        yield f"http://127.0.0.1:{port}/mcp"
