"""HeadlessOAuth: an MCP SDK OAuth client that completes the authorization-code flow without a browser.

The SDK's ``OAuthClientProvider`` hands the authorization URL to a ``redirect_handler`` (a real app opens a
browser) and waits on a ``callback_handler`` for the code. Against a test server that approves at once, the
redirect handler can simply GET the URL and keep the ``Location`` the server redirects to; the callback handler
reads the code and state from it. A client that opens a browser itself and runs its own callback server (FastMCP's
``OAuth``) gets :meth:`HeadlessOAuth.open` as its ``webbrowser.open``: it logs in the same way and delivers the
redirect to that callback server. Nothing here imports the server side, or the SDK until a provider is made.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlparse

from .._wire._roles import stand_in_browser

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HeadlessOAuth"]

_CALLBACK_WAIT = 10.0
"""Seconds :meth:`HeadlessOAuth.open` waits for the client's callback server to listen."""


class HeadlessOAuth:
    """The ``redirect_handler``/``callback_handler`` pair of a headless OAuth login, and a provider built on it.

    Works with mcp 1.x and 2.x (``OAuthClientProvider``, passed as the HTTP client's ``auth=``); the server must
    approve at once (the fake with ``auth=True`` does, docs/authorization.md). :meth:`open` is the browser of a
    client that opens one and serves its own callback (FastMCP's ``OAuth``).

    Example::

        auth = HeadlessOAuth().provider(fake_mcp_server.url)
        async with httpx.AsyncClient(auth=auth) as http:  # httpx2 under mcp 2.x
            ...
    """

    def __init__(self) -> None:
        self.redirects: list[str] = []
        """Every ``Location`` the authorization endpoint answered with, oldest first."""
        self.failures: list[str] = []
        """What went wrong in :meth:`open`'s logins (it runs beside the client, so it cannot raise at it)."""
        self._browsing: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"HeadlessOAuth(redirects={len(self.redirects)})"

    async def redirect_handler(self, authorization_url: str) -> None:
        """GET the authorization URL (no redirect followed) and keep where the server sends the browser."""
        http = _http()
        with stand_in_browser():  # listed by mcp_http_clients, never counted: it is not the client under test
            browser = http.AsyncClient(follow_redirects=False, timeout=10)
        async with browser as client:
            response = await client.get(authorization_url)
        location = response.headers.get("location")
        if response.status_code not in (302, 303, 307) or location is None:
            raise RuntimeError(
                f"HeadlessOAuth: GET {authorization_url} answered {response.status_code} {response.text[:200]!r}, "
                "not a redirect with a code; the server must approve without a browser"
            )
        self.redirects.append(location)

    async def callback_handler(self) -> Any:
        """The code and state of the last redirect, in the installed SDK's form (2.x: ``AuthorizationCodeResult``)."""
        if not self.redirects:
            raise RuntimeError("HeadlessOAuth.callback_handler ran before redirect_handler: no redirect to read")
        query = parse_qs(urlparse(self.redirects[-1]).query)
        if "code" not in query:
            error = query.get("error_description", query.get("error", ["no code"]))[0]
            raise RuntimeError(f"HeadlessOAuth: the authorization server refused: {error}")
        code, state = query["code"][0], query.get("state", [None])[0]
        auth = importlib.import_module("mcp.shared.auth")
        result = getattr(auth, "AuthorizationCodeResult", None)
        return (code, state) if result is None else result(code=code, state=state)

    def open(self, url: str, new: int = 0, autoraise: bool = True) -> bool:
        """A browser for a client that opens one and runs its own callback server (FastMCP's ``OAuth``).

        It has ``webbrowser.open``'s signature: install it for one test with
        ``monkeypatch.setattr(webbrowser, "open", headless.open)`` (or register the object as a browser with
        ``webbrowser.register``). The client calls it from its event loop, then starts its callback server; this
        schedules a task on that loop which GETs ``url`` (no redirect followed), keeps the ``Location`` and GETs
        it, the client's callback, retrying while nothing listens there yet (bounded: 10 seconds). An answer that
        is not a redirect is delivered to the callback as ``error=invalid_request``, so the client fails at once;
        what went wrong is kept in :attr:`failures`. Returns True, as a browser that opened.

        Example::

            headless = HeadlessOAuth()
            monkeypatch.setattr(webbrowser, "open", headless.open)
            async with Client(fake_mcp_server.url, auth="oauth") as client:  # FastMCP's OAuth, no browser
                ...
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "HeadlessOAuth.open ran outside an asyncio event loop: it is a browser for an async client, which "
                "calls webbrowser.open from its loop before serving its callback; for a client that takes "
                "handlers, pass headless.redirect_handler and headless.callback_handler instead"
            ) from None
        task = loop.create_task(self._browse(url))
        self._browsing.add(task)
        task.add_done_callback(self._browsing.discard)
        return True

    async def _browse(self, url: str) -> None:
        """GET the authorization URL, then deliver where it redirects (or the refusal) to the client's callback."""
        http = _http()
        with stand_in_browser():
            browser = http.AsyncClient(follow_redirects=False, timeout=10)
        async with browser as client:
            try:
                response = await client.get(url)
            except Exception as exc:  # kept, not raised: nothing awaits this task
                self.failures.append(f"GET {url} failed: {exc!r}")
                return
            location = response.headers.get("location")
            if response.status_code in (302, 303, 307) and location is not None:
                self.redirects.append(location)
            else:
                answer = f"{response.status_code} {response.text[:200]!r}"
                text = f"GET {urlparse(url).path} answered {answer}, not a redirect with a code"
                self.failures.append(text)
                query = parse_qs(urlparse(url).query)
                if "redirect_uri" not in query:
                    return
                error = {"error": "invalid_request", "error_description": f"HeadlessOAuth: {text}"}
                location = f"{query['redirect_uri'][0]}?{urlencode({**error, 'state': query.get('state', [''])[0]})}"
            await self._deliver(client, http, location)

    async def _deliver(self, client: Any, http: Any, location: str) -> None:
        """GET ``location`` once the client's callback server listens there (it starts after ``open`` returns)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CALLBACK_WAIT
        delay = 0.001
        while True:
            try:
                await client.get(location)
                return
            except http.ConnectError:
                if loop.time() > deadline:
                    self.failures.append(
                        f"nothing listened at {location} within {_CALLBACK_WAIT:g}s: the client never started its "
                        "callback server (does it open a browser and serve a redirect_uri on this host?)"
                    )
                    return
                # A retry after a refused connect, backing off to 50 ms: nothing signals that the client's callback
                # server listens (it starts after open() returns), so a refused connect is the only news of it.
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
            except Exception as exc:
                self.failures.append(f"GET {location} failed: {exc!r}")
                return

    def provider(
        self,
        server_url: str,
        *,
        scope: str | None = None,
        client_name: str = "pytest-fake-mcp",
        redirect_uris: Sequence[str] = ("http://localhost:3030/callback",),
    ) -> Any:
        """An SDK ``OAuthClientProvider`` for ``server_url`` with in-memory token storage and these handlers."""
        oauth2 = importlib.import_module("mcp.client.auth")
        shared = importlib.import_module("mcp.shared.auth")
        metadata = shared.OAuthClientMetadata(
            client_name=client_name,
            redirect_uris=list(redirect_uris),
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=scope,
        )
        return oauth2.OAuthClientProvider(
            server_url=server_url,
            client_metadata=metadata,
            storage=_MemoryStorage(),
            redirect_handler=self.redirect_handler,
            callback_handler=self.callback_handler,
        )


class _MemoryStorage:
    """The SDK's ``TokenStorage`` protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def _http() -> Any:
    """The HTTP library the installed SDK speaks: httpx2 under mcp 2.x, httpx under 1.x."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")
