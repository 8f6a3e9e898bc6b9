"""How-to: the authorization server beside the fake (docs/authorization.md). Each region is shown in that page."""

from __future__ import annotations

# --8<-- [start:imports]
import asyncio

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pytest_fake_mcp import HeadlessOAuth

try:
    import httpx2 as httpx  # the HTTP client mcp 2.x speaks
except ImportError:
    import httpx  # mcp 1.x


# --8<-- [end:imports]


# --8<-- [start:login]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_the_sdk_client_logs_in_and_calls_a_tool(fake_mcp_server):
    auth = HeadlessOAuth().provider(fake_mcp_server.url)  # the SDK's OAuthClientProvider, no browser
    async with (
        asyncio.timeout(10),
        httpx.AsyncClient(auth=auth) as http,
        streamable_http_client(fake_mcp_server.url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()  # 401, metadata, registration, authorization, token, then initialize
        result = await session.call_tool("echo", {"text": "hi"})

    assert result.content[0].text == "hi"
    assert [e.path for e in fake_mcp_server.get_requests(http_method="GET")][:3] == [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/authorize",
    ]


# --8<-- [end:login]


# --8<-- [start:expiry]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_concurrent_calls_meeting_an_expired_token_renew_it_once(fake_mcp_server):
    fake_mcp_server.on("tools/call").nth(2).expire_tokens()  # the 2nd call meets the 401
    auth = HeadlessOAuth().provider(fake_mcp_server.url)
    async with (
        asyncio.timeout(10),
        httpx.AsyncClient(auth=auth) as http,
        streamable_http_client(fake_mcp_server.url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        await session.call_tool("echo", {"text": "a"})
        await asyncio.gather(*(session.call_tool("echo", {"text": t}) for t in "bcd"))

    fake_mcp_server.assert_single_flight_refresh()  # one new token for the expiry, not one per 401
    fake_mcp_server.assert_no_refused_token_reused()
    fake_mcp_server.assert_no_reregistration()
    fake_mcp_server.assert_session_kept_across_auth()  # a 401 is not session loss


# --8<-- [end:expiry]


# --8<-- [start:step-up]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_a_403_insufficient_scope_makes_the_client_step_up(fake_mcp_server):
    fake_mcp_server.on("tools/call").insufficient_scope("admin")  # 403 once; 'admin' required from now on
    auth = HeadlessOAuth().provider(fake_mcp_server.url)
    async with (
        asyncio.timeout(10),
        httpx.AsyncClient(auth=auth) as http,
        streamable_http_client(fake_mcp_server.url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        await session.call_tool("echo", {"text": "a"})  # 403, a new authorization with 'admin', the retry

    assert [e.status for e in fake_mcp_server.get_requests(method="tools/call")] == [403, 200]
    fake_mcp_server.assert_session_kept_across_auth()


# --8<-- [end:step-up]


# --8<-- [start:registration-refused]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_a_refused_registration_fails_the_login(fake_mcp_server):
    fake_mcp_server.on().refuse_registration()  # 400 invalid_client_metadata at POST /register
    auth = HeadlessOAuth().provider(fake_mcp_server.url)
    with pytest.raises(BaseException, match="unhandled errors") as raised:  # the SDK's task group
        async with (
            asyncio.timeout(10),
            httpx.AsyncClient(auth=auth) as http,
            streamable_http_client(fake_mcp_server.url, http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()

    assert "Client registration refused" in repr(raised.value.exceptions)


# --8<-- [end:registration-refused]


# --8<-- [start:static-token]
@pytest.mark.fake_mcp_server(auth=True)
@pytest.mark.asyncio
async def test_a_client_with_a_static_bearer_header(fake_mcp_server):
    token = fake_mcp_server.issue_token()  # every scope in auth_scopes; lives token_lifetime
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        asyncio.timeout(10),
        httpx.AsyncClient(headers=headers) as http,
        streamable_http_client(fake_mcp_server.url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        result = await session.call_tool("echo", {"text": "hi"})

    assert result.content[0].text == "hi"
    assert {e.path for e in fake_mcp_server.journal.exchanges} == {"/mcp"}  # no OAuth flow at all


# --8<-- [end:static-token]
