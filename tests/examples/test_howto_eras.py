"""How-to: the 2026-07-28 era beside the handshake (docs/eras.md); the mcp 2.x ``Client()`` negotiates it."""

from __future__ import annotations

import importlib.metadata

import pytest

pytestmark = pytest.mark.skipif(
    int(importlib.metadata.version("mcp").split(".")[0]) < 2,
    reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake",
)


# --8<-- [start:probe-and-fallback]
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "expected",
    [
        pytest.param(
            [("modern", "server/discover"), ("modern", "tools/call")],
            marks=pytest.mark.fake_mcp_server(era="modern"),
            id="modern",
        ),
        pytest.param(
            [("handshake", "server/discover"), ("handshake", "initialize")],
            marks=pytest.mark.fake_mcp_server(era="handshake"),
            id="handshake",
        ),
    ],
)
async def test_the_client_speaks_whichever_era_the_server_serves(fake_mcp_server, expected):
    from mcp import Client

    async with Client(fake_mcp_server.url) as client:  # mode="auto": one probe, then modern or initialize
        await client.call_tool("echo", {"text": "hi"})

    posts = [(e.era, e.rpc_method) for e in fake_mcp_server.journal if e.http_method == "POST"]
    assert posts[:2] == expected
    assert fake_mcp_server.figures.discover_count == 1


# --8<-- [end:probe-and-fallback]


# --8<-- [start:modern-reuse]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_one_client_probes_once_and_reuses_fresh_lists(fake_mcp_server):
    from mcp import Client

    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=60_000)
    async with Client(fake_mcp_server.url) as client:
        for _ in range(3):
            await client.list_tools()
            await client.call_tool("echo", {"text": "hi"})

    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_list_results_cached()
    fake_mcp_server.assert_no_session_ids()


# --8<-- [end:modern-reuse]
