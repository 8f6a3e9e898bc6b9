"""FastMCP's client OAuth against the fake's authorization server (docs/authorization.md, "FastMCP's client").

FastMCP's ``OAuth`` is the SDK's ``OAuthClientProvider`` with a browser (``webbrowser.open``), a callback server of
its own and key-value token storage. These tests run it as an app does, ``Client(url, auth="oauth")`` or
``auth=OAuth(...)``, with ``HeadlessOAuth().open`` as the browser: it logs in at the fake and calls FastMCP's
callback server back. Tokens go to a ``FileTreeStore`` under ``tmp_path`` (or FastMCP's in-memory default):
nothing is written anywhere else (checked). Runs in the FastMCP venv (``pip install -e '.[test]' -r
tests/frameworks/requirements-fastmcp.txt``); without FastMCP the module skips, and CI's
``FAKE_MCP_REQUIRE_FRAMEWORKS=1`` turns the skip into a failure.
"""

# ruff: noqa: E402
# (the snippet regions' imports follow the framework's, as the page shows them)
from __future__ import annotations

from pathlib import Path
from typing import Any

from _frameworks import require_framework

fastmcp = require_framework("fastmcp", "fastmcp")

# --8<-- [start:fastmcp-auth-imports]
import asyncio
import webbrowser

import pytest
from fastmcp import Client
from fastmcp.client.auth import OAuth
from key_value.aio.stores.filetree import (
    FileTreeStore,
    FileTreeV1CollectionSanitizationStrategy,
    FileTreeV1KeySanitizationStrategy,
)

from pytest_fake_mcp import HeadlessOAuth


@pytest.fixture
def browser(monkeypatch):
    headless = HeadlessOAuth()  # logs in at the URL FastMCP opens, then calls FastMCP's callback server
    monkeypatch.setattr(webbrowser, "open", headless.open)  # for this test only
    yield headless
    assert headless.failures == []


def token_store(directory):
    """FastMCP's tokens and client information, as files under `directory` (its keys are URLs: sanitized)."""
    directory.mkdir(parents=True, exist_ok=True)
    return FileTreeStore(
        data_directory=directory,
        key_sanitization_strategy=FileTreeV1KeySanitizationStrategy(directory),
        collection_sanitization_strategy=FileTreeV1CollectionSanitizationStrategy(directory),
    )


# --8<-- [end:fastmcp-auth-imports]

ASSERTIONS = (
    "assert_single_flight_refresh",
    "assert_no_refused_token_reused",
    "assert_no_reregistration",
    "assert_session_kept_across_auth",
)
LOGIN = [  # one login of FastMCP's: it GETs the authorization URL itself before opening the browser, which GETs it too
    "GET /.well-known/oauth-protected-resource/mcp",
    "GET /.well-known/oauth-authorization-server",
    "POST /register",
    "GET /authorize",
    "GET /authorize",
    "POST /token",
]


def grants(server: Any) -> list[tuple[str, int]]:
    """Each ``/token`` request's grant type and status, in order."""
    return [(e.request_body["grant_type"], e.status) for e in server.journal.exchanges if e.path == "/token"]


def auth_paths(server: Any) -> list[str]:
    """The authorization server's requests, in order (``POST /register``, ``GET /authorize``, ...)."""
    return [f"{e.http_method} {e.path}" for e in server.journal.exchanges if e.path != "/mcp"]


def assert_all_pass(server: Any) -> None:
    for name in ASSERTIONS:
        getattr(server, name)()


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()} if path.exists() else set()


# --8<-- [start:fastmcp-auth-login]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_fastmcp_logs_in_without_a_browser(fake_mcp_server, browser):
    async with asyncio.timeout(10), Client(fake_mcp_server.url, auth="oauth") as client:  # FastMCP's own OAuth
        result = await client.call_tool("echo", {"text": "hi"})  # 401, metadata, registration, code, token

    assert result.content[0].text == "hi"
    assert len(browser.redirects) == 1  # one login, delivered to FastMCP's callback server
    fake_mcp_server.assert_no_reregistration()


# --8<-- [end:fastmcp-auth-login]


# --8<-- [start:fastmcp-auth-expiry]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_fastmcp_renews_an_expired_token_once(fake_mcp_server, browser, tmp_path):
    fake_mcp_server.on("tools/call").nth(2).expire_tokens()  # the 2nd call meets the 401
    auth = OAuth(token_storage=token_store(tmp_path / "tokens"))  # tokens on disk, in tmp_path only
    async with asyncio.timeout(10), Client(fake_mcp_server.url, auth=auth) as client:
        await client.call_tool("echo", {"text": "a"})
        await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "bcd"))

    fake_mcp_server.assert_single_flight_refresh()  # one new authorization for the expiry, not one per call
    fake_mcp_server.assert_no_refused_token_reused()
    fake_mcp_server.assert_no_reregistration()
    fake_mcp_server.assert_session_kept_across_auth()


