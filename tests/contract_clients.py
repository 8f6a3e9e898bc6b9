"""Deliberately broken MCP clients, one bug each, for tests/test_contract_mutants.py.

Each is the reference ``ReusingSessionClient`` with one behaviour changed (or a small wrapper over it),
so the contract suite (``pytest_fake_mcp.contract``) must fail exactly the scenario about that bug.
They speak to the fake through the installed SDK (mcp 1.x or 2.x), like any real client.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ssl
from typing import Any, ClassVar

from pytest_fake_mcp._client._reusing import ReusingSessionClient, SessionLostError, SessionOpenError, _sdk, _Session

__all__ = [
    "CLIENTS",
    "AbandonsSessionOnInterruptClient",
    "BlindRetryAfterCutClient",
    "BroadSessionLossClient",
    "CancelOpeningOnCloseClient",
    "CrossTaskCloseClient",
    "DefaultTransportClient",
    "DefaultTransportHTTPClientPerSessionClient",
    "HTTPClientPerCallClient",
    "HTTPClientPerSessionClient",
    "InvalidRequestAsLossClient",
    "LeakedHTTPClientClient",
    "LeftoverTaskClient",
    "LossOnIsErrorClient",
    "LossOnNotFoundMessageClient",
    "NoDeleteClient",
    "NoRetryOn404Client",
    "NoSingleFlightFirstCallClient",
    "ReferenceClient",
    "ReinitPerCallerClient",
    "RetryOn5xxClient",
    "ScopedClient",
    "SerialisingClient",
    "SessionPerCallClient",
    "StaleIdReinitClient",
    "UnboundedRetryClient",
    "close_leaked",
    "new_http_client",
]

# mcp 1.x waits for ever on an SSE stream cut before its response.
READ_TIMEOUT = 5.0  # above the mutant suite's overlap_timeout (which holds calls at the fake) plus a loaded round trip


_SSL_CONTEXT: ssl.SSLContext | None = None


KEEPALIVE_EXPIRY = 2.0
"""Well below the fake's (uvicorn's) 5 s keep-alive timeout; the SDK's client keeps httpx's 5 s.

With both at 5 s, a call retried after ``READ_TIMEOUT`` (also 5 s) can pick from the pool the connection the
server is closing at that very moment, idle since the cut answer, and fail ``ReadError``: a race of any HTTP
client against any uvicorn server, not of the client under test (it made BlindRetryAfterCutClient's retry fail
in about one run in ten under load, so the mutant passed its scenario)."""


def new_http_client() -> Any:
    """An HTTP client as the SDK makes one (``create_mcp_http_client``), with one shared SSL context (loading
    the CA bundle for each client costs ~50 ms, which the mutant runs would pay hundreds of times) and idle
    connections dropped after `KEEPALIVE_EXPIRY`."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    module = importlib.import_module(_sdk().http_module)
    return module.AsyncClient(
        timeout=module.Timeout(30.0, read=300.0),
        verify=_SSL_CONTEXT,
        limits=module.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_EXPIRY),
    )


def _is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _code(exc: BaseException) -> int | None:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", getattr(exc, "code", None))
    return code if isinstance(code, int) else None


