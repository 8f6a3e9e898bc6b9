"""How-to: the faults of the 2026-07-28 era, one test each (docs/faults.md); most need the mcp 2.x ``Client()``."""

from __future__ import annotations

import importlib.metadata

import pytest
from _howto_sdk import sdk_session

needs_mcp2 = pytest.mark.skipif(
    int(importlib.metadata.version("mcp").split(".")[0]) < 2,
    reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake",
)


# --8<-- [start:switch-era]
@needs_mcp2
@pytest.mark.asyncio
async def test_a_rollback_under_a_modern_client_fails_its_next_call(fake_mcp_server):
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call").switch_era("handshake")  # a deploy back to a handshake-only server
    async with Client(fake_mcp_server.url) as client:  # went modern after its probe
        await client.list_tools()
        with pytest.raises(MCPError, match="Missing session ID"):  # 400: the client has no session
            await client.call_tool("echo", {"text": "hi"})

    posts = [(e.era, e.rpc_method, e.status) for e in fake_mcp_server.journal if e.http_method == "POST"]
    assert posts[-1] == ("handshake", "tools/call", 400)


# --8<-- [end:switch-era]


# --8<-- [start:slow-discover]
@needs_mcp2
@pytest.mark.asyncio
async def test_a_probe_slower_than_the_client_allows_falls_back_to_the_handshake(fake_mcp_server, monkeypatch):
    import mcp.client.session
    from mcp import Client

    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 0.3)  # the SDK's 10 s, shortened
    fake_mcp_server.on("server/discover").delay(5)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})

    probe = fake_mcp_server.get_request(method="server/discover")
    assert probe.status is None  # never answered: the client went on without it
    assert fake_mcp_server.figures.initialize_count == 1


# --8<-- [end:slow-discover]


# --8<-- [start:discover-versions]
@needs_mcp2
@pytest.mark.asyncio
async def test_discover_naming_only_unknown_versions_makes_the_client_fall_back(fake_mcp_server):
    from mcp import Client

    fake_mcp_server.on("server/discover").discover_versions(["2099-01-01"])
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})

    assert [e.era for e in fake_mcp_server.get_requests(method="tools/call")] == ["handshake"]
    fake_mcp_server.assert_initialize_count(1)


# --8<-- [end:discover-versions]


# --8<-- [start:cache-hint]
@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
@pytest.mark.parametrize(("ttl_ms", "lists_sent"), [(60_000, 1), (0, 3)])
async def test_the_client_reuses_a_list_only_while_its_ttl_holds(fake_mcp_server, ttl_ms, lists_sent):
    from mcp import Client

    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=ttl_ms)
    async with Client(fake_mcp_server.url) as client:
        for _ in range(3):
            await client.list_tools()

    assert len(fake_mcp_server.get_requests(method="tools/list")) == lists_sent
    fake_mcp_server.assert_list_results_cached()


# --8<-- [end:cache-hint]


# --8<-- [start:refuse-initialize]
@pytest.mark.asyncio
async def test_a_handshake_client_refused_by_a_modern_only_server_stops(fake_mcp_server):
    fake_mcp_server.on("initialize").refuse_initialize()  # 400, -32022, data.supported = ["2026-07-28"]
    with pytest.raises(ExceptionGroup):  # mcp 2.x: MCPError -32022 inside; mcp 1.x: the HTTP 400
        async with sdk_session(fake_mcp_server.url):
            pass

    refused = fake_mcp_server.get_request(method="initialize")
    assert refused.response_messages[0]["error"]["data"]["supported"] == ["2026-07-28"]
    fake_mcp_server.assert_stopped_after_era_refusal()


# --8<-- [end:refuse-initialize]
