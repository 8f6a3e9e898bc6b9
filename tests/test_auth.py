"""The authorization server beside the fake (``auth=True``): the SDK's OAuth clients through it, and its wire."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from _sdk import MCP2
from pytest_fake_mcp import FakeMCPServer, HeadlessOAuth, ScriptError

if MCP2:
    import httpx2 as http_lib
else:
    import httpx as http_lib  # type: ignore[no-redef]

AUTH = pytest.mark.fake_mcp_server(auth=True)


@contextlib.asynccontextmanager
async def oauth_session(url: str, auth: Any) -> AsyncIterator[ClientSession]:
    """An initialized SDK session whose HTTP client carries ``auth`` (an ``OAuthClientProvider``)."""
    async with (
        asyncio.timeout(15),
        http_lib.AsyncClient(auth=auth) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


@AUTH
@pytest.mark.asyncio
async def test_sdk_oauth_provider_logs_in_headlessly_and_calls_a_tool(fake_mcp_server: FakeMCPServer) -> None:
    async with oauth_session(fake_mcp_server.url, HeadlessOAuth().provider(fake_mcp_server.url)) as session:
        result = await session.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"  # type: ignore[union-attr]
    paths = [(e.http_method, e.path, e.status) for e in fake_mcp_server.journal.exchanges][:7]
    assert paths == [
        ("POST", "/mcp", 401),
        ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", "/.well-known/oauth-authorization-server", 200),
        ("POST", "/register", 201),
        ("GET", "/authorize", 302),
        ("POST", "/token", 200),
        ("POST", "/mcp", 200),
    ]


@AUTH
@pytest.mark.asyncio
async def test_the_stand_in_browser_is_listed_but_never_counted_as_an_http_client(
    fake_mcp_server: FakeMCPServer, mcp_http_clients: Any
) -> None:
    from pytest_fake_mcp.client import ReusingSessionClient

    provider = HeadlessOAuth().provider(fake_mcp_server.url)
    async with (
        asyncio.timeout(15),
        http_lib.AsyncClient(auth=provider) as http,
        ReusingSessionClient(fake_mcp_server.url, http_client=http) as client,
    ):
        await client.call_tool("echo", {"text": "x"})
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)  # the browser GET /authorize, uncounted
    assert [r.role for r in mcp_http_clients.created] == [
        None,
        "HeadlessOAuth's stand-in browser, not the client under test",
    ]
    with pytest.raises(AssertionError, match="not counted: HeadlessOAuth's stand-in browser"):
        mcp_http_clients.assert_created(2)


def _tokens(server: FakeMCPServer) -> list[tuple[Any, int | None]]:
    return [(e.request_body, e.status) for e in server.journal.exchanges if e.path == "/token"]


@AUTH
@pytest.mark.asyncio
async def test_sdk_reauthorizes_once_when_concurrent_calls_meet_an_expired_token(
    fake_mcp_server: FakeMCPServer,
) -> None:
    """Both SDK lines hold one lock over the whole request: the calls go one by one, one new authorization."""
    fake_mcp_server.on("tools/call").expire_tokens()
    async with oauth_session(fake_mcp_server.url, HeadlessOAuth().provider(fake_mcp_server.url)) as session:
        await asyncio.gather(*(session.call_tool("echo", {"text": t}) for t in "abc"))
    assert _tokens(fake_mcp_server) == [({"grant_type": "authorization_code"}, 200)] * 2  # a 401: no refresh
    calls = [e.status for e in fake_mcp_server.journal.exchanges if e.rpc_method == "tools/call"]
    assert calls == [401, 200, 200, 200]
    fake_mcp_server.assert_single_flight_refresh()
    fake_mcp_server.assert_no_refused_token_reused()
    fake_mcp_server.assert_no_reregistration()
    fake_mcp_server.assert_session_kept_across_auth()


@AUTH
@pytest.mark.asyncio
async def test_sdk_steps_up_on_insufficient_scope_and_retries(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").insufficient_scope("admin")
    async with oauth_session(fake_mcp_server.url, HeadlessOAuth().provider(fake_mcp_server.url)) as session:
        await session.call_tool("echo", {"text": "a"})
    calls = [e for e in fake_mcp_server.journal.exchanges if e.rpc_method == "tools/call"]
    assert [e.status for e in calls] == [403, 200]
    assert calls[0].request_headers["authorization"] != calls[1].request_headers["authorization"]
    fake_mcp_server.assert_session_kept_across_auth()


@AUTH
@pytest.mark.asyncio
async def test_sdk_does_not_reauthorize_on_a_404(fake_mcp_server: FakeMCPServer) -> None:
    """A 404 is session loss, not a token problem: no grant follows it (the SDK then fails the call)."""
    fake_mcp_server.on("tools/call").drop_session()
    with pytest.raises(Exception):  # noqa: B017  # the SDK line's own error, in an ExceptionGroup
        async with oauth_session(fake_mcp_server.url, HeadlessOAuth().provider(fake_mcp_server.url)) as session:
            await session.call_tool("echo", {"text": "a"})
    assert _tokens(fake_mcp_server) == [({"grant_type": "authorization_code"}, 200)]
    fake_mcp_server.assert_session_kept_across_auth()


@AUTH
@pytest.mark.asyncio
async def test_sdk_fails_the_login_when_registration_is_refused(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on().refuse_registration()
    with pytest.raises(BaseException, match="unhandled errors") as info:
        async with oauth_session(fake_mcp_server.url, HeadlessOAuth().provider(fake_mcp_server.url)):
            pass
    assert "Client registration refused" in repr(info.value.exceptions)  # type: ignore[attr-defined]


# --- the wire, as measured on the SDK servers ----------------------------------------------------------------

FLAVOURS = [pytest.param(f, marks=pytest.mark.fake_mcp_server(auth=True, flavour=f), id=f) for f in ("mcp2", "mcp1")]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_endpoint_challenges_a_request_without_a_good_token(fake_mcp_server: FakeMCPServer, flavour: str) -> None:
    for headers in ({}, {"authorization": "Bearer nope"}):
        answer = httpx.post(fake_mcp_server.url, json={}, headers=headers)
        assert answer.status_code == 401
        assert answer.content == b'{"error": "invalid_token", "error_description": "Authentication required"}'
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["www-authenticate"] == (
            'Bearer error="invalid_token", error_description="Authentication required", '
            f'resource_metadata="{fake_mcp_server.origin}/.well-known/oauth-protected-resource/mcp"'
        )
    assert fake_mcp_server.sessions == ()  # refused before the transport: no session minted


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_metadata_documents_match_the_sdk_servers(fake_mcp_server: FakeMCPServer, flavour: str) -> None:
    origin = fake_mcp_server.origin
    issuer = origin + ("/" if flavour == "mcp1" else "")
    prm = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp")
    assert prm.status_code == 200
    assert prm.headers["cache-control"] == "public, max-age=3600"
    assert prm.json() == {
        "resource": f"{origin}/mcp",
        "authorization_servers": [issuer],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }
    asm = httpx.get(f"{origin}/.well-known/oauth-authorization-server")
    assert asm.json() == {
        "issuer": issuer,
        "authorization_endpoint": f"{origin}/authorize",
        "token_endpoint": f"{origin}/token",
        "registration_endpoint": f"{origin}/register",
        "scopes_supported": ["mcp"],
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
    }
    for missing in ("/.well-known/oauth-protected-resource", "/.well-known/openid-configuration"):
        assert httpx.get(origin + missing).status_code == 404


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_registration_and_its_refusals(fake_mcp_server: FakeMCPServer, flavour: str) -> None:
    origin = fake_mcp_server.origin
    answer = httpx.post(f"{origin}/register", json={"redirect_uris": ["http://localhost:3030/cb"], "client_name": "x"})
    assert answer.status_code == 201
    info = answer.json()
    assert info["scope"] == "mcp"
    assert info["token_endpoint_auth_method"] == "client_secret_post"
    assert ("client_secret_expires_at" in info) is (flavour == "mcp2")
    bogus = httpx.post(f"{origin}/register", json={"redirect_uris": ["http://x/cb"], "scope": "bogus"})
    assert bogus.status_code == 400
    assert (
        bogus.content
        == b'{"error":"invalid_client_metadata","error_description":"Requested scopes are not valid: bogus"}'
    )
    empty = httpx.post(f"{origin}/register", json={})
    assert empty.json() == {"error": "invalid_client_metadata", "error_description": "redirect_uris: Field required"}


_CB = ["http://localhost:3030/cb"]
_REGISTRATIONS: dict[str, dict[str, Any]] = {
    "confidential": {"redirect_uris": _CB, "client_name": "x"},
    "scope-mcp": {"redirect_uris": _CB, "client_name": "x", "scope": "mcp"},
    "scope-empty": {"redirect_uris": _CB, "client_name": "x", "scope": ""},
    "public": {  # FastMCP 4's registration
        "redirect_uris": ["http://localhost:3031/callback"],
        "client_name": "FastMCP Client",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "scope": "",
        "token_endpoint_auth_method": "none",
    },
    "extra-fields": {
        "client_id": "mine",
        "client_secret": "mine",
        "unknown": 1,
        "software_version": "1.0",
        "software_id": "sw",
        "jwks": {"keys": []},
        "contacts": ["a@b.c"],
        "logo_uri": "https://example.com/logo.png",
        "client_uri": "https://example.com/home",
        "tos_uri": "",
        "client_name": "\u00e9 \u2603",
        "application_type": "web",
        "redirect_uris": _CB,
        "token_endpoint_auth_method": "client_secret_basic",
    },
}
_CONF2 = b'"redirect_uris":["http://localhost:3030/cb"],"token_endpoint_auth_method":"client_secret_post",'
_CONF1 = _CONF2 + b'"grant_types":["authorization_code","refresh_token"],"response_types":["code"],'
_CONF2 += b'"grant_types":["authorization_code","refresh_token"],"application_type":"native",'
_SECRET2 = b'"client_id":"<id>","client_secret":"<secret>","client_id_issued_at":<now>,"client_secret_expires_at":0}'
_SECRET1 = b'"client_id":"<id>","client_secret":"<secret>","client_id_issued_at":<now>}'
_EXTRA = (
    b'"client_name":"\xc3\xa9 \xe2\x98\x83","client_uri":"https://example.com/home","logo_uri":"https://example.com/logo.png",'
    b'"contacts":["a@b.c"],"jwks":{"keys":[]},"software_id":"sw","software_version":"1.0",'
)
_MEASURED: dict[str, dict[str, bytes]] = {  # raw 201 bodies of MCPServer (mcp 2.3) and FastMCP (mcp 1.30)
    "mcp2": {
        "confidential": b'{"response_types":["code"],"scope":"mcp","client_name":"x",' + _CONF2 + _SECRET2,
        "scope-mcp": b'{"response_types":["code"],"scope":"mcp","client_name":"x",' + _CONF2 + _SECRET2,
        "scope-empty": b'{"response_types":["code"],"client_name":"x",' + _CONF2 + _SECRET2,
        "public": b'{"response_types":["code"],"client_name":"FastMCP Client",'
        b'"redirect_uris":["http://localhost:3031/callback"],"token_endpoint_auth_method":"none",'
        b'"grant_types":["authorization_code","refresh_token"],"application_type":"native",'
        b'"client_id":"<id>","client_id_issued_at":<now>}',
        "extra-fields": b'{"response_types":["code"],"scope":"mcp",'
        + _EXTRA
        + b'"redirect_uris":["http://localhost:3030/cb"],'
        b'"token_endpoint_auth_method":"client_secret_basic","grant_types":["authorization_code","refresh_token"],'
        b'"application_type":"web",' + _SECRET2,
    },
    "mcp1": {
        "confidential": b"{" + _CONF1 + b'"scope":"mcp","client_name":"x",' + _SECRET1,
        "scope-mcp": b"{" + _CONF1 + b'"scope":"mcp","client_name":"x",' + _SECRET1,
        "scope-empty": b"{" + _CONF1 + b'"scope":"","client_name":"x",' + _SECRET1,
        "public": b'{"redirect_uris":["http://localhost:3031/callback"],"token_endpoint_auth_method":"none",'
        b'"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"scope":"",'
        b'"client_name":"FastMCP Client","client_id":"<id>","client_id_issued_at":<now>}',
        "extra-fields": b'{"redirect_uris":["http://localhost:3030/cb"],"token_endpoint_auth_method":"client_secret_basic",'
        b'"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"scope":"mcp",'
        + _EXTRA
        + _SECRET1,
    },
}
_UUID4 = rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


@pytest.mark.parametrize("case", list(_REGISTRATIONS))
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_registration_answer_matches_the_sdk_servers_byte_for_byte(
    fake_mcp_server: FakeMCPServer, flavour: str, case: str
) -> None:
    before = int(time.time())
    answer = httpx.post(f"{fake_mcp_server.origin}/register", json=_REGISTRATIONS[case])
    after = int(time.time())
    assert answer.status_code == 201
    headers = {k: v for k, v in answer.headers.items() if k not in ("date", "server")}  # the order aside
    assert headers == {"content-length": str(len(answer.content)), "content-type": "application/json", "vary": "Origin"}
    body, ids = re.subn(rb'"client_id":"' + _UUID4 + rb'"', b'"client_id":"<id>"', answer.content)
    body, minted = re.subn(rb'"client_secret":"[0-9a-f]{64}"', b'"client_secret":"<secret>"', body)
    issued_at = int(re.findall(rb'"client_id_issued_at":(\d+)', body)[0])
    body = re.sub(rb'"client_id_issued_at":\d+', b'"client_id_issued_at":<now>', body)
    assert body == _MEASURED[flavour][case]
    assert (ids, minted) == (1, int(case != "public"))
    assert before <= issued_at <= after


_PKJWT = "token_endpoint_auth_method 'private_key_jwt' is not supported"
_GRANTS2 = "grant_types must include 'authorization_code'"
_GRANTS1 = "grant_types must be authorization_code and refresh_token"
_CODE = "response_types must include 'code' for authorization_code grant"
_EMPTY = "redirect_uris: List should have at least 1 item after validation, not 0"
_METHOD = (
    "token_endpoint_auth_method: Input should be 'none', 'client_secret_post', 'client_secret_basic'"
    " or 'private_key_jwt'"
)
_APP = "application_type: Input should be 'web' or 'native'"
_JWT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_REFUSALS: list[tuple[Any, str | None, str | None]] = [  # (body, mcp2's error_description, mcp1's; None: 201)
    ({"redirect_uris": _CB, "token_endpoint_auth_method": "private_key_jwt"}, _PKJWT, None),
    (
        {"redirect_uris": _CB, "token_endpoint_auth_method": "private_key_jwt", "scope": "bogus"},
        _PKJWT,
        "Requested scopes are not valid: bogus",
    ),
    ({"redirect_uris": _CB, "grant_types": ["authorization_code"]}, None, _GRANTS1),
    ({"redirect_uris": _CB, "grant_types": ["refresh_token"]}, _GRANTS2, _GRANTS1),
    ({"redirect_uris": _CB, "grant_types": []}, _GRANTS2, _GRANTS1),
    (
        {"redirect_uris": _CB, "grant_types": ["authorization_code", "refresh_token", _JWT]},
        f"grant_types must not include '{_JWT}'; the identity-assertion grant requires a pre-registered client",
        None,
    ),
    ({"redirect_uris": _CB, "response_types": ["token"]}, _CODE, _CODE),
    ({"redirect_uris": _CB, "scope": "bogus", "grant_types": ["x"]}, *["Requested scopes are not valid: bogus"] * 2),
    ({"redirect_uris": _CB, "grant_types": ["x"], "response_types": ["token"]}, _GRANTS2, _GRANTS1),
    ({"redirect_uris": _CB, "token_endpoint_auth_method": "foo"}, _METHOD, _METHOD),
    ({"redirect_uris": []}, _EMPTY, _EMPTY),
    ({"redirect_uris": _CB, "application_type": None}, _APP, None),
    ({"redirect_uris": _CB, "application_type": "desktop"}, _APP, None),
    (
        {"redirect_uris": [], "token_endpoint_auth_method": "foo", "application_type": "x"},
        f"{_EMPTY}\n{_METHOD}\n{_APP}",
        f"{_EMPTY}\n{_METHOD}",
    ),
    ([], ": Input should be an object", ": Input should be a valid dictionary or instance of OAuthClientMetadata"),
]


@pytest.mark.parametrize("refusal", range(len(_REFUSALS)))
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_registration_refuses_what_the_sdk_servers_refuse(
    fake_mcp_server: FakeMCPServer, flavour: str, refusal: int
) -> None:
    body, *texts = _REFUSALS[refusal]
    text = texts[0] if flavour == "mcp2" else texts[1]
    answer = httpx.post(f"{fake_mcp_server.origin}/register", json=body)
    if text is None:
        assert answer.status_code == 201
        return
    assert answer.status_code == 400
    expected = {"error": "invalid_client_metadata", "error_description": text}
    assert answer.content == json.dumps(expected, separators=(",", ":")).encode()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_client_registered_with_an_empty_scope_is_granted_the_required_ones(
    fake_mcp_server: FakeMCPServer, flavour: str
) -> None:
    origin = fake_mcp_server.origin
    info = httpx.post(f"{origin}/register", json=_REGISTRATIONS["scope-empty"]).json()
    challenge = "CrlVwe1WSHWuTQYh3iczmx3aS-faRx6C92k9_hNxl4A"  # S256 of "v" * 50
    query = {"response_type": "code", "client_id": info["client_id"], "code_challenge": challenge, "state": "s"}
    code = httpx.get(f"{origin}/authorize", params=query).headers["location"].split("code=")[1].split("&")[0]
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": "v" * 50}
    form |= {"client_id": info["client_id"], "client_secret": info["client_secret"]}
    token = httpx.post(f"{origin}/token", data=form)
    assert token.json()["scope"] == "mcp"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_code_grant_checks_pkce_resource_and_reuse_and_refresh_rotates(
    fake_mcp_server: FakeMCPServer, flavour: str
) -> None:
    from _auth_clients import REDIRECT, OAuthState

    origin = fake_mcp_server.origin
    state = OAuthState(origin=origin, resource=fake_mcp_server.url)
    info = httpx.post(f"{origin}/register", json={"redirect_uris": [REDIRECT]}).json()
    state.client_id, state.client_secret = info["client_id"], info["client_secret"]
    challenge = "CrlVwe1WSHWuTQYh3iczmx3aS-faRx6C92k9_hNxl4A"  # S256 of "v" * 50
    query = {"response_type": "code", "client_id": state.client_id, "redirect_uri": REDIRECT, "state": "st1"}
    no_pkce = httpx.get(f"{origin}/authorize", params=query)
    assert no_pkce.status_code == 302
    assert no_pkce.headers["location"] == (
        f"{REDIRECT}?error=invalid_request&error_description=code_challenge%3A+Field+required&state=st1"
    )
    elsewhere = httpx.get(f"{origin}/authorize", params={**query, "code_challenge": challenge, "resource": "http://x/"})
    assert "error=invalid_target" in elsewhere.headers["location"]
    unknown = httpx.get(f"{origin}/authorize", params={**query, "client_id": "nobody", "code_challenge": challenge})
    assert unknown.status_code == 400
    assert unknown.json() == {
        "error": "invalid_request",
        "error_description": "Client ID 'nobody' not found",
        "state": "st1",
    }
    ok = httpx.get(f"{origin}/authorize", params={**query, "code_challenge": challenge, "resource": state.resource})
    assert ok.status_code == 302
    assert ok.headers["cache-control"] == "no-store"
    code = ok.headers["location"].split("code=")[1].split("&")[0]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT}
    form |= {"client_id": state.client_id, "client_secret": state.client_secret}
    wrong = httpx.post(f"{origin}/token", data={**form, "code_verifier": "w" * 50})
    assert wrong.json() == {"error": "invalid_grant", "error_description": "incorrect code_verifier"}
    good = httpx.post(f"{origin}/token", data={**form, "code_verifier": "v" * 50, "resource": state.resource})
    assert good.status_code == 200
    assert (good.headers["cache-control"], good.headers["pragma"]) == ("no-store", "no-cache")
    body = good.json()
    assert (body["token_type"], body["expires_in"], body["scope"]) == ("Bearer", 3600, "mcp")
    again = httpx.post(f"{origin}/token", data={**form, "code_verifier": "v" * 50})
    assert again.json() == {"error": "invalid_grant", "error_description": "authorization code does not exist"}
    secret = httpx.post(f"{origin}/token", data={**form, "client_secret": "bad", "code_verifier": "v" * 50})
    assert secret.status_code == 401
    assert secret.json()["error"] == ("invalid_client" if flavour == "mcp2" else "unauthorized_client")
    refresh_form = {"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}
    refresh_form |= {"client_id": state.client_id, "client_secret": state.client_secret}
    wider = httpx.post(f"{origin}/token", data={**refresh_form, "scope": "admin mcp"})
    assert wider.json() == {
        "error": "invalid_scope",
        "error_description": "cannot request scope `admin` not provided by refresh token",
    }
    assert httpx.post(f"{origin}/token", data=refresh_form).status_code == 200
    reused = httpx.post(f"{origin}/token", data=refresh_form)  # rotation: a refresh token is good for one refresh
    assert reused.json() == {"error": "invalid_grant", "error_description": "refresh token does not exist"}


@pytest.mark.fake_mcp_server(auth=True)
def test_a_token_for_the_endpoint_lets_the_request_through(fake_mcp_server: FakeMCPServer) -> None:
    async def token() -> str:
        from _auth_clients import OAuthState, login

        state = OAuthState(origin=fake_mcp_server.origin, resource=fake_mcp_server.url)
        async with httpx.AsyncClient(timeout=10) as http:
            await login(http, state)
        return state.tokens.access

    bearer = asyncio.run(token())
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    answer = httpx.post(
        fake_mcp_server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers={"authorization": f"Bearer {bearer}", "accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 200
    assert "mcp-session-id" in answer.headers


def test_without_auth_the_fake_serves_no_auth_paths_and_needs_no_token(fake_mcp_server: FakeMCPServer) -> None:
    origin = fake_mcp_server.origin
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
        assert httpx.get(origin + path).status_code == 404
    assert httpx.post(f"{origin}/token", data={}).status_code == 404
    assert fake_mcp_server.journal.exchanges == ()  # answered by the router, as before: not journaled


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"auth_scopes": "mcp"}, r"auth_scopes='mcp' must be a tuple of scope names"),
        ({"auth_scopes": 5}, r"auth_scopes=5 must be a tuple of scope names, e.g. \('mcp',\)"),
        ({"auth_scopes": ("mcp read",)}, r"auth_scopes=\('mcp read',\) must be a tuple of scope names"),
        ({"token_lifetime": 0}, r"token_lifetime=0 must be > 0 seconds"),
    ],
)
def test_bad_auth_options_name_the_fix(options: dict[str, Any], match: str) -> None:
    from pytest_fake_mcp import FakeMCPOptions, ScriptError

    with pytest.raises(ScriptError, match=match):
        FakeMCPOptions(auth=True, **options)


@pytest.mark.asyncio
async def test_headless_oauth_says_what_went_wrong(fake_mcp_server: FakeMCPServer) -> None:
    headless = HeadlessOAuth()
    with pytest.raises(RuntimeError, match="callback_handler ran before redirect_handler"):
        await headless.callback_handler()
    with pytest.raises(RuntimeError, match="not a redirect with a code; the server must approve without a browser"):
        await headless.redirect_handler(f"{fake_mcp_server.origin}/authorize")  # no auth=True: a 404
    headless.redirects.append("http://localhost:3030/callback?error=access_denied&error_description=no")
    with pytest.raises(RuntimeError, match="the authorization server refused: no"):
        await headless.callback_handler()
    assert repr(headless) == "HeadlessOAuth(redirects=1)"


def _oversized(headers: dict[str, str], url: str) -> httpx.Response:
    """A POST of a 5 MiB initialize (over the 2.x SDK's 4 MiB limit) with ``headers``."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {**init, "pad": "x" * (5 << 20)}}
    return httpx.post(url, json=body, headers={"accept": "application/json, text/event-stream", **headers})


@pytest.mark.fake_mcp_server(auth=True)
def test_an_oversized_body_without_a_good_token_gets_401_before_413(fake_mcp_server: FakeMCPServer) -> None:
    """Measured on mcp 2.3 and 1.30: the auth middleware answers before the transport reads the body."""
    for headers in ({}, {"authorization": "Bearer nope"}):
        answer = _oversized(headers, fake_mcp_server.url)
        assert answer.status_code == 401
        assert answer.content == b'{"error": "invalid_token", "error_description": "Authentication required"}'
        assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert fake_mcp_server.sessions == ()


@pytest.mark.fake_mcp_server(auth=True)
def test_an_oversized_body_with_a_good_token_gets_the_same_413_as_without_auth(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: Any
) -> None:
    async def token() -> str:
        from _auth_clients import OAuthState, login

        state = OAuthState(origin=fake_mcp_server.origin, resource=fake_mcp_server.url)
        async with httpx.AsyncClient(timeout=10) as http:
            await login(http, state)
        return state.tokens.access

    authorized = _oversized({"authorization": f"Bearer {asyncio.run(token())}"}, fake_mcp_server.url)
    with fake_mcp_server_factory.lease() as open_server:
        unguarded = _oversized({}, open_server.url)
    assert (authorized.status_code, authorized.content) == (413, b"Request body too large")
    assert [(k, v) for k, v in authorized.headers.items() if k not in ("date", "server")] == [
        (k, v) for k, v in unguarded.headers.items() if k not in ("date", "server")
    ]
    assert unguarded.content == authorized.content


@AUTH
@pytest.mark.asyncio
async def test_a_minted_token_serves_a_client_with_a_static_bearer_header_until_it_expires(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from pytest_fake_mcp.client import ReusingSessionClient

    token = fake_mcp_server.issue_token()  # every scope the server lists: ("mcp",)
    headers = {"Authorization": f"Bearer {token}"}
    async with asyncio.timeout(15), ReusingSessionClient(fake_mcp_server.url, headers=headers) as client:
        result = await client.call_tool("echo", {"text": "static"})
        assert result.content[0].text == "static"
        fake_mcp_server.expire_tokens()
        with pytest.raises(Exception):  # noqa: B017 - each SDK line words the 401 its own way
            await client.call_tool("echo", {"text": "after"})
    statuses = [e.status for e in fake_mcp_server.journal.exchanges if e.path == "/mcp" and e.http_method == "POST"]
    assert statuses[-1] == 401
    assert [e for e in fake_mcp_server.journal.exchanges if e.path == "/token"] == []  # no grant in the journal


@pytest.mark.fake_mcp_server(auth=True)
def test_minting_a_token_names_the_fix_for_a_scope_the_server_does_not_list(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"'admin' is not a scope this server lists: \('mcp',\); .*auth_scopes"):
        fake_mcp_server.issue_token(scopes=("admin",))
    with pytest.raises(ScriptError, match=r"must be a sequence of scope names"):
        fake_mcp_server.issue_token(scopes="mcp")  # type: ignore[arg-type]


def test_minting_a_token_without_the_authorization_server_names_the_switch(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"issue_token\(\) needs the authorization server.*auth=True"):
        fake_mcp_server.issue_token()