class ReferenceClient(ReusingSessionClient):
    """Not broken: the reference client as tests/test_contract.py builds it (a read timeout for mcp 1.x)."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        kwargs.setdefault("read_timeout", READ_TIMEOUT)
        super().__init__(url, **kwargs)

    def _http_client(self) -> Any:
        if self._http is None:
            self._http = new_http_client()  # still made (and closed) by this client
        return super()._http_client()

    def _retire_current(self) -> None:
        if self._current is not None:
            self._retire(self._current)


class DefaultTransportClient(ReferenceClient):
    """Not broken: the SDK's default transport sends the DELETE on close (``terminate_on_close=True``), so the
    transport that met a 404 DELETEs the dead session once as it is closed: allowed, and harmless. Fails
    only with ``strict_stale_delete = True``."""

    _sdk_deletes = True


# --- reuse ------------------------------------------------------------------------------------------


class SessionPerCallClient:
    """Bug (faults.md C01): a session per call. Opens a session when no call is in flight and closes it
    (DELETE) when the last one ends; concurrent calls share it, sequential calls each open their own."""

    def __init__(self, url: str, *, share_http_client: bool = True) -> None:
        self.url = url
        self._share = share_http_client
        self._http: Any = None
        self._inner: ReferenceClient | None = None
        self._users = 0

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if self._inner is None:
            if self._share and self._http is None:
                self._http = new_http_client()
            http = self._http if self._share else None
            self._inner = ReferenceClient(self.url, http_client=http)
        inner = self._inner
        self._users += 1
        try:
            return await inner.call_tool(name, arguments)
        finally:
            self._users -= 1
            if self._users == 0 and self._inner is inner:
                self._inner = None
                await inner.aclose()

    async def aclose(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.aclose()
        if self._http is not None:
            await self._http.aclose()


class HTTPClientPerCallClient(SessionPerCallClient):
    """Bug (faults.md H01): a new HTTP client (and so a new session) per call."""

    def __init__(self, url: str) -> None:
        super().__init__(url, share_http_client=False)


# --- session loss -------------------------------------------------------------------------------------


class NoRetryOn404Client(ReferenceClient):
    """Bug (faults.md R01): a 404 goes to the caller; the call is not retried on a new session."""

    def __init__(self, url: str) -> None:
        super().__init__(url, max_attempts=1)


class StaleIdReinitClient(ReferenceClient):
    """Bug (faults.md R02): after a 404 it first re-initializes with the dead session's id, as a client
    re-initializing its old transport does, then opens the new session."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._stale: list[str] = []

    def _retire(self, session: _Session) -> None:
        if session.session_id is not None and session.session_id not in self._stale:
            self._stale.append(session.session_id)
            self._pending_stale = session.session_id
        super()._retire(session)

    async def _session(self) -> _Session:
        stale = getattr(self, "_pending_stale", None)
        if stale is not None:
            self._pending_stale = None
            body = {
                "jsonrpc": "2.0",
                "id": "reinit",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "stale-reinit", "version": "0"},
                },
            }
            headers = {
                "mcp-session-id": stale,
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            }
            await self._http_client().post(self.url, json=body, headers=headers)
        return await super()._session()


class HTTPClientPerSessionClient(ReferenceClient):
    """Bug (faults.md H01): every new session gets a new HTTP client (closed at aclose)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._old_http: list[Any] = []

    def _start(self) -> _Session:
        if self._http is not None:
            self._old_http.append(self._http)
            self._http = None
        return super()._start()

    async def _shutdown(self) -> None:
        await super()._shutdown()
        for http in self._old_http:
            await http.aclose()


class UnboundedRetryClient(ReferenceClient):
    """Bug (faults.md R04): retries a lost session for ever."""

    def __init__(self, url: str) -> None:
        super().__init__(url, max_attempts=1_000_000)


class NoSingleFlightFirstCallClient(ReferenceClient):
    """Bug (faults.md C02): concurrent first calls each open a session (no single-flight before the first
    session is up; later re-opens are single-flight)."""

    _opened_once = False

    async def _session(self) -> _Session:
        if self._opened_once:
            return await super()._session()
        session = self._start()
        await session.settled.wait()
        if session.mcp is None:
            raise SessionOpenError(self.url, session.error)
        self._opened_once = True
        return session


class ReinitPerCallerClient(ReferenceClient):
    """Bug (faults.md R08): every caller that met the 404 opens its own new session."""

    async def _run(self, op: Any) -> Any:
        error_type = _sdk().error_type
        session = await self._session()
        for _ in range(self._max_attempts - 1):
            try:
                return await self._guarded(session, op)
            except error_type as exc:
                if not self._is_loss(session, exc):
                    raise
                self._retire(session)
                session = self._start()
                await session.settled.wait()
                if session.mcp is None:
                    raise SessionOpenError(self.url, session.error) from exc
        return await self._guarded(session, op)


class BroadSessionLossClient(ReferenceClient):
    """Not broken: also treats the non-404 "session unknown" shapes (400 -32000, 401, 410, 503, an SSE
    error event) as session loss, so it passes the strict scenarios (``strict_session_loss = True``)."""

    _LOSS_STATUSES = frozenset({400, 401, 410, 503})
    _LOSS_WORDS = ("session", "not initialized")

    async def _on_response(self, response: Any) -> None:
        from pytest_fake_mcp._client._reusing import _CURRENT

        session = _CURRENT.get()
        sent = response.request.headers.get("mcp-session-id")
        if (
            session is not None
            and session.owner is self
            and sent is not None
            and sent == session.session_id
            and response.status_code in self._LOSS_STATUSES
        ):
            body = (await response.aread()).decode(errors="replace").lower()
            if any(word in body for word in self._LOSS_WORDS):
                session.lost = True  # no DELETE for it: the server forgot it
                self._retire(session)
        await super()._on_response(response)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        for attempt in range(self._max_attempts):
            session = self._current
            try:
                return await super().call_tool(name, arguments)
            except SessionLostError:
                raise  # 404s: the reference already retried them
            except Exception as exc:
                lost = session is not None and session.lost
                message = str(getattr(getattr(exc, "error", None), "message", exc)).lower()
                if attempt + 1 == self._max_attempts or not (lost or "session not found" in message):
                    raise
                if session is not None:
                    session.lost = True
                    self._retire(session)
        raise AssertionError("unreachable")  # pragma: no cover


# --- errors that are not session loss -----------------------------------------------------------------


class LossOnNotFoundMessageClient(ReferenceClient):
    """Bug (faults.md R09): any MCP error whose message says "not found" is read as session loss."""

    def _is_loss(self, session: _Session, exc: Exception) -> bool:
        message = str(getattr(getattr(exc, "error", None), "message", exc))
        return "not found" in message.lower() or super()._is_loss(session, exc)


class LossOnIsErrorClient(ReferenceClient):
    """Bug: an ``isError`` result is read as a broken session: new session, call again."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        result = await super().call_tool(name, arguments)
        if _is_error(result):
            self._retire_current()
            result = await super().call_tool(name, arguments)
        return result


