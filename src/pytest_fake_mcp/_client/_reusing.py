"""The reference reusing session client: one HTTP client, one MCP session at a time, a new session on 404.

Over 400 lines on purpose: the SDK compatibility layer, the per-session owner task and the
retry loop only make sense together.

How it works:

* Every MCP session has one *owner task* (``_Session.task``). It enters ``streamable_http_client``
  and ``ClientSession``, sends ``initialize``, signals ``settled``, waits for ``stop``, then exits
  both contexts itself, so no cancel scope is ever exited from another task (docs/failure-modes.md#t01).
* Sessions are opened with ``terminate_on_close=False``; the owner sends the DELETE itself, and
  only for a session that was not lost: a DELETE with a dead id would send the stale id again
  (harmless, but avoidable: docs/failure-modes.md#harmless-delete).
* Loss is decided from the wire, not from the exception text: a response hook on the HTTP client
  sees every response; a ``contextvars`` variable tells it which session the request belongs to
  (1.x sends POSTs from the owner's context, 2.x from the caller's, so both set it).
  A call whose MCP error matches a 404 seen on a request that carried the session's id is a
  session loss; anything else (tool errors, 5xx, cut streams, timeouts) goes to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import anyio

from .._wire._errors import FakeMCPError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType
    from typing import Self

__all__ = [
    "ReusingSessionClient",
    "SessionClosedError",
    "SessionLostError",
    "SessionOpenError",
]

_log = logging.getLogger("pytest_fake_mcp.client")
_T = TypeVar("_T")

_SESSION_HEADER: Final = "mcp-session-id"
_VERSION_HEADER: Final = "mcp-protocol-version"
_NO_BODY_MESSAGE: Final = "Session terminated"


class SessionLostError(FakeMCPError, ConnectionError):
    """The server kept answering 404 for new sessions: the call gave up after ``attempts`` tries."""

    def __init__(self, url: str, attempts: int, session_ids: tuple[str | None, ...]) -> None:
        self.url = url
        self.attempts = attempts
        self.session_ids = session_ids
        super().__init__(
            f"MCP session at {url} was lost {attempts} times in a row (sessions {list(session_ids)!r} each "
            f"answered 404); giving up. Check that the server keeps sessions (no restart loop, no "
            f"round-robin without affinity), or raise max_attempts={attempts} if losses are expected."
        )


class SessionClosedError(FakeMCPError, ConnectionError):
    """The session ended under a call for a reason other than a 404; the call was not retried."""

    def __init__(self, url: str, generation: int, cause: BaseException | None) -> None:
        self.url = url
        self.generation = generation
        self.cause = cause
        super().__init__(
            f"MCP session #{generation} at {url} ended while the call was in flight ({cause!r}); "
            f"the call was not retried because it may have run. The next call opens a new session."
        )


class SessionOpenError(FakeMCPError, ConnectionError):
    """Opening a session (transport + ``initialize``) failed; the next call tries again."""

    def __init__(self, url: str, cause: BaseException | None) -> None:
        self.url = url
        self.cause = cause
        super().__init__(
            f"Could not open an MCP session at {url}: {cause!r}. Check the URL (the endpoint is "
            f"usually /mcp) and that the server is up; the next call tries again."
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sdk:
    """The names that differ between mcp 1.x and 2.x."""

    line: int
    http_module: str
    streamable_http_client: Any
    client_session: Any
    error_type: type[Exception]
    create_http_client: Any
    client: Any
    """mcp 2.x ``Client`` (era negotiation); None under 1.x."""


_SDK: _Sdk | None = None


def _sdk() -> _Sdk:
    """Import the installed SDK line once, lazily (the plugin must not import mcp at startup)."""
    global _SDK
    if _SDK is None:
        import mcp
        from mcp.client.streamable_http import streamable_http_client

        from .._compat import mcp_http_client_factory

        error_type: type[Exception] | None = getattr(mcp, "MCPError", None)
        line = 2
        if error_type is None:
            error_type, line = getattr(mcp, "McpError"), 1  # noqa: B009 - absent from 2.x stubs
        _SDK = _Sdk(
            line=line,
            http_module="httpx2" if line == 2 else "httpx",
            streamable_http_client=streamable_http_client,
            client_session=mcp.ClientSession,
            error_type=error_type,
            create_http_client=mcp_http_client_factory("httpx2" if line == 2 else "httpx"),
            client=getattr(mcp, "Client", None) if line == 2 else None,
        )
    return _SDK


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The first non-cancellation leaf of an exception group (2.x wraps session errors in groups)."""
    while isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (leaves or list(exc.exceptions))[0]
    return exc


