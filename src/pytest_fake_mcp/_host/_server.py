"""FakeMCPServer: the running fake a test talks to.

``_factory`` pools these across a pytest session; the private ``_reset``/``_recycle``/``_lease``/``_verify``
here are what it calls to hand one from test to test.

Past the soft size cap on purpose: this is the public face, and most methods are a docstring users
read in their editor over one line that hands the work to the app, the fault controls or ``_oracles``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._fake._app import FakeMCPApp, user_frames
from .._fake._shapes import SessionLossShape
from .._faults import ANY, FaultControls
from .._record._sessions import EndReason, SessionRecord
from .._wire._errors import LifecycleError, ScriptError, VerificationError
from .._wire._options import FakeMCPOptions
from ._listener import Listener

if TYPE_CHECKING:
    from typing import Unpack

    from .._fake._announce import How, Kind
    from .._fake._auth import AuthEvent, AuthServer
    from .._fake._catalog import Prompt, Resource, ResourceTemplate, Tool
    from .._fake._gate import Gate
    from .._fake._handlers import ToolExecution
    from .._faults import ScriptedFault
    from .._oracles import ServerFigures
    from .._record._journal import Exchange, ExchangeFilter, Journal
    from .._wire._types import JSONObject, SessionId

__all__ = ["FakeMCPServer", "app_of", "reset"]

_T = TypeVar("_T")

_RESET_TIMEOUT = 10.0


class FakeMCPServer:
    """A fake streamable-HTTP MCP server, started and clean, as the ``fake_mcp_server`` fixture gives it.

    Example::

        def test_lists_tools(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: f"results for {query}")
            ...  # point your client at fake_mcp_server.url
            assert fake_mcp_server.figures.initialize_count == 1

    Only exposed for type hints; build one with the fixture or ``fake_mcp_server_factory``.
    """

    def __init__(self, app: FakeMCPApp, listener: Listener) -> None:
        """Private: use the fixtures."""
        self._app = app
        self._listener = listener
        self._faults = FaultControls(app, listener)
        self._resetting: concurrent.futures.Future[None] | None = None

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
        param_headers: Mapping[str, str] | None = None,
    ) -> Tool:
        """Serve a tool. ``handler`` gets the call's arguments as keyword arguments.

        It may be sync or async, and declare ``ctx`` to get a :class:`Context` (session id, a
        per-session ``state`` dict, ``progress()`` and ``log()``). A ``str`` return becomes text
        content, a ``dict`` structured content, a :class:`ToolResult` is sent as it is. Raise
        :class:`ToolError` for an ``isError`` result, :class:`JSONRPCError` for a JSON-RPC error;
        any other exception answers -32603 and fails the test at teardown.

        ``param_headers`` maps arguments to header names: a modern-era client mirrors each into an
        ``Mcp-Param-<name>`` header, and the fake refuses a call whose headers disagree (docs/eras.md).

        Example::

            fake_mcp_server.add_tool("add", lambda a, b: str(a + b))
            def route(region: str) -> str:
                return f"routed to {region}"

            fake_mcp_server.add_tool("route", route, param_headers={"region": "Region"})

        Raises:
            ScriptError: for a schema an MCP client would reject (invalid under its ``$schema`` dialect, JSON
                Schema 2020-12 if none, or not an object schema), a handler that is not callable, an empty name,
                or a ``param_headers`` entry a real server would refuse; raised here, at the test's line.
        """
        __tracebackhide__ = True
        catalog = self._app.catalog
        return self._change(
            "tool",
            name,
            "replaced" if name in catalog.tools else "added",
            lambda: catalog.add_tool(
                name,
                handler,
                input_schema=input_schema,
                output_schema=output_schema,
                description=description,
                param_headers=param_headers,
            ),
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
        catalog = self._app.catalog
        return self._change(
            "resource",
            uri,
            "replaced" if uri in catalog.resources else "added",
            lambda: catalog.add_resource(uri, content, name=name, description=description, mime_type=mime_type),
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
        catalog = self._app.catalog
        return self._change(
            "resource",
            uri_template,
            "replaced" if uri_template in catalog.templates else "added",
            lambda: catalog.add_resource_template(
                uri_template, handler, name=name, description=description, mime_type=mime_type
            ),
        )

    def add_prompt(self, name: str, handler: str | Callable[..., Any], *, description: str | None = None) -> Prompt:
        """Serve a prompt: fixed text, or a handler taking the prompt's arguments."""
        catalog = self._app.catalog
        return self._change(
            "prompt",
            name,
            "replaced" if name in catalog.prompts else "added",
            lambda: catalog.add_prompt(name, handler, description=description),
        )

    def remove_tool(self, name: str) -> None:
        """Stop serving tool ``name``: a later ``tools/call`` of it is answered ``Unknown tool``, as a real server's.

        Mid-test, with ``@pytest.mark.fake_mcp_server(list_changed=True)``, each session's GET stream gets
        ``notifications/tools/list_changed`` (docs/changing-tools.md). ``add_tool`` over a served name replaces it.

        Raises:
            ScriptError: if the fake serves no tool ``name`` (the message lists those it serves).

        Example::

            fake_mcp_server.remove_tool("search")
        """
        __tracebackhide__ = True
        catalog = self._app.catalog
        self._change("tool", name, "removed", lambda: catalog.remove_tool(name))

    def remove_resource(self, uri: str) -> None:
        """Stop serving the resource at ``uri`` (or the template ``uri`` names); announced as :meth:`remove_tool` is.

        Raises:
            ScriptError: if the fake serves no resource ``uri``.
        """
        __tracebackhide__ = True
        catalog = self._app.catalog
        self._change("resource", uri, "removed", lambda: catalog.remove_resource(uri))

    def remove_prompt(self, name: str) -> None:
        """Stop serving prompt ``name``; announced as :meth:`remove_tool` is.

        Raises:
            ScriptError: if the fake serves no prompt ``name``.
        """
        __tracebackhide__ = True
        catalog = self._app.catalog
        self._change("prompt", name, "removed", lambda: catalog.remove_prompt(name))

    async def wait_for_get_streams(self, count: int = 1, *, within: float = 10.0) -> None:
        """Wait (on an asyncio loop) until ``count`` sessions have their GET stream open: a change announced
        before a client opened its stream is dropped, as a real server drops it (docs/changing-tools.md).

        Raises:
            AssertionError: if fewer were open after ``within`` seconds (the client opens none? mcp 2.x and 1.x
                open one after ``initialize``). ValueError: if ``count < 1``.

        Example::

            async with my_client:
                await fake_mcp_server.wait_for_get_streams()
                fake_mcp_server.remove_tool("search")
        """
        __tracebackhide__ = True
        import asyncio

        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count={count!r} must be an int >= 1 (how many GET streams to wait for)")
        announcer = self._app.announcer
        future = self._listener.call(lambda: announcer.when_streams(count))
        try:
            async with asyncio.timeout(within):
                await asyncio.wrap_future(future)
        except TimeoutError:
            future.cancel()
            raise AssertionError(
                f"wait_for_get_streams({count}): {announcer.open_streams} GET stream(s) open after {within}s, "
                f"expected {count}. A client opens one per session after initialize (the SDK does, in the "
                "background); one that never does cannot hear of a change (docs/changing-tools.md)"
            ) from None

    def _change(self, kind: Kind, name: str, how: How, apply: Callable[[], _T]) -> _T:
        """Apply a catalog change: before the first request it is set-up (no journal event, nothing sent); after,
        on the server loop, journaled and, with ``list_changed=True``, announced on each GET stream."""
        __tracebackhide__ = True
        app = self._app
        if len(app.journal) == 0 and not app.requests:
            return apply()

        def run() -> _T:
            result = apply()
            app.announcer.changed(kind, name, how)
            return result

        return self._listener.call(run)

    # --- what happened ----------------------------------------------------------------------

    @property
    def journal(self) -> Journal:
        """Every exchange of this test; ``print()`` it for a sequence diagram."""
        return self._app.journal

    @property
    def exchanges(self) -> tuple[Exchange, ...]:
        """Deprecated: use ``server.journal.exchanges``."""
        _deprecated("exchanges", "server.journal.exchanges")
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
        """Deprecated: use ``server.figures.initialize_count``. How many ``initialize`` requests arrived."""
        _deprecated("initialize_count", "server.figures.initialize_count")
        return len(self.get_requests(method="initialize"))

    @property
    def tool_executions(self) -> dict[str, int]:
        """Deprecated: use ``server.figures.tool_executions``. How many times each tool's handler ran."""
        _deprecated("tool_executions", "server.figures.tool_executions")
        return dict(self._app.handlers.tool_executions)

    @property
    def max_in_flight(self) -> int:
        """Deprecated: use ``server.figures.max_in_flight``. The most requests the fake was answering at once."""
        _deprecated("max_in_flight", "server.figures.max_in_flight")
        return self._app.max_in_flight

    @property
    def connections(self) -> set[str]:
        """Deprecated: use ``server.figures.connections``. Distinct client ``host:port`` pairs seen."""
        _deprecated("connections", "server.figures.connections")
        return {e.connection for e in self._app.journal.exchanges if e.connection is not None}

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the fake (handlers included); re-raised at teardown."""
        return list(self._app.errors)

    # --- scripted faults (the work is in _faults: FaultControls) --------------------------------------

    def on(
        self,
        method: str | Any = ANY,
        *,
        tool: str | Any = ANY,
        target: str | Any = ANY,
        arguments: Mapping[str, Any] | Any = ANY,
        session_id: SessionId | Any | None = ANY,
        has_session: bool | Any = ANY,
        http_method: str | Any = ANY,
        era: str | Any = ANY,
    ) -> ScriptedFault:
        """Script a fault on requests matching every given field; chain counting and an action.

        ``method`` is the JSON-RPC method (``"tools/call"``); ``tool`` the tool it calls;
        ``target`` a prompt name or resource URI; ``arguments`` tool arguments that must be present;
        ``session_id`` the ``Mcp-Session-Id`` sent (None: none); ``has_session`` whether one is sent;
        ``http_method`` ``"GET"`` (the standalone stream) or ``"DELETE"``; ``era`` the era answering
        the request, ``"handshake"`` or ``"modern"`` (docs/eras.md). A fault fires once unless
        counted otherwise, and fails the test at teardown if it never fired (``.optional()`` to allow).

        Raises:
            ScriptError: for a typo in a method name, a tool on another method, an era that is not
                ``"handshake"`` or ``"modern"``, an action the chosen era has no use for, ...

        Example::

            fake_mcp_server.on("initialize").delay(0.5).once()
            fake_mcp_server.on("tools/call", tool="search").nth(2).respond(503)
            fake_mcp_server.on(http_method="GET").respond(405)
            fake_mcp_server.on("tools/call", era="modern").close_connection()
        """
        return self._faults.on(
            method,
            tool=tool,
            target=target,
            arguments=arguments,
            session_id=session_id,
            has_session=has_session,
            http_method=http_method,
            era=era,
        )

    def gate(self, name: str = "gate") -> Gate:
        """A :class:`Gate` for ``delay(until=...)``: requests wait at it until ``gate.open()``."""
        return self._faults.gate(name)

    def cap_sessions(
        self, limit: int, *, shape: SessionLossShape = SessionLossShape.TOO_MANY_SESSIONS
    ) -> ScriptedFault:
        """Refuse new sessions while ``limit`` are live: 503 ``Too many open sessions`` (2.x SDK), or
        ``shape=SessionLossShape.ALREADY_INITIALIZED`` as single-session servers answer. A server
        policy: optional, so it does not fail a test that never reaches the cap."""
        return self._faults.cap_sessions(limit, shape=shape)

    def strict_initialize(self) -> ScriptedFault:
        """Refuse every ``initialize`` that carries ``Mcp-Session-Id``, as strict servers do: 400
        ``-32600 "Invalid Request: Server already initialized"`` on a live session, 400 otherwise.
        A server policy: optional (a good client never triggers it)."""
        return self._faults.strict_initialize()

    @property
    def scripted_faults(self) -> tuple[ScriptedFault, ...]:
        """Every fault scripted in this test, in order."""
        return self._faults.scripted_faults

    # --- outages --------------------------------------------------------------------------------------

    def drop_session(
        self, session_id: SessionId | None = None, *, shape: SessionLossShape | None = None
    ) -> list[SessionId]:
        """Forget a live session now (None: every live session); its id answers 404 from then on.

        ``shape``: answer the dropped ids with this :class:`SessionLossShape` instead of the
        flavour's 404. Returns the ids dropped. Example::

            fake_mcp_server.drop_session()
        """
        return self._faults.drop_session(session_id, shape)

    def restart(self, *, shape: SessionLossShape | None = None) -> None:
        """Forget every session and end every exchange in flight, as a restarted server does; the port stays up.

        GET streams, POST SSE streams and held requests end as a real SDK server's restart ends them: their
        connection closes (FIN, not a reset) before the response's last chunk, so the client reads the body as
        cut short (httpx: ``RemoteProtocolError``). ``shape``: how the forgotten ids are answered (default: the
        flavour's 404).
        """
        self._faults.restart(shape)

    @contextlib.contextmanager
    def sessions_expired(self, shape: SessionLossShape | None = None) -> Iterator[None]:
        """Inside the block every session is gone: live ones are dropped and each session-bearing request
        (new sessions' too) meets the "unknown session" answer; sessions live at the end are dropped too.

        Example::

            with fake_mcp_server.sessions_expired():
                with pytest.raises(MCPError):
                    await session.call_tool("echo", {"text": "a"})
        """
        with self._faults.sessions_expired(shape):
            yield

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Inside the block the server is down: connections are refused. It comes back on the same port
        (same URL) with an empty session table; connections open when it went down are reset.

        Example::

            with fake_mcp_server.down():
                with pytest.raises(Exception):   # httpx.ConnectError inside the SDK's error
                    await connect(fake_mcp_server.url)
            await connect(fake_mcp_server.url)   # up again
        """
        with self._faults.down():
            yield

    @contextlib.contextmanager
    def latency(self, seconds: float, **match: Any) -> Iterator[ScriptedFault]:
        """Inside the block every request matching ``match`` (see :meth:`on`) waits ``seconds`` first.

        Example::

            with fake_mcp_server.latency(0.2, method="tools/call"):
                ...
        """
        with self._faults.latency(seconds, **match) as rule:
            yield rule

    def advance_idle_clock(self, seconds: float, *, include_streaming: bool = False) -> list[SessionId]:
        """Let ``seconds`` of idleness pass for every live session, at once (no real waiting).

        Sessions idle longer than ``idle_timeout`` (marker option; 1800 s for mcp2) expire with
        ``EndReason.IDLE`` and answer 404. As in the SDK, a session with its GET stream open does not
        idle out unless ``include_streaming`` (servers whose timer ignores streams; the stream ends).

        Returns the expired ids. Example::

            @pytest.mark.fake_mcp_server(idle_timeout=60)
            def test_idle(fake_mcp_server):
                ...  # open a session, then let it idle out
                fake_mcp_server.advance_idle_clock(61)
        """
        return self._faults.advance_idle_clock(seconds, include_streaming=include_streaming)

    def executions(self, tool: str | Any = ANY, arguments: Mapping[str, Any] | Any = ANY) -> list[ToolExecution]:
        """Every run of a tool handler in this test, filtered by tool and exact arguments (the side-effect ledger).

        Example::

            assert len(fake_mcp_server.executions("charge", {"amount": 5})) == 1
        """
        return self._faults.executions(tool, arguments)

    # --- lifecycle ----------------------------------------------------------------------------

    def _reset(self, options: FakeMCPOptions | None = None) -> None:
        """Back to a clean server: catalog, sessions, journal, errors and faults cleared."""
        self._settled()
        self._faults.release_held(end_all=True)
        self._reset_app(options, bound=True)  # a test's lease: hold_timeout applies

    # Issue 11: a lease of a pooled server must cost next to nothing, and every trip to the server loop's
    # thread costs a thread wake-up (much more on a busy machine). When the server is quiet (nothing in flight,
    # no connection open) the loop has nothing to race with, and the reset runs here; otherwise it runs on the
    # loop, without waiting, and the next lease waits for it (by then long done).

    def _quiet(self) -> bool:
        return not self._app.requests and self._listener.open_connections == 0

    def _reset_app(self, options: FakeMCPOptions | None, *, bound: bool) -> None:
        app, listener = self._app, self._listener
        if self._quiet():
            app.reset(options)
            self._faults = FaultControls(app, listener, bound=bound, inline=True)
            return
        listener.call(lambda: app.reset(options))
        self._faults = FaultControls(app, listener, bound=bound)

    def _recycle(self) -> None:
        """End what is in flight and reset the app: here if the server is quiet, else on its loop, not waiting."""
        self._faults.release_held(end_all=True)
        loop, app, listener = self._listener.loop, self._app, self._listener
        if loop is None or not listener.running or self._quiet():
            self._reset_app(None, bound=False)
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def reset() -> None:
            try:
                app.reset()
                self._faults = FaultControls(app, listener, inline=True)
                done.set_result(None)
            except BaseException as exc:
                done.set_exception(exc)

        self._resetting = done
        loop.call_soon_threadsafe(reset)

    def _settled(self) -> None:
        """Wait for the reset :meth:`_recycle` left to the server loop (bounded; re-raising what it raised)."""
        done, self._resetting = self._resetting, None
        if done is not None:
            try:
                done.result(_RESET_TIMEOUT)
            except concurrent.futures.TimeoutError:
                raise LifecycleError(
                    f"fake MCP server on {self.origin} did not reset within {_RESET_TIMEOUT}s: its loop is blocked "
                    "(a sync handler that blocks? use an async handler)"
                ) from None

    def _lease(self, options: FakeMCPOptions) -> None:
        """Ready a recycled server for a lease with ``options``: reset again only if they differ."""
        self._settled()
        current = self._app.options
        if options is not current and (options != current or options.extra != current.extra):
            self._reset_app(options, bound=True)
        else:
            self._faults.arm()

    def _verify(self) -> None:
        """The teardown checks: errors raised inside the fake, then scripted faults that did not fire.

        Requests still held by a fault are let go first (``Outcome.RELEASED``).

        Raises:
            VerificationError: if the fake raised while answering (the first error is the cause), or
                a scripted fault never fired (unless optional) or its barrier timed out.
        """
        __tracebackhide__ = True
        self._faults.release_held()
        errors = self._app.errors
        if errors and self._app.options.fail_on_server_error:
            from .._record._report import render_diagram

            listing = "\n".join(f"  - {e}\n{user_frames(e.error)}" for e in errors)
            raise VerificationError(
                f"The fake MCP server raised {len(errors)} error(s) while answering:\n{listing}\n\n"
                f"{render_diagram(self._app.journal.exchanges, self._app.journal.events)}\n"
                "Hint: a handler raised; raise ToolError for an isError result or JSONRPCError for a JSON-RPC "
                "error, or set @pytest.mark.fake_mcp_server(fail_on_server_error=False)."
            ) from errors[0].error
        self._faults.verify()

    # --- figures and assertions (the checks live in _oracles) ------------------------------------

    @property
    def figures(self) -> ServerFigures:
        """Every figure of this test in one frozen snapshot; ``print()`` it for a summary.

        Example::

            assert fake_mcp_server.figures.not_found_count == 0
        """
        from .._oracles import ServerFigures

        app = self._app

        def take() -> ServerFigures:
            if not quiet:
                app.sessions.expire_idle(app.now(), app.options.idle_limit)
            return ServerFigures(
                url=self.url,
                exchanges=app.journal.exchanges,
                events=app.journal.events,
                sessions=app.sessions.snapshots(),
                tool_executions=dict(app.handlers.tool_executions),
                tools=tuple(app.catalog.tools),
                max_in_flight=app.max_in_flight,
            )

        # No request since the reset (the journal is empty), so no session to expire: read here, no trip.
        quiet = len(app.journal) == 0 and not app.requests
        return take() if quiet else self._listener.call(take)

    def mark_client_closed(self) -> None:
        """Note that the test's client is closed: with ``assert_no_requests_after_close=True`` any later request fails.

        Example::

            async with my_client:
                ...
            fake_mcp_server.mark_client_closed()
        """
        from .._record._analysis import CLIENT_CLOSED

        self._app.journal.note(CLIENT_CLOSED)

    def assert_initialize_count(self, n: int) -> None:
        """Assert exactly ``n`` ``initialize`` requests arrived, however they were answered.

        Raises:
            AssertionError: if the count differs; the message shows every session and exchange.

        Example::

            fake_mcp_server.assert_initialize_count(1)
        """
        __tracebackhide__ = True
        from .._oracles import assert_initialize_count

        assert_initialize_count(self.figures, n)

    def assert_sessions(
        self,
        *,
        created: int | None = None,
        ended: int | None = None,
        ended_by: Mapping[str | EndReason, int] | None = None,
        live: int | None = None,
    ) -> None:
        """Assert the session figures: sessions the fake created, ended, still live, and how they ended.

        ``ended_by`` is the whole breakdown by :class:`EndReason` (``"delete"``, ``"dropped"``,
        ``"restart"``, ``"idle"``); a reason left out means none ended that way.

        Raises:
            AssertionError: if a figure differs.
            TypeError: if no figure is given; ValueError for an unknown ``ended_by`` key.

        Example::

            fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
        """
        __tracebackhide__ = True
        from .._oracles import assert_sessions

        assert_sessions(self.figures, created=created, ended=ended, ended_by=ended_by, live=live)

    def assert_session_reused(self) -> None:
        """Assert the client kept one session and opened a new one only when the server ended it.

        After the first ``initialize`` that opened a session (the handshake):

        * every POST and GET that started after a handshake was answered carried the current
          session's id: that of the newest handshake answered before it started (or of one still in
          flight then). No id, an older session's id, or an id the client never got fails;
        * every later ``initialize`` follows the end of the previous session *by the server*
          (drop, restart, idle expiry, or any 404 for it). One sent while that session was live
          (new session per call, two concurrent first calls) or after the client's own DELETE fails.

        DELETEs are closing, not use: see ``assert_no_stale_session_ids`` and ``assert_all_sessions_closed``.
        Meant for one client per server.

        Raises:
            AssertionError: if a request broke reuse, or no handshake opened a session.

        Example::

            fake_mcp_server.assert_session_reused()
        """
        __tracebackhide__ = True
        from .._oracles import assert_session_reused

        assert_session_reused(self.figures)

    def assert_no_stale_session_ids(self, *, strict: bool = False) -> None:
        """Assert no request carried a session id it should not have.

        * No ``initialize`` carried ``Mcp-Session-Id`` at all.
        * Once the client was told a session is over, nothing carried its id again. It is told by
          the first answer to a request carrying the id that began after the session ended on the
          server (usually the 404), by any 404 to such a request, or by the 2xx to its own DELETE.
          Requests that started before that answer was complete (the one that learnt it, and any
          sent alongside) are not stale; anything after is, a POST retry or a GET stream
          reconnecting with the dead id included. A session's first ``notifications/initialized``
          is exempt (the 2.x SDK's DELETE can overtake it).
        * One DELETE of a session the server ended is allowed: the SDK's default transport
          (``terminate_on_close=True``) sends it when a client closes the transport that met the 404.
          It is drawn as a ``note:`` on the diagram and counted in ``figures.harmless_deletes``.
          ``strict=True`` counts it as stale, for a client that must send nothing at all to a dead
          session (see docs/failure-modes.md#harmless-delete for why, and how to avoid it).

        Raises:
            AssertionError: listing the stale exchanges, marked ``!`` in the diagram.

        Example::

            fake_mcp_server.assert_no_stale_session_ids()
            fake_mcp_server.assert_no_stale_session_ids(strict=True)  # not even the SDK's DELETE after a 404
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_stale_session_ids

        assert_no_stale_session_ids(self.figures, strict=strict)

    def assert_all_sessions_closed(self) -> None:
        """Assert each session an ``initialize`` opened was closed by the client.

        Closed means a DELETE carried its id (whatever the answer), or the client was told the session
        was gone (a request carrying its id got the answer described in ``assert_no_stale_session_ids``),
        after which a DELETE would be stale. A live session, or one the server ended without the client
        ever learning it, fails. Call it after the client is closed.

        Raises:
            AssertionError: naming each session left open.

        Example::

            fake_mcp_server.assert_all_sessions_closed()
        """
        __tracebackhide__ = True
        from .._oracles import assert_all_sessions_closed

        assert_all_sessions_closed(self.figures)

    def assert_tool_ran(self, name: str, *, times: int | None = None) -> None:
        """Assert the handler of tool ``name`` ran ``times`` times (None: at least once).

        Counts handler runs (the side-effect ledger), not ``tools/call`` requests: a call refused
        with 404 did not run; the SDK's ``tools/list`` after a first call is not a run.

        Raises:
            AssertionError: if the count differs. ValueError: if ``times`` is negative.

        Example::

            fake_mcp_server.assert_tool_ran("echo", times=2)
        """
        __tracebackhide__ = True
        from .._oracles import assert_tool_ran

        assert_tool_ran(self.figures, name, times=times)

    def assert_concurrent(self, *, min_in_flight: int) -> None:
        """Assert at least ``min_in_flight`` JSON-RPC requests were in flight at once.

        A request (a POST with an id: not a notification, GET stream or DELETE) is in flight from
        when the fake began it until its answer was complete. Open GET streams do not count, so a
        sequential client with a GET stream open is not concurrent.

        Raises:
            AssertionError: if fewer were ever in flight together. ValueError: if ``min_in_flight < 1``.

        Example::

            fake_mcp_server.assert_concurrent(min_in_flight=3)
        """
        __tracebackhide__ = True
        from .._oracles import assert_concurrent

        assert_concurrent(self.figures, min_in_flight=min_in_flight)

    def assert_no_requests_after_close(self) -> None:
        """Assert no request arrived after the last :meth:`mark_client_closed` (run at teardown with
        ``@pytest.mark.fake_mcp_server(assert_no_requests_after_close=True)``).

        Raises:
            AssertionError: listing the late requests, or if ``mark_client_closed()`` was never called.

        Example::

            fake_mcp_server.mark_client_closed()
            fake_mcp_server.assert_no_requests_after_close()
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_requests_after_close

        assert_no_requests_after_close(self.figures)

    # --- changing lists (docs/changing-tools.md) ---------------------------------------------------

    def assert_relisted_after_changes(self, *, single_client: bool = False) -> None:
        """Assert each client that lived through a change of a tool (``add_tool`` over a served name,
        ``remove_tool``, a new tool) sent ``tools/list`` after the change before it called that tool.

        A handshake-era client is its session. A 2026-07-28 client has none: its call is stale when no
        ``tools/list`` reached the fake since the change and the call's TCP connection carried an exchange begun
        before it; ``single_client=True`` says one client sent every modern-era request, so any modern exchange
        before the change counts (docs/changing-tools.md).

        Raises:
            AssertionError: marking each call that came before the client listed again; or if no tool changed
                during the test (nothing to check).
            ScriptError: a modern-era call that cannot be attributed soundly (naming why and the fix), or
                ``single_client=True`` where more than one client probed.

        Example::

            fake_mcp_server.add_tool("search", new_search)  # replaces the served "search"
            ...  # the client calls search again
            fake_mcp_server.assert_relisted_after_changes()
        """
        __tracebackhide__ = True
        from .._oracles import assert_relisted_after_changes

        assert_relisted_after_changes(self.figures, single_client=single_client)

    def assert_no_removed_tool_calls(self) -> None:
        """Assert the client never called a tool after the test removed it (``remove_tool``).

        The teardown's unknown-tool check (``fail_on_unknown_tool``) reports such a call too, in the same words;
        once this assertion has reported it, the teardown does not again.

        Raises:
            AssertionError: naming each removed tool called, with the removal and the call marked.

        Example::

            fake_mcp_server.remove_tool("search")
            ...  # the client works on
            fake_mcp_server.assert_no_removed_tool_calls()
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_removed_tool_calls

        assert_no_removed_tool_calls(self.figures)

    # --- the 2026-07-28 era (docs/eras.md) -------------------------------------------------------

    def assert_discover_once(self, *, clients: int = 1) -> None:
        """Assert each of ``clients`` clients sent ``server/discover`` once: the era is learned once, not per call.

        Raises:
            AssertionError: if more (or fewer) probes arrived, with the extra ones marked on the diagram.

        Example::

            fake_mcp_server.assert_discover_once()
        """
        __tracebackhide__ = True
        from .._oracles import assert_discover_once

        assert_discover_once(self.figures, clients=clients)

    def assert_list_results_cached(self) -> None:
        """Assert no list request (``tools/list``, ...) was sent again while the last answer's ``ttlMs`` held.

        The same list (method and cursor) counts; an answer with ``ttlMs: 0`` (the fake's default) allows any
        repeat. Script fresh answers with ``on("tools/list").always().cache_hint(ttl_ms=60_000)``.

        Raises:
            AssertionError: marking each repeat with how long after the fresh answer it came.

        Example::

            fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=60_000)
            ...  # the client lists tools three times
            fake_mcp_server.assert_list_results_cached()
        """
        __tracebackhide__ = True
        from .._oracles import assert_list_results_cached

        assert_list_results_cached(self.figures)

    def assert_no_session_ids(self) -> None:
        """Assert the client went modern and no modern-era request carried ``Mcp-Session-Id`` (none kept, none sent).

        Raises:
            AssertionError: if a modern request carried one, or no exchange was answered in the modern era.

        Example::

            fake_mcp_server.assert_no_session_ids()
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_session_ids

        assert_no_session_ids(self.figures)

    def assert_stopped_after_era_refusal(self) -> None:
        """Assert the client's ``initialize`` was refused for its era (400, -32022) and nothing followed it.

        A handshake-only client against a modern-only server (``era="modern"``) must fail clearly, naming the
        versions the server gave, rather than retry or carry on without a session.

        Raises:
            AssertionError: if no initialize was refused, or requests followed the refusal.

        Example::

            fake_mcp_server.assert_stopped_after_era_refusal()
        """
        __tracebackhide__ = True
        from .._oracles import assert_stopped_after_era_refusal

        assert_stopped_after_era_refusal(self.figures)

    def assert_resumed(self) -> None:
        """Assert every SSE stream the fake cut after its client got an event id was resumed, not sent again.

        Needs ``event_store=True``. For each POST stream cut before its response (by a fault such as
        ``cut_after_events(n)`` or ``cut_stream(after_call=True)``) after an ``id:`` reached the client, a later
        GET must carry ``Last-Event-ID`` naming one of that stream's events, and no later POST may send the same
        request (method and params) again. For each GET stream cut after an event, a later GET must carry
        ``Last-Event-ID`` naming an event of that session's GET stream.

        Raises:
            AssertionError: if no stream was cut after an id, or one was re-sent or never resumed.
            ScriptError: without ``event_store=True`` (there is nothing to resume).

        Example::

            fake_mcp_server.on("tools/call").cut_after_events(1)
            ...  # the client calls a tool
            fake_mcp_server.assert_resumed()
        """
        __tracebackhide__ = True
        from .._oracles import assert_resumed

        store = self._app.event_store
        if store is None:
            raise ScriptError(
                "assert_resumed() needs the event store: mark the test "
                "@pytest.mark.fake_mcp_server(event_store=True) (docs/resumable-streams.md)"
            )
        figures = self.figures
        delivered, stored = store.figures({e.seq: len(e.response_messages) for e in figures.exchanges})
        assert_resumed(figures, delivered, stored)

    # --- authorization (auth=True; docs/authorization.md) ------------------------------------------

    def expire_tokens(self, *, session_id: SessionId | None = None) -> int:
        """Expire every live access token now (or those used in ``session_id``); returns how many were live.

        The next request carrying one meets the 401 challenge. To expire them at the N-th call instead, script
        ``fake_mcp_server.on("tools/call").nth(n).expire_tokens()``.

        Example::

            fake_mcp_server.expire_tokens()
        """
        auth = self._auth("expire_tokens()")
        return self._listener.call(lambda: auth.expire(session_id=session_id))

    def issue_token(self, *, scopes: Sequence[str] | None = None) -> str:
        """A live access token for the endpoint, minted without the OAuth flow: for a client configured with a
        static ``Authorization: Bearer`` header.

        It lasts ``token_lifetime`` and is refused once expired (``expire_tokens()``), as any token; no grant
        appears in the journal, so the client it is given can be judged only on what it does with it.

        Args:
            scopes: the scopes it carries (default: every scope in ``auth_scopes``); each must be one of those.

        Raises:
            ScriptError: without ``auth=True``, or for a scope the server does not list.

        Example::

            token = fake_mcp_server.issue_token()
            client = MyClient(fake_mcp_server.url, headers={"Authorization": f"Bearer {token}"})
        """
        __tracebackhide__ = True
        auth = self._auth("issue_token()")
        listed = self._app.options.auth_scopes
        if isinstance(scopes, str):
            raise ScriptError(f"scopes={scopes!r} must be a sequence of scope names, e.g. ({scopes!r},)")
        wanted = listed if scopes is None else tuple(scopes)
        unknown = [scope for scope in wanted if scope not in listed]
        if unknown:
            raise ScriptError(
                f"issue_token(scopes={wanted!r}): {unknown[0]!r} is not a scope this server lists: {listed!r}; "
                "set @pytest.mark.fake_mcp_server(auth_scopes=...)"
            )
        return self._listener.call(lambda: auth.issue_for_test(wanted))

    def revoke_refresh_tokens(self) -> int:
        """Revoke every live refresh token now (a refresh then gets 400 ``invalid_grant``); returns how many.

        Example::

            fake_mcp_server.revoke_refresh_tokens()
        """
        auth = self._auth("revoke_refresh_tokens()")
        return self._listener.call(auth.revoke_refresh)

    def assert_single_flight_refresh(self) -> None:
        """Assert the client renewed its token once per expiry, however many requests met the 401.

        A token grant (a refresh, or a new authorization code) for an expiry that an earlier grant had already
        renewed is redundant: two concurrent 401s answered with two refreshes, or a request that met the 401 after
        the refresh and refreshed again.

        Raises:
            AssertionError: if a grant renewed an expiry already renewed.

        Example::

            fake_mcp_server.on("tools/call").expire_tokens()
            ...  # the client makes concurrent calls
            fake_mcp_server.assert_single_flight_refresh()
        """
        __tracebackhide__ = True
        from .._oracles import assert_single_flight_refresh

        assert_single_flight_refresh(*self._auth_figures("assert_single_flight_refresh()"))

    def assert_no_refused_token_reused(self) -> None:
        """Assert no request carried a bearer token after the fake answered 401 to it.

        Raises:
            AssertionError: if a request was sent again after its 401 with the token that 401 refused (another
                request carrying it may have been on its way before the 401: not counted).

        Example::

            fake_mcp_server.assert_no_refused_token_reused()
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_refused_token_reused

        assert_no_refused_token_reused(*self._auth_figures("assert_no_refused_token_reused()"))

    def assert_no_reregistration(self, *, clients: int = 1) -> None:
        """Assert at most ``clients`` dynamic client registrations succeeded (no registration per 401 or refresh).

        Raises:
            AssertionError: if more registrations succeeded.

        Example::

            fake_mcp_server.assert_no_reregistration()
        """
        __tracebackhide__ = True
        from .._oracles import assert_no_reregistration

        assert_no_reregistration(*self._auth_figures("assert_no_reregistration()"), clients=clients)

    def assert_session_kept_across_auth(self) -> None:
        """Assert a 401 was not taken for session loss, nor a 404 for a token problem.

        After a 401 or 403 in a session the client must go on in that session, not open a new one; between a
        session's 404 and the next ``initialize`` it must not register, authorize or ask for a token (unless a
        401 came in between).

        Raises:
            AssertionError: if an ``initialize`` followed a challenge before the session was used again, or a
                request to the authorization server followed a 404.

        Example::

            fake_mcp_server.assert_session_kept_across_auth()
        """
        __tracebackhide__ = True
        from .._oracles import assert_session_kept_across_auth

        assert_session_kept_across_auth(*self._auth_figures("assert_session_kept_across_auth()"))

    def _auth(self, call: str) -> AuthServer:
        auth = self._app.auth
        if auth is None:
            raise ScriptError(
                f"{call} needs the authorization server: mark the test "
                "@pytest.mark.fake_mcp_server(auth=True) (docs/authorization.md)"
            )
        return auth

    def _auth_figures(self, call: str) -> tuple[ServerFigures, tuple[AuthEvent, ...]]:
        auth = self._auth(call)
        figures = self.figures
        return figures, self._listener.call(lambda: tuple(auth.events))


def app_of(server: FakeMCPServer) -> FakeMCPApp:
    """The ASGI app ``server`` serves, for the hosts beside the fixture (``fake-mcp serve``, the race engine's gate).

    Not a member of :class:`FakeMCPServer`: a test talks to the server, never to its app.
    """
    return server._app


def reset(server: FakeMCPServer) -> None:
    """Back to a clean server, as between two tests (``fake-mcp serve``'s ``POST /_fake/reset``)."""
    server._reset()


def _deprecated(name: str, replacement: str) -> None:
    """Warn, at the caller's line, that ``FakeMCPServer.<name>`` is deprecated (issue 21: one release, then gone)."""
    warnings.warn(f"FakeMCPServer.{name} is deprecated; use {replacement} instead", DeprecationWarning, stacklevel=3)
