"""Clients that log in to the fake, in the forms the suites take: the reference client and the SDK's session with
the SDK's ``OAuthClientProvider`` (``HeadlessOAuth``), and the hand-written refreshers of ``_auth_clients``.

The HTTP library is the one the installed SDK speaks (httpx2 under mcp 2.x, httpx under 1.x); a refresher is an
auth of that library.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from _auth_clients import ACCEPT, OAuthState, Refresher, Tokens, login, open_session
from pytest_fake_mcp import HeadlessOAuth
from pytest_fake_mcp.client import ReusingSessionClient

try:
    import httpx2 as http_lib  # mcp 2.x: the SDK's transport takes an httpx2 client

    class _Refresher(Refresher, http_lib.Auth):  # type: ignore[misc]
        """The same refresher, an auth of httpx2 (its flow speaks the request and response both libraries share)."""

except ImportError:  # mcp 1.x
    import httpx as http_lib

    _Refresher = Refresher  # type: ignore[misc]


NOT_LOGGED_IN = "not-logged-in"
"""The token a refresher sends before it has one (h11 refuses an empty ``Bearer``): the 401 makes it log in."""


class _ClosesItsHTTPClient:
    """The reference client over an HTTP client given to it, which ``aclose()`` closes too (the suites check that
    every HTTP client is closed at the end)."""

    def __init__(self, url: str, auth: Any) -> None:
        self.http = http_lib.AsyncClient(auth=auth)
        self.client = ReusingSessionClient(url, http_client=self.http)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.client.call_tool(name, arguments)

    async def aclose(self) -> None:
        try:
            await self.client.aclose()
        finally:
            await self.http.aclose()


def reference_with_sdk_oauth(url: str) -> _ClosesItsHTTPClient:
    """``ReusingSessionClient`` whose HTTP client logs in with the SDK's ``OAuthClientProvider``."""
    return _ClosesItsHTTPClient(url, HeadlessOAuth().provider(url))


def reference_with_refresher(**flags: bool) -> Callable[[str], _ClosesItsHTTPClient]:
    """``ReusingSessionClient`` whose HTTP client logs in with the hand-written refresher (its ``flags``: the
    broken forms). It logs in at the first 401, its first request carrying a token the fake never issued;
    ``reuse_refused`` only once logged in (before that it would never log in at all)."""

    def make(url: str) -> _ClosesItsHTTPClient:
        state = OAuthState(origin=url.rsplit("/", 1)[0], resource=url, tokens=Tokens(access=NOT_LOGGED_IN))
        auth = _Refresher(state, **{k: v for k, v in flags.items() if k != "reuse_refused"})
        if flags.get("reuse_refused"):
            auth = _ReusesRefusedOnceLoggedIn(state)
        return _ClosesItsHTTPClient(url, auth)

    return make


class _ReusesRefusedOnceLoggedIn(_Refresher):  # type: ignore[misc,valid-type]
    """Logs in at the first 401, then sends a refused token again (the ``reuse_refused`` form, once it has one)."""

    def async_auth_flow(self, request: Any) -> Any:
        self.reuse_refused = self.state.tokens.access != NOT_LOGGED_IN
        return super().async_auth_flow(request)


@contextlib.asynccontextmanager
async def sdk_session_with_oauth(url: str) -> AsyncIterator[ClientSession]:
    """The SDK's own ``ClientSession`` over its streamable-HTTP transport, logged in by ``OAuthClientProvider``."""
    async with (
        http_lib.AsyncClient(auth=HeadlessOAuth().provider(url)) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


class _StepsUp(Refresher):
    """The single-flight refresher that also steps up: on a 403 ``insufficient_scope`` it authorizes again asking
    for the challenge's ``scope=`` and sends the request again."""

    async def async_auth_flow(self, request: Any) -> Any:
        seen = self.state.tokens.generation
        request.headers["authorization"] = f"Bearer {self.state.tokens.access}"
        response = yield request
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 403 and 'error="insufficient_scope"' in challenge:
            scope = challenge.split('scope="', 1)[1].split('"', 1)[0]
            async with httpx.AsyncClient(timeout=10) as http:
                await login(http, self.state, scope)
        elif response.status_code == 401:
            await self._renew(seen, self.state.tokens.refresh)
        else:
            return
        request.headers["authorization"] = f"Bearer {self.state.tokens.access}"
        yield request


class RawOAuthClient:
    """A small MCP client over plain httpx (the fake with ``json_response=True``), logged in by ``_StepsUp``; a 404
    opens a new session and the call is sent again once.

    ``new_session_on_403``: its auth does not step up; the client does, on a 403 ``insufficient_scope``, then opens
    a new session and sends the call there (a token problem taken for session loss). ``renew_on_404``: a 404 logs
    in again before the new session (session loss taken for a token problem).
    """

    def __init__(self, url: str, *, new_session_on_403: bool = False, renew_on_404: bool = False) -> None:
        self.url = url
        self.state = OAuthState(origin=url.rsplit("/", 1)[0], resource=url, tokens=Tokens(access=NOT_LOGGED_IN))
        auth = Refresher(self.state) if new_session_on_403 else _StepsUp(self.state)
        self.http = httpx.AsyncClient(auth=auth, timeout=10)
        self.session: str | None = None
        self.sent = 0
        self.new_session_on_403 = new_session_on_403
        self.renew_on_404 = renew_on_404

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.session is None:
            self.session = await open_session(self.http, self.url)
        answer = await self._send(name, arguments)
        challenge = answer.headers.get("www-authenticate", "")
        if answer.status_code == 404 or (answer.status_code == 403 and self.new_session_on_403):
            async with httpx.AsyncClient(timeout=10) as http:
                if answer.status_code == 403:
                    await login(http, self.state, challenge.split('scope="', 1)[1].split('"', 1)[0])
                elif self.renew_on_404:
                    await login(http, self.state)
            self.session = await open_session(self.http, self.url)
            answer = await self._send(name, arguments)
        answer.raise_for_status()
        return answer.json()["result"]

    async def _send(self, name: str, arguments: dict[str, Any]) -> httpx.Response:
        self.sent += 1  # a new id per call (a resend after a 401 keeps its id: the same request)
        params = {"name": name, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": self.sent, "method": "tools/call", "params": params}
        assert self.session is not None
        return await self.http.post(self.url, json=message, headers={**ACCEPT, "mcp-session-id": self.session})

    async def aclose(self) -> None:
        try:
            if self.session is not None:
                await self.http.delete(self.url, headers={**ACCEPT, "mcp-session-id": self.session})
        finally:
            await self.http.aclose()