class _Session:
    """One MCP session and the bookkeeping its owner task and the response hook share."""

    def __init__(self, owner: ReusingSessionClient, generation: int) -> None:
        self.owner = owner
        self.generation = generation
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.mcp: Any = None  # the ClientSession, set once initialize succeeded
        self.error: BaseException | None = None
        self.opened = False
        self.lost = False
        self.retiring = False  # lost: stop once the calls still in flight on it have settled
        self.inflight = 0
        self.loss_signatures: set[tuple[int, str]] = set()
        self.listed_tools: set[str] = set()
        self.tools_changed = False  # the server said notifications/tools/list_changed: list again before a call
        self.listing: asyncio.Task[Any] | None = None  # single-flight tools/list before first calls
        self.settled = asyncio.Event()
        self.confirmed = asyncio.Event()  # a POST on this session id got a 2xx (initialized was received)
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        return self.task is not None and self.task.done()


_CURRENT: contextvars.ContextVar[_Session | None] = contextvars.ContextVar(
    "pytest_fake_mcp_current_session", default=None
)


class _State(enum.Enum):
    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


class ReusingSessionClient:
    """An MCP client that reuses one HTTP client and one session, and opens a new session on 404.

    The HTTP client is made lazily once (or is the one passed in, which is never closed here).
    The session opens on first use; concurrent first calls share one ``initialize``. When the
    server answers 404 for the session, a new transport and ``ClientSession`` are opened on the
    same HTTP client (once per loss, however many calls saw it) and the failed call is retried;
    after ``max_attempts`` lost sessions in one call it raises `SessionLostError`. Nothing else
    is retried: a tool error, a 5xx or a cut stream goes to the caller. asyncio only.

    Args:
        url: The streamable-HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        http_client: An ``httpx2.AsyncClient`` (mcp 2.x) or ``httpx.AsyncClient`` (mcp 1.x) to use.
        headers: Headers for the HTTP client this object makes; not allowed with ``http_client``.
        max_attempts: Tries per call while sessions keep getting lost (each retry opens one session).
        open_timeout: Seconds allowed for one ``initialize`` handshake.
        close_timeout: Seconds allowed for one DELETE and for ``aclose`` to wait for each session.
        read_timeout: Seconds to wait for each MCP response (``None``: wait forever, the SDK default).
        mode: ``"legacy"`` (default): always the handshake era (``initialize``, a session). ``"auto"``: probe with
            ``server/discover`` and run statelessly in the 2026-07-28 era when the server speaks it, else fall
            back to the handshake (mcp 2.x's ``Client(mode="auto")``; under mcp 1.x, whose client knows only the
            handshake, ``"auto"`` is the handshake). In the modern era there is no session to lose: each call is
            one request, and only the HTTP client and the era are reused.

    Raises:
        SessionLostError: from a call, when ``max_attempts`` sessions in a row answered 404.
        SessionClosedError: from a call, when its session died for another reason under it.
        SessionOpenError: from a call, when ``initialize`` failed.

    Example::

        async with ReusingSessionClient("http://127.0.0.1:8000/mcp") as client:
            result = await client.call_tool("echo", {"text": "hi"})
            assert client.initialize_count == 1
    """

    _sdk_deletes: ClassVar[bool] = False
    """Let the SDK transport send the DELETE on close (``terminate_on_close=True``), dead sessions included."""

    def __init__(
        self,
        url: str,
        *,
        http_client: Any = None,
        headers: dict[str, str] | None = None,
        max_attempts: int = 3,
        open_timeout: float = 30.0,
        close_timeout: float = 5.0,
        read_timeout: float | None = None,
        mode: str = "legacy",
    ) -> None:
        if mode not in ("legacy", "auto"):
            raise ValueError(f"mode={mode!r} must be 'legacy' (the handshake era) or 'auto' (probe, then either era)")
        if max_attempts < 1:
            raise ValueError(f"max_attempts={max_attempts!r} must be >= 1; use 1 to never retry after a 404")
        if http_client is not None and headers is not None:
            raise ValueError(
                "headers= only applies to the HTTP client ReusingSessionClient makes; "
                "set them on your own client instead: AsyncClient(headers=...)"
            )
        self._url = url
        self._own_http = http_client is None
        self._http: Any = http_client
        self._headers = headers
        self._max_attempts = max_attempts
        self._open_timeout = open_timeout
        self._close_timeout = close_timeout
        self._read_timeout = read_timeout
        self._mode = mode
        self._state = _State.OPEN
        self._current: _Session | None = None
        self._sessions: set[_Session] = set()
        self._generation = 0
        self._session_ids: list[str] = []
        self._deleted: list[str] = []
        self._closing: asyncio.Future[None] | None = None
        self._tool_list_changes = 0
        self._heard: asyncio.Event | None = None  # made by a waiter, on its loop

    def __repr__(self) -> str:
        return (
            f"ReusingSessionClient(url={self._url!r}, generation={self._generation}, "
            f"session_id={self.session_id!r}, state={self._state.value})"
        )

    # -- read-only figures -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self._url

    @property
    def session_id(self) -> str | None:
        """The id of the current session, or ``None`` before the first one is open."""
        return self._current.session_id if self._current is not None else None

    @property
    def tool_list_changes(self) -> int:
        """How many ``notifications/tools/list_changed`` the client heard, on all its sessions."""
        return self._tool_list_changes

    async def wait_for_tool_list_change(self, count: int = 1, *, within: float = 10.0) -> None:
        """Wait until the client has heard ``count`` ``notifications/tools/list_changed`` in all.

        The client hears them on its session's GET stream, beside its calls: a test that changes the tools and
        calls at once races the notification. Wait for it first (docs/changing-tools.md).

        Raises:
            AssertionError: if fewer were heard after ``within`` seconds (is the change announced? mark the test
                ``@pytest.mark.fake_mcp_server(list_changed=True)``). ValueError: if ``count < 1``.

        Example::

            fake_mcp_server.remove_tool("legacy")
            await client.wait_for_tool_list_change()
            await client.call_tool("search", {"query": "mcp"})  # lists again first
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count={count!r} must be an int >= 1 (how many notifications in all)")
        try:
            async with asyncio.timeout(within):
                while self._tool_list_changes < count:
                    self._heard = asyncio.Event()
                    await self._heard.wait()
        except TimeoutError:
            raise AssertionError(
                f"{self!r} heard {self._tool_list_changes} of {count} notifications/tools/list_changed within "
                f"{within}s: is the change announced (@pytest.mark.fake_mcp_server(list_changed=True)), and was the "
                "session's GET stream open when it was made (fake_mcp_server.wait_for_get_streams())?"
            ) from None

    def _heard_tool_list_change(self) -> None:
        self._tool_list_changes += 1
        if self._heard is not None:
            self._heard.set()

    @property
    def generation(self) -> int:
        """The number of the current session: 0 before the first, 1 for the first, +1 per reopen."""
        return self._generation

    @property
    def initialize_count(self) -> int:
        """How many sessions this client started (each sends exactly one ``initialize``)."""
        return self._generation

    @property
    def session_ids(self) -> tuple[str, ...]:
        """Every session id the server gave this client, oldest first."""
        return tuple(self._session_ids)

    @property
    def deleted_session_ids(self) -> tuple[str, ...]:
        """The session ids this client terminated with DELETE."""
        return tuple(self._deleted)

    @property
    def http_client(self) -> Any:
        """The HTTP client in use, or ``None`` before the first call made one."""
        return self._http

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    # -- public API ------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the session now instead of on the first call (single-flight like every other call)."""
        await self._session()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Call a tool; return the SDK's ``CallToolResult`` (an ``isError`` result is returned, not raised).

        Before the first call of a tool on a session the tool list is fetched, so the SDK's
        output-schema check never sends its hidden ``tools/list`` *after* the tool ran; a 404
        on that hidden request would make a retry run the tool twice.
        """

        async def op(session: _Session) -> Any:
            if name not in session.listed_tools or session.tools_changed:
                await self._ensure_listed(session)
            return await session.mcp.call_tool(name, arguments)

        return await self._run(op)

    async def list_tools(self) -> Any:
        """Return the SDK's ``ListToolsResult`` (first page)."""
        return await self._run(self._list_on)

    async def aclose(self) -> None:
        """Stop every session (DELETE for live ones), close the HTTP client if made here; idempotent.

        Safe from any task; a handshake in flight is let finish (bounded by ``open_timeout``) so
        the server is left with no session. Each session task gets ``close_timeout`` seconds.
        """
        if self._closing is None:
            self._state = _State.CLOSING
            self._closing = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._closing)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- sessions --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise RuntimeError(f"Cannot use {self!r}: it is {self._state.value}; create a new ReusingSessionClient")

    def _http_client(self) -> Any:
        sdk = _sdk()
        if self._http is None:
            self._http = sdk.create_http_client(headers=self._headers)
        root = type(self._http).__module__.partition(".")[0]
        if root != sdk.http_module:
            raise TypeError(
                f"http_client is a {type(self._http).__module__}.{type(self._http).__name__} but the "
                f"installed mcp {sdk.line}.x needs {sdk.http_module}.AsyncClient; pass one of those"
            )
        hooks: list[Any] = self._http.event_hooks["response"]
        if self._on_response not in hooks:
            hooks.append(self._on_response)
        return self._http

    def _start(self) -> _Session:
        """Start a new session's owner task; synchronous, so concurrent callers cannot both start one."""
        self._check_open()
        http = self._http_client()
        self._generation += 1
        session = _Session(self, self._generation)
        context = contextvars.copy_context()
        context.run(_CURRENT.set, session)
        session.task = asyncio.get_running_loop().create_task(
            self._own(session, http), name=f"mcp-session-{self._generation}", context=context
        )
        session.task.add_done_callback(lambda _task: self._sessions.discard(session))
        self._sessions.add(session)
        self._current = session
        return session

    async def _session(self) -> _Session:
        """The current usable session, opening one (single-flight) if there is none."""
        lost: list[str | None] = []
        for _ in range(self._max_attempts + 8):
            self._check_open()
            session = self._current
            if session is None or session.ended or session.retiring or session.stop.is_set():
                session = self._start()
            await session.settled.wait()
            self._check_open()
            if session.mcp is not None and not session.retiring:
                return session
            if not session.opened:
                if self._current is session:
                    self._current = None
                cause = _leaf(session.error)
                raise SessionOpenError(self._url, cause) from cause
            if session.lost and session.session_id not in lost:
                # The server forgot it before any call used it (404 to notifications/initialized).
                lost.append(session.session_id)
                if len(lost) >= self._max_attempts:
                    raise SessionLostError(self._url, len(lost), tuple(lost))
            # opened, then lost or died before this caller woke up: take the next one
        raise SessionClosedError(self._url, self._generation, None)

    async def _own(self, session: _Session, http: Any) -> None:
        """Owner task: enter, initialize, wait for stop, exit; the only task touching these contexts."""
        sdk = _sdk()
        kwargs: dict[str, Any] = {}
        if self._read_timeout is not None:
            timeout = self._read_timeout
            kwargs["read_timeout_seconds"] = timeout if sdk.line == 2 else timedelta(seconds=timeout)
        kwargs["message_handler"] = _tools_changed_handler(session)
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = sdk.streamable_http_client(
                    self._url, http_client=http, terminate_on_close=self._sdk_deletes
                )
                if self._mode == "auto" and sdk.client is not None:
                    # 2.x negotiates the era itself: one probe, then modern or an initialize.
                    async with asyncio.timeout(self._open_timeout):
                        mcp_session = await stack.enter_async_context(sdk.client(transport, mode="auto", **kwargs))
                    version = mcp_session.protocol_version
                else:
                    streams = await stack.enter_async_context(transport)
                    mcp_session = await stack.enter_async_context(sdk.client_session(streams[0], streams[1], **kwargs))
                    async with asyncio.timeout(self._open_timeout):
                        result = await mcp_session.initialize()
                    version = getattr(result, "protocol_version", None) or getattr(result, "protocolVersion", None)
                session.protocol_version = None if version is None else str(version)
                session.mcp = mcp_session
                session.opened = True
                if session.session_id is None:  # the stateless era: nothing to confirm, nothing to lose
                    session.confirmed.set()
                # Usable once the server answered `notifications/initialized` with the id: a session it
                # forgot already is found out here, before any call sends the dead id. Waiting also keeps
                # a DELETE from overtaking that notification (the 2.x SDK sends it without waiting).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._open_timeout):
                        await _first_set(session.confirmed, session.stop)
                session.settled.set()
                await session.stop.wait()
        except BaseException as exc:
            session.error = exc
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            session.mcp = None
            session.settled.set()
            if session.session_id is not None and not session.lost and not self._sdk_deletes:
                await self._terminate(session, http)

    async def _terminate(self, session: _Session, http: Any) -> None:
        """DELETE a live session, bounded; failures are logged, as the SDK does."""
        assert session.session_id is not None  # checked by the caller; narrows the type
        headers = {_SESSION_HEADER: session.session_id}
        if session.protocol_version is not None:
            headers[_VERSION_HEADER] = session.protocol_version
        try:
            async with asyncio.timeout(self._close_timeout):
                response = await http.delete(self._url, headers=headers)
        except Exception as exc:
            _log.warning("DELETE of MCP session %s at %s failed: %r", session.session_id, self._url, exc)
            return
        if response.status_code in (200, 202, 204, 404, 405):
            self._deleted.append(session.session_id)
        else:
            _log.warning("DELETE of MCP session %s answered %s", session.session_id, response.status_code)

    async def _on_response(self, response: Any) -> None:
        """HTTP response hook: learn the session id, and notice 404s for a session's id."""
        session = _CURRENT.get()
        if session is None or session.owner is not self:
            return
        request = response.request
        if request.method == "DELETE":
            return
        sent = request.headers.get(_SESSION_HEADER)
        if sent is None and session.session_id is None and 200 <= response.status_code < 300:
            new_id = response.headers.get(_SESSION_HEADER)
            if new_id:
                session.session_id = new_id
                self._session_ids.append(new_id)
        elif response.status_code == 404 and sent is not None and sent == session.session_id:
            session.lost = True
            self._retire(session)  # also stops the SDK's GET stream from resending the dead id
            await self._note_loss_shape(session, response)
        elif sent is not None and sent == session.session_id:
            session.confirmed.set()  # the server answered with the id known (any status but 404)

    async def _note_loss_shape(self, session: _Session, response: Any) -> None:
        """Record the (code, message) the SDK will raise for this 404 (it differs per SDK line and shape)."""
        if _sdk().line == 1:
            session.loss_signatures.add((32600, _NO_BODY_MESSAGE))
            return
        session.loss_signatures.add((-32600, _NO_BODY_MESSAGE))
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return
        try:
            body = json.loads(await response.aread())
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), int):
                session.loss_signatures.add((error["code"], str(error.get("message", ""))))
        except Exception:  # a 404 body that is not JSON-RPC: the SDK then uses the no-body shape
            return

    def _is_loss(self, session: _Session, exc: Exception) -> bool:
        error = getattr(exc, "error", None)
        code, message = getattr(error, "code", None), getattr(error, "message", None)
        return session.lost and (code, message) in session.loss_signatures

    def _retire(self, session: _Session) -> None:
        """Retire a lost session: the next caller opens a new one only if this was current (R07, R08).

        The old session stops once its in-flight calls have settled: stopping it earlier would fail
        them with "connection closed" instead of their own 404, and they could not be retried.
        """
        if self._current is session:
            self._current = None
        session.retiring = True
        if session.inflight == 0:
            session.stop.set()

    # -- calls -----------------------------------------------------------------------------------

    async def _list_on(self, session: _Session) -> Any:
        result = await session.mcp.list_tools()
        session.listed_tools.update(tool.name for tool in result.tools)
        return result

    async def _ensure_listed(self, session: _Session) -> None:
        """One shared tools/list per session for all first calls (runs in the caller's context); after the server
        said ``notifications/tools/list_changed`` on this session, a fresh one."""
        listing = session.listing
        if (
            listing is None
            or session.tools_changed
            or (listing.done() and (listing.cancelled() or listing.exception()))
        ):
            session.tools_changed = False
            listing = session.listing = asyncio.get_running_loop().create_task(self._list_on(session))
            listing.add_done_callback(_retrieve)
        await asyncio.shield(listing)

    async def _run(self, op: Callable[[_Session], Awaitable[_T]]) -> _T:
        error_type = _sdk().error_type
        lost_ids: list[str | None] = []
        last: Exception | None = None
        for _ in range(self._max_attempts):
            session = await self._session()
            try:
                return await self._guarded(session, op)
            except _KnownLost:
                lost_ids.append(session.session_id)  # lost while this call waited: the dead id is not sent
            except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                # The SDK's session ended without a word and refused the request before sending it: mcp 1.x
                # ends a session whose cancelled request's answer arrives in the step the cancel lands. Nothing
                # reached the server, so the call is retried on a new session.
                self._retire(session)
                last = exc
            except error_type as exc:
                if not self._is_loss(session, exc):
                    if _connection_closed(exc):
                        # The SDK closed this session's transport (a connection reset or cut mid-call; mcp 2.x
                        # keeps the closed session): the next call opens a new one. This one is not retried,
                        # the tool may have run; it fails as under mcp 1.x, whose session ends with it.
                        self._retire(session)
                        raise SessionClosedError(self._url, session.generation, exc) from exc
                    raise
                lost_ids.append(session.session_id)
                last = exc
                self._retire(session)
        if not lost_ids:  # every session this call tried had ended under it
            raise SessionClosedError(self._url, self._generation, last) from last
        raise SessionLostError(self._url, self._max_attempts, tuple(lost_ids)) from last

    async def _guarded(self, session: _Session, op: Callable[[_Session], Awaitable[_T]]) -> _T:
        """Run ``op`` in a task bound to the session; fail it if the session dies first.

        mcp 1.x leaves a request waiting forever when its session ends.
        """
        assert session.task is not None  # set by _start before the session is handed out
        if session.lost:
            raise _KnownLost
        context = contextvars.copy_context()
        context.run(_CURRENT.set, session)
        session.inflight += 1
        call = asyncio.get_running_loop().create_task(_as_coroutine(op, session), context=context)
        # A caller cancelled in the step its call failed leaves; the call's error is then nobody's to report.
        call.add_done_callback(_retrieve)
        try:
            await asyncio.wait({call, session.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            try:
                if not call.done():
                    call.cancel()
                    await asyncio.wait({call})  # a cancel of this caller meanwhile still reaches it
            finally:
                session.inflight -= 1
                if session.retiring and session.inflight == 0:
                    session.stop.set()
        if call.cancelled():
            raise SessionClosedError(self._url, session.generation, _leaf(session.error))
        return call.result()

    async def _shutdown(self) -> None:
        for session in list(self._sessions):
            session.stop.set()
        tasks = [s.task for s in self._sessions if s.task is not None]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self._open_timeout + 2 * self._close_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        self._current = None
        if self._http is not None:
            hooks: list[Any] = self._http.event_hooks["response"]
            if self._on_response in hooks:
                hooks.remove(self._on_response)
            if self._own_http:
                await self._http.aclose()
        self._state = _State.CLOSED


_CONNECTION_CLOSED = -32000
"""The JSON-RPC code both SDK lines raise for a request whose transport closed (``"Connection closed"``)."""


def _tools_changed_handler(session: _Session) -> Callable[[Any], Awaitable[None]]:
    """The SDK ``message_handler`` that marks ``session``'s tool list stale on ``notifications/tools/list_changed``
    (its GET stream): the next call lists again, so a replaced tool's new schema is known and a removed one is not
    called from memory."""

    async def handle(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            session.tools_changed = True
            session.owner._heard_tool_list_change()

    return handle


def _connection_closed(exc: Exception) -> bool:
    error = getattr(exc, "error", None)
    return getattr(error, "code", None) == _CONNECTION_CLOSED and getattr(error, "message", None) == "Connection closed"


class _KnownLost(Exception):
    """The session was found lost before this call sent anything on it."""


async def _first_set(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a shared task's exception as seen; its waiters re-raise it themselves."""
    if not task.cancelled():
        task.exception()


async def _as_coroutine(op: Callable[[_Session], Awaitable[_T]], session: _Session) -> _T:
    return await op(session)