# --8<-- [end:fastmcp-auth-expiry]


@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_the_first_connect_runs_the_whole_flow_and_writes_only_where_told(fake_mcp_server, browser, tmp_path):
    home = Path(fastmcp.settings.home)
    before = files_under(home)
    auth = OAuth(token_storage=token_store(tmp_path / "tokens"))
    async with asyncio.timeout(10), Client(fake_mcp_server.url, auth=auth) as client:
        await client.call_tool("echo", {"text": "a"})

    first = fake_mcp_server.journal.exchanges[0]
    line_3 = fastmcp.__version__.startswith("3.")  # FastMCP 3.x (beside mcp 1.x), or 4.x
    assert (first.rpc_method, first.status) == ("initialize" if line_3 else "server/discover", 401)
    assert auth_paths(fake_mcp_server) == LOGIN
    assert grants(fake_mcp_server) == [("authorization_code", 200)]
    client_info = await auth.token_storage_adapter.get_client_info()  # read back from tmp_path
    if line_3:  # the SDK's default: a confidential client, with the secret the server issued
        assert client_info.token_endpoint_auth_method == "client_secret_post"
        assert client_info.client_secret
    else:  # a public client: registered without a secret, as an SDK server answers one
        assert client_info.token_endpoint_auth_method == "none"
        assert client_info.client_secret is None
    assert (await auth.token_storage_adapter.get_tokens()).refresh_token
    assert files_under(tmp_path / "tokens")  # the tokens and the client information, as files in tmp_path
    assert files_under(home) == before  # nothing under FastMCP's home
    assert_all_pass(fake_mcp_server)


@pytest.mark.parametrize("era", ["dual", "handshake"])
@pytest.mark.asyncio
async def test_concurrent_calls_meeting_an_expired_token_run_one_new_authorization(
    fake_mcp_server_factory, browser, era
):
    with fake_mcp_server_factory.lease(auth=True, era=era) as server:
        server.on("tools/call").nth(2).expire_tokens()
        async with asyncio.timeout(10), Client(server.url, auth="oauth") as client:
            await client.call_tool("echo", {"text": "a"})
            await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "bcd"))

        calls = server.get_requests(method="tools/call")
        assert [e.status for e in calls] == [200, 401, 200, 200, 200]  # the provider's lock: one 401, not three
        assert grants(server) == [("authorization_code", 200), ("authorization_code", 200)]  # no refresh
        assert auth_paths(server)[len(LOGIN) :] == [  # after the 401: metadata again, no registration, a new code
            "GET /.well-known/oauth-protected-resource/mcp",
            "GET /.well-known/oauth-authorization-server",
            "GET /authorize",
            "GET /authorize",
            "POST /token",
        ]
        assert_all_pass(server)
        if era == "handshake":
            assert len({e.session_id for e in calls}) == 1  # the session kept across the 401


@pytest.mark.parametrize("refused", [False, True], ids=["refresh", "refresh-refused"])
@pytest.mark.asyncio
async def test_it_refreshes_only_when_its_own_clock_says_the_token_expired(fake_mcp_server_factory, browser, refused):
    with fake_mcp_server_factory.lease(auth=True, token_lifetime=1) as server:
        if refused:
            server.on().refuse_refresh()
        async with asyncio.timeout(10), Client(server.url, auth="oauth") as client:
            await client.call_tool("echo", {"text": "a"})
            # The scenario is the client's own clock (expires_in=1): nothing on the wire to wait for.
            await asyncio.sleep(1.1)
            await asyncio.gather(*(client.call_tool("echo", {"text": t}) for t in "bc"))

        if refused:  # the tokens dropped, the call sent with none, its 401, a new authorization
            assert grants(server) == [("authorization_code", 200), ("refresh_token", 400), ("authorization_code", 200)]
            assert [e.status for e in server.get_requests(method="tools/call")] == [200, 401, 200, 200]
        else:
            assert grants(server) == [("authorization_code", 200), ("refresh_token", 200)]  # once, for both calls
            assert [e.status for e in server.get_requests(method="tools/call")] == [200, 200, 200]
        assert_all_pass(server)


