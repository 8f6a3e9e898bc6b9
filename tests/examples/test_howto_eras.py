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


# --8<-- [start:param-headers]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_the_client_mirrors_the_routing_argument_into_a_header(fake_mcp_server):
    from mcp import Client

    def ask(region: str, question: str) -> str:
        return f"{region} says hi"

    fake_mcp_server.add_tool("ask", ask, param_headers={"region": "Region"})
    async with Client(fake_mcp_server.url) as client:
        await client.list_tools()  # where the client learns which arguments to mirror
        await client.call_tool("ask", {"region": "eu-west", "question": "hi?"})

    call = fake_mcp_server.journal.get_request(method="tools/call")
    assert call.request_headers["mcp-param-region"] == "eu-west"
    assert call.status == 200  # a header that disagreed with the argument would get 400, -32020


# --8<-- [end:param-headers]


# --8<-- [start:era-fault]
@pytest.mark.asyncio
async def test_only_modern_calls_meet_the_outage(fake_mcp_server):  # era="dual", the mcp2 default
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call", era="modern").always().respond(503)
    async with Client(fake_mcp_server.url, mode="legacy") as legacy:
        await legacy.call_tool("echo", {"text": "hi"})  # answered by the handshake era: untouched
    async with Client(fake_mcp_server.url) as modern:
        with pytest.raises(MCPError):
            await modern.call_tool("echo", {"text": "hi"})


# --8<-- [end:era-fault]


# --8<-- [start:modern-cut]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_modern_call_cut_after_the_tool_ran_is_a_transport_error(fake_mcp_server):
    import httpx2
    from mcp import Client

    fake_mcp_server.on("tools/call").cut_stream(after_call=True)
    with pytest.raises(ExceptionGroup) as caught:
        async with Client(fake_mcp_server.url) as client:
            await client.call_tool("echo", {"text": "hi"})

    assert caught.group_contains(httpx2.RemoteProtocolError)  # not an MCPError: the answer never came
    [run] = fake_mcp_server.executions("echo")
    assert not run.delivered  # the tool ran all the same


# --8<-- [end:modern-cut]
