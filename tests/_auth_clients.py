"""Small hand-written OAuth clients for the auth tests: a refresher with or without single flight, raw MCP calls.

They speak plain httpx to the fake (``auth=True, json_response=True``): register, authorize headlessly with PKCE,
trade the code, then send MCP requests with the bearer token; on a 401 they refresh and retry. The deliberately
broken forms (``single_flight=False``, ``reuse_refused=True``, ``register_each_time=True``) are what the auth
oracles must catch.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx

REDIRECT = "http://localhost:3030/callback"
ACCEPT = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


@dataclass
class Tokens:
    access: str = ""
    refresh: str = ""
    generation: int = 0


@dataclass
class OAuthState:
    origin: str
    resource: str
    client_id: str = ""
    client_secret: str = ""
    tokens: Tokens = field(default_factory=Tokens)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


async def register(http: httpx.AsyncClient, state: OAuthState) -> None:
    answer = await http.post(f"{state.origin}/register", json={"redirect_uris": [REDIRECT], "client_name": "t"})
    answer.raise_for_status()
    state.client_id, state.client_secret = answer.json()["client_id"], answer.json()["client_secret"]


async def login(http: httpx.AsyncClient, state: OAuthState, scope: str | None = None) -> None:
    """The authorization-code flow with PKCE, headless: GET /authorize, read the redirect, trade the code
    (``scope``: ask for it, a step-up)."""
    if not state.client_id:
        await register(http, state)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": state.client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
        "resource": state.resource,
    }
    if scope is not None:
        query["scope"] = scope
    redirect = await http.get(f"{state.origin}/authorize?{urlencode(query)}")
    code = parse_qs(urlparse(redirect.headers["location"]).query)["code"][0]
    await _trade(
        http,
        state,
        {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier},
    )


async def refresh(http: httpx.AsyncClient, state: OAuthState, presented: str) -> bool:
    return await _trade(http, state, {"grant_type": "refresh_token", "refresh_token": presented})


async def _trade(http: httpx.AsyncClient, state: OAuthState, form: dict[str, str]) -> bool:
    form |= {"client_id": state.client_id, "client_secret": state.client_secret, "resource": state.resource}
    answer = await http.post(f"{state.origin}/token", data=form)
    if answer.status_code != 200:
        return False
    body = answer.json()
    state.tokens = Tokens(body["access_token"], body["refresh_token"], state.tokens.generation + 1)
    return True


class Refresher(httpx.Auth):
    """Bearer auth that refreshes on a 401 and retries once.

    ``single_flight``: one refresh per expiry (a lock, and no refresh if another already renewed the token);
    without it every request that met the 401 refreshes on its own. ``reuse_refused``: retry with the refused
    token (a client that ignores the 401). ``register_each_time``: register anew before each renewal.
    """

    def __init__(
        self,
        state: OAuthState,
        *,
        single_flight: bool = True,
        reuse_refused: bool = False,
        register_each_time: bool = False,
    ) -> None:
        self.state = state
        self.single_flight = single_flight
        self.reuse_refused = reuse_refused
        self.register_each_time = register_each_time
        self.refreshes = 0

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        seen = self.state.tokens.generation
        request.headers["authorization"] = f"Bearer {self.state.tokens.access}"
        response = yield request
        if response.status_code != 401:
            return
        if not self.reuse_refused:
            await self._renew(seen, self.state.tokens.refresh)
            request.headers["authorization"] = f"Bearer {self.state.tokens.access}"
        yield request

    async def _renew(self, seen: int, presented: str) -> None:
        """Renew the token this request saw refused; ``presented`` is the refresh token it knew then."""
        async with httpx.AsyncClient(timeout=10) as http:
            if self.single_flight:
                async with self.state.lock:
                    if self.state.tokens.generation == seen:
                        await self._refresh(http, self.state.tokens.refresh)
            else:
                await self._refresh(http, presented)

    async def _refresh(self, http: httpx.AsyncClient, presented: str) -> None:
        self.refreshes += 1
        if self.register_each_time:
            await register(http, self.state)
        if not await refresh(http, self.state, presented):
            await login(http, self.state)


async def open_session(http: httpx.AsyncClient, url: str) -> str:
    """``initialize`` and ``notifications/initialized``; the session id."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    answer = await http.post(
        url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=ACCEPT
    )
    answer.raise_for_status()
    session = answer.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(url, json=note, headers={**ACCEPT, "mcp-session-id": session})
    return session


async def call_echo(http: httpx.AsyncClient, url: str, session: str, text: str) -> Any:
    message = {
        "jsonrpc": "2.0",
        "id": text,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }
    answer = await http.post(url, json=message, headers={**ACCEPT, "mcp-session-id": session})
    return answer
