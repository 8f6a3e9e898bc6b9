"""A public OAuth client (``token_endpoint_auth_method: none``, FastMCP's) and ``HeadlessOAuth.open``, the browser.

The wire facts are an SDK server's (mcp 2.3 and 1.30, measured: docs/authorization.md, "What a real server does"):
a public client is registered without a ``client_secret`` and trades its code and refresh token without one.
``HeadlessOAuth.open`` is tested here without FastMCP, against a callback server of the test's own that starts only
after the browser opened, as FastMCP's does; tests/frameworks/test_fastmcp_auth.py runs it with FastMCP.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import socket
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest

from pytest_fake_mcp import FakeMCPServer, HeadlessOAuth

AUTH = pytest.mark.fake_mcp_server(auth=True)
PUBLIC = {"redirect_uris": ["http://localhost:3031/callback"], "token_endpoint_auth_method": "none"}


def _authorize_url(server: FakeMCPServer, client_id: str, redirect_uri: str, verifier: str) -> str:
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st1",
        "resource": server.url,
    }
    return f"{server.origin}/authorize?{urlencode(query)}"


@AUTH
@pytest.mark.asyncio
async def test_a_public_client_is_registered_without_a_secret_and_uses_none(fake_mcp_server: FakeMCPServer) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        registered = await http.post(f"{fake_mcp_server.origin}/register", json=PUBLIC)
        info = registered.json()
        verifier = secrets.token_urlsafe(48)
        url = _authorize_url(fake_mcp_server, info["client_id"], PUBLIC["redirect_uris"][0], verifier)
        code = parse_qs(urlparse((await http.get(url)).headers["location"]).query)["code"][0]
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier}
        form |= {
            "redirect_uri": PUBLIC["redirect_uris"][0],
            "client_id": info["client_id"],
            "resource": fake_mcp_server.url,
        }
        tokens = await http.post(f"{fake_mcp_server.origin}/token", data=form)  # no client_secret
        refresh = {"grant_type": "refresh_token", "refresh_token": tokens.json()["refresh_token"]}
        refreshed = await http.post(f"{fake_mcp_server.origin}/token", data={**refresh, "client_id": info["client_id"]})

    assert registered.status_code == 201
    assert info["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in info
    assert "client_secret_expires_at" not in info
    assert (tokens.status_code, refreshed.status_code) == (200, 200)


@AUTH
@pytest.mark.asyncio
async def test_a_confidential_client_still_gets_and_needs_its_secret(fake_mcp_server: FakeMCPServer) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        info = (await http.post(f"{fake_mcp_server.origin}/register", json={"redirect_uris": ["http://x/cb"]})).json()
        form = {"grant_type": "refresh_token", "refresh_token": "rt-none", "client_id": info["client_id"]}
        refused = await http.post(f"{fake_mcp_server.origin}/token", data=form)
    assert info["token_endpoint_auth_method"] == "client_secret_post"
    assert info["client_secret"]
    assert refused.status_code == 401


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@AUTH
@pytest.mark.asyncio
async def test_open_delivers_the_code_to_a_callback_server_started_after_it(fake_mcp_server: FakeMCPServer) -> None:
    callback = f"http://127.0.0.1:{_free_port()}/callback"
    async with httpx.AsyncClient(timeout=10) as http:
        info = (
            await http.post(f"{fake_mcp_server.origin}/register", json={**PUBLIC, "redirect_uris": [callback]})
        ).json()
    received: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = await reader.readline()
        while (await reader.readline()).strip():
            pass
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        received.set_result(request_line)

    headless = HeadlessOAuth()
    assert headless.open(_authorize_url(fake_mcp_server, info["client_id"], callback, "v" * 50)) is True
    port = int(urlparse(callback).port or 0)
    server = await asyncio.start_server(serve, "127.0.0.1", port)  # as a client serves its callback: afterwards
    async with server, asyncio.timeout(10):
        request_line = await received
        await asyncio.wait(headless._browsing)  # its login task, done once the answer was read

    assert request_line.startswith(b"GET /callback?code=")
    assert b"state=st1" in request_line
    assert headless.failures == []
    assert len(headless.redirects) == 1


@AUTH
@pytest.mark.asyncio
async def test_open_delivers_a_refusal_as_an_error_to_the_callback(fake_mcp_server: FakeMCPServer) -> None:
    callback = f"http://127.0.0.1:{_free_port()}/callback"
    received: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = await reader.readline()
        while (await reader.readline()).strip():
            pass
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        received.set_result(request_line)

    headless = HeadlessOAuth()
    server = await asyncio.start_server(serve, "127.0.0.1", int(urlparse(callback).port or 0))
    async with server, asyncio.timeout(10):
        headless.open(_authorize_url(fake_mcp_server, "nobody", callback, "v" * 50))  # an unknown client: 400
        request_line = await received
        await asyncio.wait(headless._browsing)

    assert request_line.startswith(b"GET /callback?error=invalid_request&error_description=HeadlessOAuth")
    assert len(headless.failures) == 1
    assert "GET /authorize answered 400" in headless.failures[0]
    assert headless.redirects == []


def test_open_outside_an_event_loop_names_the_handlers() -> None:
    with pytest.raises(RuntimeError, match=r"outside an asyncio event loop.*headless\.redirect_handler"):
        HeadlessOAuth().open("http://127.0.0.1:1/authorize")
