"""HeadlessOAuth: an MCP SDK OAuth client that completes the authorization-code flow without a browser.

The SDK's ``OAuthClientProvider`` hands the authorization URL to a ``redirect_handler`` (a real app opens a
browser) and waits on a ``callback_handler`` for the code. Against a test server that approves at once, the
redirect handler can simply GET the URL and keep the ``Location`` the server redirects to; the callback handler
reads the code and state from it. Nothing here imports the server side, or the SDK until a provider is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HeadlessOAuth"]


class HeadlessOAuth:
    """The ``redirect_handler``/``callback_handler`` pair of a headless OAuth login, and a provider built on it.

    Works with mcp 1.x and 2.x (``OAuthClientProvider``, passed as the HTTP client's ``auth=``); the server must
    approve at once (the fake with ``auth=True`` does, docs/authorization.md).

    Example::

        auth = HeadlessOAuth().provider(fake_mcp_server.url)
        async with httpx.AsyncClient(auth=auth) as http:  # httpx2 under mcp 2.x
            ...
    """

    def __init__(self) -> None:
        self.redirects: list[str] = []
        """Every ``Location`` the authorization endpoint answered with, oldest first."""

    def __repr__(self) -> str:
        return f"HeadlessOAuth(redirects={len(self.redirects)})"

    async def redirect_handler(self, authorization_url: str) -> None:
        """GET the authorization URL (no redirect followed) and keep where the server sends the browser."""
        http = _http()
        async with http.AsyncClient(follow_redirects=False, timeout=10) as client:
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