@pytest.mark.parametrize("era", ["dual", "handshake"])
@pytest.mark.asyncio
async def test_a_403_insufficient_scope_makes_it_step_up(fake_mcp_server_factory, browser, era):
    with fake_mcp_server_factory.lease(auth=True, era=era) as server:
        server.on("tools/call").nth(2).insufficient_scope("admin")
        async with asyncio.timeout(10), Client(server.url, auth="oauth") as client:
            await client.call_tool("echo", {"text": "a"})
            await client.call_tool("echo", {"text": "b"})  # 403, a new authorization with 'admin', the retry

        assert [e.status for e in server.get_requests(method="tools/call")] == [200, 403, 200]
        assert auth_paths(server)[len(LOGIN) :] == ["GET /authorize", "GET /authorize", "POST /token"]
        assert_all_pass(server)


@pytest.mark.fake_mcp_server(auth=True, era="handshake")  # the stateless era has no session to lose
@pytest.mark.asyncio
async def test_a_404_is_not_taken_for_a_token_problem(fake_mcp_server, browser):
    fake_mcp_server.on("tools/call").nth(2).drop_session()
    client = Client(fake_mcp_server.url, auth="oauth")
    async with asyncio.timeout(10), client:
        await client.call_tool("echo", {"text": "a"})
        with pytest.raises(Exception, match=r"Session not found|Session terminated"):  # mcp 2.x | 1.x: FastMCP
            # keeps the dead id (docs/frameworks/fastmcp.md)
            await client.call_tool("echo", {"text": "b"})

    assert grants(fake_mcp_server) == [("authorization_code", 200)]  # no token request after the 404
    assert_all_pass(fake_mcp_server)


@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_clients_sharing_a_token_store_log_in_once(fake_mcp_server, browser, tmp_path):
    store = token_store(tmp_path / "tokens")
    for text in "ab":  # an app started twice, its tokens persisted
        async with asyncio.timeout(10), Client(fake_mcp_server.url, auth=OAuth(token_storage=store)) as client:
            await client.call_tool("echo", {"text": text})

    assert grants(fake_mcp_server) == [("authorization_code", 200)]  # the second reused tokens and client
    assert len(browser.redirects) == 1
    assert_all_pass(fake_mcp_server)


@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_each_client_with_its_own_store_registers_anew(fake_mcp_server, browser):
    for text in "ab":  # `auth="oauth"` twice: in-memory storage each time, so a registration each time
        async with asyncio.timeout(10), Client(fake_mcp_server.url, auth="oauth") as client:
            await client.call_tool("echo", {"text": text})

    with pytest.raises(AssertionError, match="2 registrations succeeded, expected at most 1"):
        fake_mcp_server.assert_no_reregistration()  # the measured behaviour: one registered client per store
    fake_mcp_server.assert_no_reregistration(clients=2)


# --- the browser itself ----------------------------------------------------------------------------------------


@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_an_authorization_refused_reaches_fastmcp_at_once(fake_mcp_server, monkeypatch):
    headless = HeadlessOAuth()
    monkeypatch.setattr(webbrowser, "open", headless.open)
    fake_mcp_server.on(http_method="GET").nth(4).respond(400)  # the browser's GET /authorize (after FastMCP's own)
    with pytest.raises(RuntimeError, match=r"Authorization failed: HeadlessOAuth: GET /authorize answered 400"):
        async with asyncio.timeout(10), Client(fake_mcp_server.url, auth="oauth") as client:
            await client.call_tool("echo", {"text": "a"})

    body = '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request"}}'
    assert headless.failures == [f"GET /authorize answered 400 {body!r}, not a redirect with a code"]


def test_the_browser_outside_an_event_loop_names_the_handlers() -> None:
    with pytest.raises(RuntimeError, match=r"outside an asyncio event loop.*headless\.redirect_handler"):
        HeadlessOAuth().open("http://127.0.0.1:1/authorize")


@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_fastmcps_own_test_provider_meets_the_same_server(fake_mcp_server, tmp_path):
    from fastmcp.utilities.tests import HeadlessOAuth as FastMCPHeadlessOAuth  # no browser, no callback server

    auth = FastMCPHeadlessOAuth(fake_mcp_server.url, token_storage=token_store(tmp_path))
    async with asyncio.timeout(10), Client(fake_mcp_server.url, auth=auth) as client:
        await client.call_tool("echo", {"text": "a"})

    assert auth_paths(fake_mcp_server) == [p for i, p in enumerate(LOGIN) if i != 3]  # one GET /authorize
    assert_all_pass(fake_mcp_server)