class _RetryAfterStatus(ReferenceClient):
    """Retries a failed call once on a new session when a POST of it was answered a chosen status."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._statuses: list[int] = []

    def _retry_on(self, status: int) -> bool:
        raise NotImplementedError

    async def _on_response(self, response: Any) -> None:
        if response.request.method == "POST":
            self._statuses.append(response.status_code)
        await super()._on_response(response)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        seen = len(self._statuses)
        try:
            return await super().call_tool(name, arguments)
        except Exception:
            if not any(self._retry_on(s) for s in self._statuses[seen:]):
                raise
            self._retire_current()
            return await super().call_tool(name, arguments)


class RetryOn5xxClient(_RetryAfterStatus):
    """Bug (faults.md R10, R12): a 5xx is read as session loss: new session, call again."""

    def _retry_on(self, status: int) -> bool:
        return status >= 500


class InvalidRequestAsLossClient(_RetryAfterStatus):
    """Bug (faults.md R09, R10): a 400 (here -32600 Invalid Request) is read as session loss."""

    def _retry_on(self, status: int) -> bool:
        return status == 400


class BlindRetryAfterCutClient(ReferenceClient):
    """Bug (faults.md R12): a call whose response never came (stream cut, read timeout) is sent again."""

    _RETRY_CODES = frozenset({-32000, -32001, 408})

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except _sdk().error_type as exc:
            if _code(exc) not in self._RETRY_CODES:
                raise
            return await super().call_tool(name, arguments)


# --- concurrency ---------------------------------------------------------------------------------------


class SerialisingClient(ReferenceClient):
    """Bug (faults.md C03): a lock held across each call serialises them."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._lock = asyncio.Lock()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        async with self._lock:
            return await super().call_tool(name, arguments)


# --- closing ------------------------------------------------------------------------------------------


class NoDeleteClient(ReferenceClient):
    """Bug (faults.md T08): never sends DELETE; sessions stay open on the server."""

    async def _terminate(self, session: _Session, http: Any) -> None:
        return


