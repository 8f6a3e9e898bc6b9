"""FakeMCPServer: the running fake a test talks to, and the factory that pools listeners.

The factory owns uvicorn listeners for the whole pytest session; each test leases one, reset to
a clean state, and hands it back after the teardown checks. Tests pay for a reset, not a start.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ._app import FakeMCPApp
from ._errors import LifecycleError, VerificationError
from ._listener import Listener
from ._options import FakeMCPOptions
from ._sessions import EndReason, SessionRecord

if TYPE_CHECKING:
    from typing import Unpack

    from ._journal import Exchange, ExchangeFilter, Journal
    from ._tools import Prompt, Resource, ResourceTemplate, Tool
    from ._types import JSONObject, SessionId

__all__ = ["FakeMCPServer", "FakeMCPServerFactory"]


class FakeMCPServer:
    """A fake streamable-HTTP MCP server, started and clean, as the ``fake_mcp_server`` fixture gives it.

    Example::

        def test_lists_tools(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: f"results for {query}")
            ...  # point your client at fake_mcp_server.url
            assert fake_mcp_server.initialize_count == 1

    Only exposed for type hints; build one with the fixture or ``fake_mcp_server_factory``.
    """

    def __init__(self, app: FakeMCPApp, listener: Listener) -> None:
        """Private: use the fixtures."""
        self._app = app
        self._listener = listener

    def __repr__(self) -> str:
        state = "running" if self._listener.running else "stopped"
        return f"<FakeMCPServer {self.url} {state}>"

    # --- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The full endpoint URL, e.g. ``http://127.0.0.1:53211/mcp``."""
        return f"{self._listener.origin}{self._app.options.path}"

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``: what an HTTP client's base URL would be."""
        return self._listener.origin

    @property
    def options(self) -> FakeMCPOptions:
        return self._app.options

    # --- what it serves ---------------------------------------------------------------------

    def add_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: JSONObject | None = None,
        output_schema: JSONObject | None = None,
        description: str | None = None,
    ) -> Tool:
        """Serve a tool. ``handler`` gets the call's arguments as keyword arguments.

        It may be sync or async, and declare ``ctx`` to get a :class:`Context` (session id, a
        per-session ``state`` dict, ``progress()`` and ``log()``). A ``str`` return becomes text
        content, a ``dict`` structured content, a :class:`ToolResult` is sent as it is. Raise
        :class:`ToolError` for an ``isError`` result, :class:`JSONRPCError` for a JSON-RPC error;
        any other exception answers -32603 and fails the test at teardown.

        Example::

            fake_mcp_server.add_tool("add", lambda a, b: str(a + b))
        """
        return self._app.catalog.add_tool(
            name, handler, input_schema=input_schema, output_schema=output_schema, description=description
        )

    def add_resource(
        self,
        uri: str,
        content: str | bytes | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Resource:
        """Serve a resource at ``uri``: fixed text or bytes, or a handler returning them."""
        return self._app.catalog.add_resource(
            uri, content, name=name, description=description, mime_type=mime_type
        )

    def add_resource_template(
        self,
        uri_template: str,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> ResourceTemplate:
        """Serve every URI matching ``uri_template`` (e.g. ``"file:///{name}"``); ``handler(name=...)``."""
        return self._app.catalog.add_resource_template(
            uri_template, handler, name=name, description=description, mime_type=mime_type
        )

    def add_prompt(
        self, name: str, handler: str | Callable[..., Any], *, description: str | None = None
    ) -> Prompt:
        """Serve a prompt: fixed text, or a handler taking the prompt's arguments."""
        return self._app.catalog.add_prompt(name, handler, description=description)

    # --- what happened ----------------------------------------------------------------------

    @property
    def journal(self) -> Journal:
        """Every exchange of this test; ``print()`` it for a sequence diagram."""
        return self._app.journal

    @property
    def exchanges(self) -> tuple[Exchange, ...]:
        return self._app.journal.exchanges

    def get_requests(self, **filters: Unpack[ExchangeFilter]) -> list[Exchange]:
        """Exchanges matching every filter; see :meth:`Journal.get_requests`."""
        return self._app.journal.get_requests(**filters)

    def get_request(self, **filters: Unpack[ExchangeFilter]) -> Exchange | None:
        """The one exchange matching ``filters`` or None; AssertionError if several match."""
        __tracebackhide__ = True
        return self._app.journal.get_request(**filters)

    @property
    def sessions(self) -> tuple[SessionRecord, ...]:
        """Every session of this test, live and ended, in the order they began."""
        app = self._app
        self._listener.call(lambda: app.sessions.expire_idle(app.now(), app.options.idle_limit))
        return app.sessions.snapshots()

    @property
    def live_sessions(self) -> tuple[SessionRecord, ...]:
        return tuple(s for s in self.sessions if s.live)

    @property
    def initialize_count(self) -> int:
        """How many ``initialize`` requests arrived (whatever they were answered)."""
        return len(self.get_requests(method="initialize"))

    @property
    def tool_executions(self) -> dict[str, int]:
        """How many times each tool's handler ran (the side-effect ledger)."""
        return dict(self._app.handlers.tool_executions)

    @property
    def max_in_flight(self) -> int:
        """The most requests the fake was answering at once."""
        return self._app.max_in_flight

    @property
    def connections(self) -> set[str]:
        """Distinct client ``host:port`` pairs seen: TCP connections, not HTTP clients."""
        return {e.connection for e in self.exchanges if e.connection is not None}

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the fake (handlers included); re-raised at teardown."""
        return list(self._app.errors)

    # --- session faults -----------------------------------------------------------------------

    def drop_session(self, session_id: SessionId | None = None) -> list[SessionId]:
        """Forget a live session now (None: every live session); its id answers 404 from then on.

        Returns the ids dropped. Example::

            fake_mcp_server.drop_session()
        """
        app = self._app
        dropped = self._listener.call(lambda: app.drop_session(session_id))
        target = "every live session" if session_id is None else session_id[:8]
        app.journal.note(f"drop_session({target}) -> dropped {[s[:8] for s in dropped]}")
        return dropped

    def restart(self) -> None:
        """Forget every session and end open streams, as a restarted server does; the port stays up."""
        app = self._app
        self._listener.call(lambda: app.drop_session(None, EndReason.RESTART))
        app.journal.note("restart() -> every session forgotten")

    # --- lifecycle ----------------------------------------------------------------------------

    def reset(self, options: FakeMCPOptions | None = None) -> None:
        """Back to a clean server: catalog, sessions, journal, errors and faults cleared."""
        app = self._app
        self._listener.call(lambda: app.reset(options))

    def verify(self) -> None:
        """The teardown checks: errors raised inside the fake.

        Raises:
            VerificationError: if the fake raised while answering (the first error is the cause).
        """
        __tracebackhide__ = True
        errors = self._app.errors
        if errors and self._app.options.fail_on_server_error:
            from ._report import render_diagram

            listing = "\n".join(f"  - {e}" for e in errors)
            raise VerificationError(
                f"The fake MCP server raised {len(errors)} error(s) while answering:\n{listing}\n\n"
                f"{render_diagram(self.exchanges, self.journal.events)}\n"
                "Hint: a handler raised; raise ToolError for an isError result or JSONRPCError for a JSON-RPC "
                "error, or set @pytest.mark.fake_mcp_server(fail_on_server_error=False)."
            ) from errors[0].error

    @property
    def app(self) -> FakeMCPApp:
        """The ASGI app (for in-process use)."""
        return self._app


class FakeMCPServerFactory:
    """Owns the listeners of a pytest session and leases clean servers to tests.

    Example::

        def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
            with fake_mcp_server_factory.lease(flavour="mcp1") as other:
                ...
    """

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self._idle: list[FakeMCPServer] = []
        self._all: list[FakeMCPServer] = []
        self._lock = threading.Lock()
        self.started = 0

    def _acquire(self, options: FakeMCPOptions) -> FakeMCPServer:
        with self._lock:
            server = self._idle.pop() if self._idle else None
        if server is None:
            app = FakeMCPApp(options)
            listener = Listener(app, host=self.host)
            listener.start()
            server = FakeMCPServer(app, listener)
            self.started += 1
            with self._lock:
                self._all.append(server)
        server.reset(options)
        return server

    def _release(self, server: FakeMCPServer) -> None:
        server.reset()
        with self._lock:
            self._idle.append(server)

    @contextlib.contextmanager
    def lease(self, options: FakeMCPOptions | None = None, /, **kwargs: Any) -> Iterator[FakeMCPServer]:
        """A clean server for the ``with`` block, verified when the block ends without error."""
        __tracebackhide__ = True
        if options is None:
            options = FakeMCPOptions(**kwargs)
        elif kwargs:
            raise LifecycleError("lease() takes a FakeMCPOptions or keyword options, not both")
        server = self._acquire(options)
        try:
            yield server
            server.verify()
        finally:
            self._release(server)

    def close(self) -> None:
        """Stop every listener."""
        with self._lock:
            servers, self._all, self._idle = self._all, [], []
        errors: list[BaseException] = []
        for server in servers:
            try:
                server._listener.stop()
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
