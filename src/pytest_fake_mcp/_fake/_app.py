"""FakeMCPApp: the fake streamable-HTTP MCP server as a plain ASGI app.

It answers as the SDK servers do: the order of checks, every error status and body, SSE or JSON
answers, the standalone GET stream and DELETE. Faults hook in at two points per request
(:class:`RequestHooks`); the journal records every exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
import sysconfig
import traceback
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol, cast

from .._record._journal import Exchange, Journal, JournalEvent, Outcome
from .._record._report import render_diagram
from .._record._sessions import EndReason, Session, SessionRegistry
from .._wire._errors import JSONRPCError, ServerSideError
from .._wire._options import FakeMCPOptions
from .._wire._protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    SESSION_HEADER,
    VERSION_HEADER,
    Flavour,
    Incoming,
    ParseFailure,
    dumps,
    error_body,
    error_response,
    parse_message,
    result_response,
)
from .._wire._types import ASGIApp as ASGIHandler
from .._wire._types import JSONObject, Receive, Scope, Send
from ._announce import Announcer, Outbox
from ._auth import AuthServer
from ._catalog import Catalog, Context, Tool
from ._checks import accepts, content_type_is_json, first_header, security_refusal, unsupported_version
from ._eras import Era, ModernEra, answer_unserved_modern, era_of
from ._events import EventStore
from ._handlers import MethodHandlers
from ._request import BodyTooLarge, EventStream, RequestContext
from ._standalone import StandaloneStreams

if TYPE_CHECKING:
    from .._wire._types import SessionId

__all__ = ["FakeMCPApp", "RequestHooks", "user_frames"]

_SHARED_LIMIT = 64
_SSE_HEADERS = (
    ("cache-control", "no-cache, no-transform"),
    ("connection", "keep-alive"),
    ("content-type", "text/event-stream"),
)


class RequestHooks(Protocol):
    """Where faults act on a request: before the fake answers it, and after."""

    async def before(self, request: RequestContext) -> None:
        """May delay, hold, or answer the request itself (then ``request.response_started``)."""

    async def after(self, request: RequestContext) -> None:
        """Runs once the answer is sent (e.g. drop the session it used)."""


class _NoHooks:
    async def before(self, request: RequestContext) -> None:
        return None

    async def after(self, request: RequestContext) -> None:
        return None


class FakeMCPApp:
    """The fake server's ASGI app and its state: catalog, sessions, journal, errors.

    It has no thread affinity: every wait is on the running loop's clock, so the same app can be
    served by uvicorn in a thread or reached in-process on the test's own loop.
    """

    def __init__(self, options: FakeMCPOptions | None = None) -> None:
        self.options = options or FakeMCPOptions()
        self.catalog = Catalog()
        self.handlers = MethodHandlers(self.catalog, lambda: self.options)
        self.sessions = SessionRegistry()
        self.modern = ModernEra(self.handlers, lambda: self.options, self.record_error)
        self.served_era: str = self.options.served_era
        """The eras served now: the option, until a fault switches it (a deploy under a live client)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.journal = Journal(self.now, render=self._draw)
        self.announcer = Announcer(self.journal, lambda: self.options)
        """Journals the catalog's changes mid-test and announces them on GET streams (``list_changed``)."""
        self.modern.announcer = self.announcer
        self.errors: list[ServerSideError] = []
        self.event_store = _event_store(self.options)
        """The stored SSE events (``event_store=True``), which a GET with ``Last-Event-ID`` replays; else None."""
        self.standalone = StandaloneStreams(lambda: self.event_store, self.sessions, self.announcer, self.hold_stream)
        """With the store on: each session's GET stream, stored whether a GET is open or not, and its resume."""
        self.announcer.unheard = self.standalone.unheard
        self.hooks: RequestHooks = _NoHooks()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: set[RequestContext] = set()
        """Requests being answered (restart and down() end their connections)."""
        self._closing = asyncio.Event()
        self._router: ASGIHandler | None = None
        self._echo: Tool | None = None
        self._initialize_results: dict[bytes, JSONObject] = {}
        self.auth: AuthServer | None = None
        """The authorization server and the endpoint's bearer check (``options.auth``; None: off)."""
        self._install_defaults()

    def _build_router(self, path: str) -> ASGIHandler:
        # Route treats a plain function as request->response; an object is mounted as raw ASGI,
        # with no method filter, as the SDK mounts its transport.
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[Route(path, endpoint=_ASGIEndpoint(self._endpoint))])

    # --- state management (called on the server loop) ---------------------------------------

    def _draw(self, exchanges: tuple[Exchange, ...], events: tuple[JournalEvent, ...]) -> str:
        """``str(journal)``: the diagram a failure draws, the sessions included (``(not kept)`` reads alike)."""
        return render_diagram(exchanges, events, sessions=self.sessions.snapshots())

    def now(self) -> float:
        loop = self.loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return 0.0
        return loop.time()

    def reset(self, options: FakeMCPOptions | None = None) -> None:
        """Forget everything: catalog, sessions, journal, errors, counters."""
        if options is not None:
            if options.path != self.options.path:
                self._router = None  # built again for the new path when first needed
            self.options = options
        self.sessions.clear()
        self.announcer.end_listens()
        self.event_store = _event_store(self.options)
        self.served_era = self.options.served_era
        self.catalog.clear()
        self.handlers.ledger.clear()
        self.journal.clear()
        self.errors = []
        self.hooks = _NoHooks()
        self.max_in_flight = self.in_flight
        self.auth = None
        self._install_defaults()

    def _install_defaults(self) -> None:
        if self.options.auth:
            self.auth = AuthServer(lambda: self.options, self.now)
        if self.options.echo_tool:
            # Built once per app and put back at each reset: reading a handler's signature is most of a reset's
            # cost, and every lease pays for a reset (issue 11). A Tool is frozen; nothing changes its schema.
            if self._echo is None:
                self._echo = self.catalog.add_tool("echo", _echo)
            else:
                self.catalog.tools["echo"] = self._echo

    def drop_session(self, session_id: SessionId | None, reason: EndReason = EndReason.DROPPED) -> list[str]:
        """End one live session (or all, with None); their ids answer 404 from now on."""
        now = self.now()
        if session_id is None:
            ended = self.sessions.end_all(reason, now)
        else:
            session = self.sessions.get(session_id)
            ended = [session] if session is not None and session.live else []
            for s in ended:
                s.end(reason, now)
        return [s.id for s in ended]

    def record_error(self, where: str, error: BaseException) -> ServerSideError:
        wrapped = ServerSideError(where, error)
        self.errors.append(wrapped)
        return wrapped

    def reopen(self) -> None:
        """Ready the app for a new listener loop (after :meth:`close`)."""
        self._closing = asyncio.Event()
        self.loop = None

    def close(self) -> None:
        """End every open stream so a server can stop at once."""
        self._closing.set()
        for session in self.sessions.live():
            session.ended_event.set()

    # --- ASGI -------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if scope["type"] == "http" and scope["path"] == self.options.path and not scope.get("root_path"):
            # The endpoint's own path goes straight in; Starlette's router, imported and built only when first
            # needed, answers every other path as the SDK's Starlette app does (404, the trailing-slash redirect).
            # Loading the plugin and each request skip it (issue 11).
            await self._endpoint(scope, receive, send)
            return
        if self.auth is not None and scope["type"] == "http" and self.auth.owns(scope["path"]):
            await self._endpoint(scope, receive, send)  # journaled beside the MCP exchanges
            return
        if self._router is None:
            self._router = self._build_router(self.options.path)
        await self._router(scope, receive, send)

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        journal = self.journal
        seq = journal.next_seq()
        request = RequestContext(scope, receive, send, seq=seq, started=self.now())
        journal.begin(seq, request.snapshot, started=request.started)
        self.requests.add(request)
        in_flight = self.in_flight = self.in_flight + 1
        if in_flight > self.max_in_flight:
            self.max_in_flight = in_flight
        try:
            await self._serve(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: answer 500, re-raise at teardown
            self.record_error(f"{request.http_method} {request.path} (exchange #{seq})", exc)
            if not request.response_started:
                with contextlib.suppress(Exception):
                    await request.respond(500, b"Internal Server Error", content_type="text/plain; charset=utf-8")
        finally:
            self.in_flight -= 1
            now = self.now()
            if not request.close_at_once(now):
                await request.close(now)
                now = self.now()  # after the wait; else nothing ran since the read above (one clock read fewer)
            if request.session is not None and request.session.live:
                request.session.last_activity = now
            journal.file(seq, request.started, *request.record())
            self.requests.discard(request)

    async def _serve(self, request: RequestContext) -> None:
        options = self.options
        try:
            await request.read_body(options.body_limit)
        except BodyTooLarge:
            if self.auth is not None and request.path == options.path:  # the SDK's auth middleware runs first
                await self.auth.answer(request)  # 401/403 without a good token (measured); else nothing sent
            if not request.response_started:
                await request.respond(413, b"Request body too large")
            return
        flavour = options.server_flavour
        if request.http_method == "POST":
            request.message = parse_message(request.body, flavour)
        request.watch_disconnect()
        self._bind_session(request)
        served = self.served_era
        era = era_of(flavour, served, request.headers.get(VERSION_HEADER))
        # The era that will answer, as faults match it: a handshake-only server answers every request itself.
        # Each era's value without the enum's ``value`` property or its hash (both run Python code; issue 11).
        request.era = "handshake" if served == "handshake" or era is Era.HANDSHAKE else "modern"
        if self.auth is not None and request.path != options.path:
            request.era = None  # the authorization server's: no protocol era answers it, a fault's answer neither
        hooks = self.hooks
        faulted = type(hooks) is not _NoHooks
        if faulted:
            await hooks.before(request)
        if self.auth is not None and not request.response_started:
            await self.auth.answer(request)  # an auth endpoint, or the endpoint's 401/403 (else nothing sent)
        if not request.response_started:
            if faulted:
                era = self.era_of(request)  # again: a fault may have switched the served era
                request.era = "handshake" if era is Era.HANDSHAKE else "modern"
            if era is Era.HANDSHAKE:
                await self._serve_handshake(request)
            elif self.served_era != "handshake":
                await self.modern.serve(request)
            else:  # a handshake-only server answers it, as a handshake request
                request.era = Era.HANDSHAKE.value
                if not await answer_unserved_modern(request, self.options):
                    await self._refuse_sessionless(request)
        if type(self.hooks) is not _NoHooks:  # read again: a reset may have put in another script meanwhile
            await self.hooks.after(request)

    def _bind_session(self, request: RequestContext) -> None:
        """Attach the session the request names, so faults can match on it (no answer yet)."""
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            # Only the named session: a sweep of every session per request would be O(sessions).
            request.session = self.sessions.get(session_id)
            if request.session is not None:
                request.session.expire_if_idle(self.now(), self.options.idle_limit)
                request.session.requests.append(request.seq)

    async def _refuse_sessionless(self, request: RequestContext) -> None:
        """A well-formed request of the unserved era: refused as a handshake request without a session id."""
        request.new_session = self.sessions.mint(now=self.now(), seq=request.seq)
        request.session = request.new_session
        await self.error(request, 400, INVALID_REQUEST, "Bad Request: Missing session ID")

    def era_of(self, request: RequestContext) -> Era:
        """The era ``request`` is routed to: by its ``MCP-Protocol-Version`` header, as the served eras allow."""
        return era_of(self.options.server_flavour, self.served_era, request.protocol_version)

    # --- handshake era ----------------------------------------------------------------------

    async def _serve_handshake(self, request: RequestContext) -> None:
        refusal = security_refusal(request, self.options)
        if refusal is not None:
            await request.respond(*refusal)
            return
        session = request.session
        # A request naming a live session has nothing to resolve: it skips the coroutine (issue 11).
        live = session is not None and session.end_reason is None and request.session_id is not None
        if not live and not await self._resolve_session(request):
            return
        method = request.http_method
        if method == "POST":
            await self._serve_post(request)
        elif method == "GET":
            await self._serve_get(request)
        elif method == "DELETE":
            await self._serve_delete(request)
        else:
            await self.error(
                request, 405, INVALID_REQUEST, "Method Not Allowed", extra=[("allow", "GET, POST, DELETE")]
            )

    async def _resolve_session(self, request: RequestContext) -> bool:
        """Find the request's session, or mint one (the SDK does so for any session-less request)."""
        flavour = self.options.server_flavour
        if request.session_id is None:
            # Idle sessions do not count against the cap (the SDK expires them on a timer).
            self.sessions.expire_idle(self.now(), self.options.idle_limit)
            if len(self.sessions.live()) >= self.options.max_sessions:
                await self.error(request, 503, INTERNAL_ERROR, "Too many open sessions", with_session=False)
                return False
            request.new_session = self.sessions.mint(now=self.now(), seq=request.seq)
            request.session = request.new_session
            request.new_session.requests.append(request.seq)
            return True
        session = request.session
        if session is None or (
            not session.live and not (flavour is Flavour.MCP1 and session.end_reason is EndReason.DELETE)
        ):
            await self.error(request, 404, INVALID_REQUEST, "Session not found", with_session=False)
            return False
        if not session.live:
            await self.error(request, 404, INVALID_REQUEST, "Not Found: Session has been terminated")
            return False
        return True

    def _session_headers(self, request: RequestContext) -> list[tuple[str, str]]:
        session = request.session
        return [(SESSION_HEADER, session.id)] if session is not None else []

    async def error(
        self,
        request: RequestContext,
        status: int,
        code: int,
        message: str,
        *,
        with_session: bool = True,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        headers = self._session_headers(request) if with_session else []
        self._keep_new_session(request, status)
        body = error_body(self.options.server_flavour, code, message)
        await request.respond_json(status, body, headers=[*headers, *(extra or [])])

    def _keep_new_session(self, request: RequestContext, status: int) -> None:
        """2.x keeps a minted session only if its opening request succeeded; 1.x always keeps it."""
        new = request.new_session
        if new is None:
            return
        if status < 400 or self.options.server_flavour is Flavour.MCP1:
            self.sessions.add(new)
        else:
            request.session = None

    async def _serve_post(self, request: RequestContext) -> None:
        options = self.options
        flavour = options.server_flavour
        if options.json_response:
            if not accepts(request, flavour, json=True, sse=False):
                await self.error(request, 406, INVALID_REQUEST, "Not Acceptable: Client must accept application/json")
                return
        elif not accepts(request, flavour, json=True, sse=True):
            await self.error(
                request,
                406,
                INVALID_REQUEST,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
            return
        if not content_type_is_json(request):
            await self.error(
                request, 415, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
            )
            return
        message = request.message
        if isinstance(message, ParseFailure) or message is None:
            failure = message or ParseFailure(code=INVALID_PARAMS, message="Validation error: empty body")
            await self.error(request, 400, failure.code, failure.message)
            return
        session = _require(request.session)
        if message.method != "initialize":
            if request.new_session is not None:
                await self.error(request, 400, INVALID_REQUEST, "Bad Request: Missing session ID")
                return
            # _version_ok's check, without its coroutine for a version that passes (issue 11)
            if flavour is Flavour.MCP1 and not await self._version_ok(request):
                return
        if not message.is_request:
            if message.method == "notifications/initialized":
                session.initialized = True
            self._keep_new_session(request, 202)
            await request.respond(202, b"", content_type="application/json", headers=self._session_headers(request))
            if message.is_response:  # the client's answer to a handler's ctx.request(): wake that handler
                self.handlers.server_requests.deliver(session.id, message.raw)
            return
        if request.new_session is not None:
            self._keep_new_session(request, 200)
        await self._answer_request(request, message, session)

    async def _version_ok(self, request: RequestContext) -> bool:
        """1.x checks the version header after the session (POST, GET, DELETE); 2.x routes it by era instead."""
        refusal = unsupported_version(request, self.options.server_flavour)
        if refusal is not None:
            await self.error(request, 400, INVALID_REQUEST, refusal)
            return False
        return True

    async def _answer_request(self, request: RequestContext, message: Incoming, session: Session) -> None:
        """Run the method and send its answer as JSON, or as SSE with notifications before it."""
        json_response = self.options.json_response
        stream = None if json_response else EventStream()
        meta = message.params.get("_meta")
        ctx = Context(
            session_id=session.id,
            state=session.state,
            request_id=message.id,
            progress_token=meta.get("progressToken") if isinstance(meta, dict) else None,
            emit=_dropped if stream is None else stream.emit,  # a JSON answer has no stream: the SDK drops them
            log_level=session.log_level,
            seq=request.seq,
        )
        if stream is None:
            response = await self._run_method(request, message, session, ctx)
            await request.respond_json(200, response, headers=self._session_headers(request))
            return
        headers = [*_SSE_HEADERS, *self._session_headers(request), ("x-accel-buffering", "no")]
        if self.event_store is not None:
            request.events = self.event_store.open(request)
        loop = asyncio.get_running_loop()
        task: asyncio.Future[JSONObject]
        # The method's first step runs before the headers go out: one answered at once (most are) goes out whole,
        # headers, event and end in one write; any other gets its headers then, and its events as they come.
        if request.over_listener:
            # Over a socket, its first step runs here, on the request's task: no task and no loop turn for a method
            # answered at once (a fifth of the fake's own work per SSE call; issue 11). A handler's awaitable still
            # runs in a task of its own; if the method waits, the rest of it goes on in a task, as below.
            ctx._own_task = True
            method = self._run_method(request, message, session, ctx)
            try:
                waiting = method.send(None)
            except StopIteration as answered:
                if not stream.pending:
                    await request.respond_sse(200, headers, answered.value)
                    return
                task = loop.create_future()
                task.set_result(answered.value)
            else:
                task = loop.create_task(_resumed(method, waiting))
        else:
            # In-process, the method gets a task of its own and one loop turn: the race engine schedules both.
            task = loop.create_task(self._run_method(request, message, session, ctx))
            await stream.first_turn()
            if task.done() and not stream.pending:
                await request.respond_sse(200, headers, task.result())
                return
        try:
            await request.start(200, headers, "sse")
            await request.send_event(await stream.pump(request, task, self.options.sse_ping_interval), last=True)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _run_method(
        self, request: RequestContext, message: Incoming, session: Session, ctx: Context
    ) -> JSONObject:
        try:
            if message.method == "initialize":
                return result_response(message.id, self._shared(self.handlers.initialize(message, session)))
            result = await self.handlers.answer(message, session, ctx)
            return result_response(message.id, result)
        except JSONRPCError as exc:
            return error_response(message.id, exc.code, exc.message, exc.data)
        except Exception as exc:
            what = " ".join(filter(None, [message.method, message.target]))
            self.record_error(f"handler of {what} (exchange #{request.seq})", exc)
            return error_response(message.id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}")

    def _shared(self, result: JSONObject) -> JSONObject:
        """One copy of each distinct ``initialize`` result: the journal keeps every session's answer, and they
        are all alike (issue 11: memory per idle session)."""
        key = dumps(result)
        shared = self._initialize_results.get(key)
        if shared is None:
            if len(self._initialize_results) >= _SHARED_LIMIT:
                self._initialize_results.clear()
            shared = self._initialize_results[key] = result
        return shared

    async def _serve_get(self, request: RequestContext) -> None:
        if not accepts(request, self.options.server_flavour, json=False, sse=True):
            await self.error(request, 406, INVALID_REQUEST, "Not Acceptable: Client must accept text/event-stream")
            return
        if request.new_session is not None:
            await self.error(request, 400, INVALID_REQUEST, "Bad Request: Missing session ID")
            return
        if not await self._version_ok(request):
            return
        session = _require(request.session)
        last_event_id = first_header(request, "last-event-id")
        if last_event_id and self.event_store is not None:  # a resume: the replay (_fake/_events.py)
            headers = [*_SSE_HEADERS, *self._session_headers(request), ("x-accel-buffering", "no")]
            standalone = self.standalone.find(last_event_id)
            if standalone is not None:  # an event of a session's GET stream (_fake/_standalone.py)
                await self.standalone.resume(request, session, standalone, headers)
                return
            until = [session.ended_event, self._closing]
            await self.event_store.replay(
                request,
                last_event_id,
                headers,
                until=until,
                ping_interval=self.options.sse_ping_interval,
                delivered=self.handlers.ledger.redelivered,
            )
            return
        if last_event_id:
            await request.respond(500, b"Internal Server Error", content_type="text/plain; charset=utf-8")
            return
        if session.get_stream_open:
            await self.error(request, 409, INVALID_REQUEST, "Conflict: Only one SSE stream is allowed per session")
            return
        session.get_stream_open = True
        try:
            await request.start(
                200,
                [*_SSE_HEADERS, *self._session_headers(request), ("x-accel-buffering", "no")],  # as a POST's stream
                "sse",
            )
            if self.event_store is not None:  # one stored stream per session; no priming event (_fake/_standalone.py)
                await self.standalone.carry(request, session, self.event_store)
                return
            with self.announcer.stream(session.id) as outbox:
                await self.hold_stream(request, session.ended_event, outbox)
        finally:
            session.get_stream_open = False

    async def hold_stream(self, request: RequestContext, until: asyncio.Event, outbox: Outbox | None = None) -> None:
        """Keep an SSE stream open with pings until ``until`` is set, the client leaves, or we close; send what
        ``outbox`` gets meanwhile (a GET stream's list_changed notifications)."""
        waiters = [until.wait(), request.disconnected.wait(), self._closing.wait()]
        tasks = [asyncio.ensure_future(w) for w in waiters]
        mail: asyncio.Future[Any] | None = None
        try:
            while True:
                if outbox is not None and mail is None:
                    mail = asyncio.ensure_future(outbox.ready.wait())
                done, _ = await asyncio.wait(
                    tasks if mail is None else [*tasks, mail],
                    timeout=self.options.sse_ping_interval,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if outbox is not None and mail is not None and mail in done:
                    done.discard(mail)
                    mail = None
                    for message in outbox.drain():
                        await request.send_event(message)
                    if not done:
                        continue
                if done:
                    break
                await request.send_ping()
        finally:
            for task in tasks:
                task.cancel()
            if mail is not None:
                mail.cancel()
        transport = request.transport
        if self._closing.is_set() and request.outcome is Outcome.IN_FLIGHT and transport is not None:
            # Stopping (fake-mcp serve on SIGTERM): a real SDK server stopping closes the connection under the stream.
            request.outcome = Outcome.CUT
            transport.close()
            for _ in range(2):  # let uvicorn see the connection gone before the app returns (else it logs an error)
                await asyncio.sleep(0)
        # Ended by closing its connection (restart(), a cut, a stop): no final chunk, as when a real server restarts;
        # in process the client then sees the body end early, as it would over a socket.
        if not request.disconnected.is_set() and request.outcome is Outcome.IN_FLIGHT:
            await request.finish()

    async def _serve_delete(self, request: RequestContext) -> None:
        if request.new_session is not None:
            await self.error(request, 400, INVALID_REQUEST, "Bad Request: Missing session ID")
            return
        if not await self._version_ok(request):
            return
        session = _require(request.session)
        await request.respond(200, b"", content_type="application/json", headers=self._session_headers(request))
        session.end(EndReason.DELETE, self.now())


async def _resumed(method: Coroutine[Any, Any, JSONObject], waiting: Any) -> JSONObject:
    """The rest of a coroutine whose first step ran elsewhere (it yielded ``waiting``), as a coroutine a task runs.

    Only our own frames are left in it (a handler's awaitable has a task of its own), so moving it between
    tasks moves nothing bound to one. A real coroutine, not a generator-based one: ``create_task`` refuses
    those from Python 3.12 on.
    """
    return await _Rest(method, waiting)


class _Rest:
    """An awaitable whose ``__await__`` drives the rest of ``method`` from where its first step stopped."""

    __slots__ = ("method", "waiting")

    def __init__(self, method: Coroutine[Any, Any, JSONObject], waiting: Any) -> None:
        self.method = method
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, JSONObject]:
        method, waiting = self.method, self.waiting
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                method.close()
                raise
            except BaseException as exc:  # a cancellation, or an error the awaited future delivers
                try:
                    waiting = method.throw(exc)
                except StopIteration as done:
                    return cast("JSONObject", done.value)
                continue
            try:
                waiting = method.send(sent)
            except StopIteration as done:
                return cast("JSONObject", done.value)


_OURS = __file__.rsplit("_fake", 1)[0]
_STDLIB = sysconfig.get_paths()["stdlib"]
_INSTALLED = (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])


def user_frames(error: BaseException, *, indent: str = "    ") -> str:
    """The frames of ``error``'s traceback from the first one in the test's code on (issue 25).

    The fake catches a handler's exception far from the test; its own frames and the loop's say nothing
    to the reader, the handler's line does. With no frame outside the package (a bug of ours), the last
    few frames. Each line is indented by ``indent``.
    """
    frames = traceback.extract_tb(error.__traceback__)
    first = next((i for i, f in enumerate(frames) if not _internal(f.filename)), None)
    shown = frames[first:] if first is not None else frames[-3:]
    text = "".join(traceback.format_list(shown)).rstrip("\n")
    return "\n".join(indent + line for line in text.splitlines())


def _internal(filename: str) -> bool:
    return filename.startswith(_OURS) or (filename.startswith(_STDLIB) and not filename.startswith(_INSTALLED))


def _dropped(message: JSONObject) -> None:
    """What a method emits while answering in JSON mode: nothing carries it."""


def _echo(text: str) -> str:
    """Echo the text back."""
    return text


class _ASGIEndpoint:
    def __init__(self, handle: ASGIHandler) -> None:
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send)


def _event_store(options: FakeMCPOptions) -> EventStore | None:
    return EventStore(options.retry_interval) if options.event_store else None


def _require(session: Session | None) -> Session:
    if session is None:  # pragma: no cover - _resolve_session guarantees one
        raise RuntimeError("request has no session after session resolution")
    return session


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
