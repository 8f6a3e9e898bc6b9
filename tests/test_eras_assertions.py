"""What "reuse" means in the 2026-07-28 era, asserted: discover once per client, list results served from the
client's cache while ``ttlMs`` holds, no session id sent or kept, a handshake-only client against a modern-only
server failing clearly, and the HTTP client built once (issue 10). Each helper fires and passes with a real client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from _sdk import INNER_ARGS, MCP2, sdk_session

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer, HTTPClientCounter

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)
MODERN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


async def _list_tools(url: str, *, times: int = 1, **kwargs: Any) -> None:
    from mcp import Client

    async with Client(url, **kwargs) as client:
        for _ in range(times):
            await client.list_tools()


# --- discover once per client -------------------------------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
async def test_discover_once_passes_for_one_client_making_many_calls(fake_mcp_server: FakeMCPServer) -> None:
    await _list_tools(fake_mcp_server.url, times=3)
    fake_mcp_server.assert_discover_once()


@needs_mcp2
@pytest.mark.asyncio
async def test_discover_once_fires_for_a_client_built_per_call(fake_mcp_server: FakeMCPServer) -> None:
    for _ in range(3):
        await _list_tools(fake_mcp_server.url)
    with pytest.raises(AssertionError, match=r"assert_discover_once\(clients=1\): 3 server/discovers arrived"):
        fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_discover_once(clients=3)


def test_discover_once_failure_draws_the_era_of_every_exchange(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        f"""
        import httpx

        HEADERS = {MODERN_HEADERS!r}
        META = {META!r}

        def test_probes(fake_mcp_server):
            for i in range(2):
                body = {{"jsonrpc": "2.0", "id": i, "method": "server/discover", "params": {{"_meta": META}}}}
                httpx.post(fake_mcp_server.url, json=body, headers={{**HEADERS, "mcp-method": "server/discover"}})
            fake_mcp_server.assert_discover_once()
        """
    )
    result = pytester.runpytest_inprocess(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*assert_discover_once(clients=1): 2 server/discovers arrived, expected 1.",
            "*client ── server/discover ──▶ server   200 [[]modern[]]",
            "*client ── server/discover ──▶ server   200 [[]modern[]]   ← probe 2 of 2",
            "*Hint: the client probes again per call or per task*",
        ]
    )


# --- list results cached while ttlMs holds -------------------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
async def test_list_cache_passes_when_the_client_reuses_a_fresh_answer(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=60_000)
    await _list_tools(fake_mcp_server.url, times=3)
    assert len(fake_mcp_server.journal.get_requests(method="tools/list")) == 1
    fake_mcp_server.assert_list_results_cached()


@needs_mcp2
@pytest.mark.asyncio
async def test_list_cache_passes_when_answers_are_not_cacheable(fake_mcp_server: FakeMCPServer) -> None:
    await _list_tools(fake_mcp_server.url, times=2)  # ttlMs 0: listing again is right
    fake_mcp_server.assert_list_results_cached()


@needs_mcp2
@pytest.mark.asyncio
async def test_list_cache_fires_when_each_call_builds_a_new_client(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=60_000)
    await _list_tools(fake_mcp_server.url)
    await _list_tools(fake_mcp_server.url)  # a new Client: a new, empty cache
    with pytest.raises(AssertionError) as caught:
        fake_mcp_server.assert_list_results_cached()
    message = str(caught.value)
    assert "1 list request went to the server while the last answer was still fresh" in message
    assert "whose answer was fresh 60000ms" in message


# --- no session ids ------------------------------------------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
async def test_no_session_ids_passes_for_a_modern_client(fake_mcp_server: FakeMCPServer) -> None:
    await _list_tools(fake_mcp_server.url, times=2)
    fake_mcp_server.assert_no_session_ids()


@pytest.mark.asyncio
async def test_no_session_ids_fires_for_a_client_sending_a_kept_session_id(fake_mcp_server: FakeMCPServer) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
        headers = {**MODERN_HEADERS, "mcp-method": "tools/list", "mcp-session-id": "0123456789abcdef"}
        response = await http.post(fake_mcp_server.url, json=body, headers=headers)
    if not MCP2:
        pytest.skip("flavour mcp1 serves no modern era")
    assert response.status_code == 200  # ignored by the server, as the 2.x server does
    assert "mcp-session-id" not in response.headers
    with pytest.raises(AssertionError, match=r"1 modern-era request carried Mcp-Session-Id"):
        fake_mcp_server.assert_no_session_ids()


@needs_mcp2
@pytest.mark.asyncio
async def test_no_session_ids_fires_when_the_client_never_went_modern(fake_mcp_server: FakeMCPServer) -> None:
    await _list_tools(fake_mcp_server.url, mode="legacy")
    with pytest.raises(AssertionError, match=r"no exchange was answered in the 2026-07-28 era"):
        fake_mcp_server.assert_no_session_ids()


# --- a handshake-only client against a modern-only server ----------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(**({"era": "modern"} if MCP2 else {}))
async def test_a_handshake_only_client_stops_at_the_refusal_of_a_modern_only_server(
    fake_mcp_server: FakeMCPServer,
) -> None:
    if not MCP2:
        fake_mcp_server.on("initialize").refuse_initialize()
    with pytest.raises(BaseException):  # noqa: B017 - 2.x MCPError / 1.x HTTPStatusError, in groups
        async with sdk_session(fake_mcp_server.url):
            pass
    fake_mcp_server.assert_stopped_after_era_refusal()


@pytest.mark.asyncio
async def test_era_refusal_fires_for_a_client_that_carries_on(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("initialize").refuse_initialize()
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(fake_mcp_server.url, json=init, headers=headers)).status_code == 400
        await http.post(fake_mcp_server.url, json=init, headers=headers)  # retries the handshake anyway
    with pytest.raises(AssertionError, match=r"1 request followed the refused initialize"):
        fake_mcp_server.assert_stopped_after_era_refusal()


def test_era_refusal_fires_when_nothing_was_refused(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(AssertionError, match=r"no initialize was refused for its era"):
        fake_mcp_server.assert_stopped_after_era_refusal()


# --- the HTTP client built once (the era-neutral counter) ----------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("per_call", [False, True], ids=["shared", "per-call"])
async def test_the_http_client_is_built_once_for_modern_clients(
    fake_mcp_server: FakeMCPServer, mcp_http_clients: HTTPClientCounter, per_call: bool
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient() as shared:
        for _ in range(2):
            http = httpx2.AsyncClient() if per_call else shared
            try:
                async with Client(streamable_http_client(fake_mcp_server.url, http_client=http)) as client:
                    await client.list_tools()
            finally:
                if per_call:
                    await http.aclose()
    assert {e.era for e in fake_mcp_server.journal} == {"modern"}
    if per_call:
        with pytest.raises(AssertionError):
            mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    else:
        mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