class AbandonsSessionOnInterruptClient(ReferenceClient):
    """Bug (faults.md T06): a call that timed out or was cancelled makes it give up its session as if lost: the
    next call opens a new one, and the old one is left open on the server (no DELETE)."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except BaseException as exc:
            session = self._current
            if session is not None and (isinstance(exc, asyncio.CancelledError) or _code(exc) in (-32001, 408)):
                session.lost = True  # so it is stopped without its DELETE
                self._retire(session)
            raise  # the SDK's request timeout: -32001 (mcp 2.x), 408 (mcp 1.x)


class LeakedHTTPClientClient(ReferenceClient):
    """Bug: builds its HTTP client itself but treats it as the caller's, so aclose never closes it.

    The leaked clients are kept in ``leaked`` so the harness can close them after each test
    (:func:`close_leaked`); left to the garbage collector they would warn in a later test.
    """

    leaked: ClassVar[list[Any]] = []

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._own_http = False

    def _http_client(self) -> Any:
        if self._http is None:
            self._http = new_http_client()
            self.leaked.append(self._http)
        return super()._http_client()


async def close_leaked() -> None:
    """Close what ``LeakedHTTPClientClient`` leaked (a harness fixture calls it after each test)."""
    leaked, LeakedHTTPClientClient.leaked[:] = list(LeakedHTTPClientClient.leaked), []
    for http in leaked:
        await http.aclose()


class LeftoverTaskClient(ReferenceClient):
    """Bug: starts a keep-alive task on the first call and never stops it."""

    _keepalive: asyncio.Task[None] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        if self._keepalive is None:
            self._keepalive = asyncio.ensure_future(asyncio.Event().wait())
        return await super().call_tool(name, arguments)


class CancelOpeningOnCloseClient(ReferenceClient):
    """Bug (faults.md T06): aclose cancels a session whose ``initialize`` is in flight instead of letting
    it finish, so the session the server opened is never DELETEd."""

    async def _shutdown(self) -> None:
        opening = [s for s in self._sessions if s.task is not None and not s.settled.is_set()]
        for session in opening:
            session.lost = True  # forgotten: whatever id the handshake brings back is never DELETEd
            assert session.task is not None
            session.task.cancel()
        if opening:
            await asyncio.wait([s.task for s in opening if s.task is not None])
        await super()._shutdown()


CLIENTS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        ReferenceClient,
        BroadSessionLossClient,
        SessionPerCallClient,
        HTTPClientPerCallClient,
        NoRetryOn404Client,
        StaleIdReinitClient,
        HTTPClientPerSessionClient,
        UnboundedRetryClient,
        NoSingleFlightFirstCallClient,
        ReinitPerCallerClient,
        LossOnNotFoundMessageClient,
        LossOnIsErrorClient,
        RetryOn5xxClient,
        InvalidRequestAsLossClient,
        BlindRetryAfterCutClient,
        SerialisingClient,
        NoDeleteClient,
        AbandonsSessionOnInterruptClient,
        LeakedHTTPClientClient,
        LeftoverTaskClient,
        CancelOpeningOnCloseClient,
    )
}
"""Every client here, by name: test_contract_mutants.py checks each one has a case."""


class DefaultTransportHTTPClientPerSessionClient(HTTPClientPerSessionClient):
    """Bug (H01) on the SDK's default transport: a new HTTP client for every new session. The harmless DELETE
    after the 404 must not hide it: the HTTP-client finding is reported first."""

    _sdk_deletes = True


class CrossTaskCloseClient:
    """Bug (T01): enters the SDK's contexts in whichever task calls first, and exits them from ``aclose``'s
    task: anyio's "Attempted to exit cancel scope in a different task" and a cancelled caller."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._stack: contextlib.AsyncExitStack | None = None
        self._session: Any = None
        self._lock = asyncio.Lock()
        self._http = new_http_client()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        sdk = _sdk()
        async with self._lock:
            if self._session is None:
                stack = contextlib.AsyncExitStack()
                streams = await stack.enter_async_context(sdk.streamable_http_client(self.url, http_client=self._http))
                session = await stack.enter_async_context(sdk.client_session(streams[0], streams[1]))
                await session.initialize()
                self._stack, self._session = stack, session
        return await self._session.call_tool(name, arguments)

    async def aclose(self) -> None:
        try:
            if self._stack is not None:
                await self._stack.aclose()
        finally:
            await self._http.aclose()


CLIENTS["CrossTaskCloseClient"] = CrossTaskCloseClient
CLIENTS["DefaultTransportClient"] = DefaultTransportClient
CLIENTS["DefaultTransportHTTPClientPerSessionClient"] = DefaultTransportHTTPClientPerSessionClient


# --- framework-style forms (not broken): what open_client hands the suites -------------------------------


class ScopedClient:
    """A framework-style client: ``async with`` enters a task group (an anyio cancel scope bound to the entering
    task, as the SDK's transports and FastMCP's client do), so it must be left on that task."""

    def __init__(self, url: str) -> None:
        self._inner = ReferenceClient(url)
        self._group: Any = None

    async def __aenter__(self) -> ScopedClient:
        import anyio

        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        await self._inner.aclose()
        return await self._group.__aexit__(*exc)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self._inner.call_tool(name, arguments)
