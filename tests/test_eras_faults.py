"""Era faults through ``on(...)``, each against the real mcp 2.x ``Client()`` (issue 10).

A deploy switching the era under a live client; ``server/discover`` slower than the client's probe timeout;
discover naming versions the client does not speak; cache hints that make list results reusable or not; a
modern-only refusal of ``initialize``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from _sdk import MCP2, sdk_session
from pytest_fake_mcp import ScriptError

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)


def _innermost(error: BaseException, kind: type[Any]) -> Any:
    if isinstance(error, kind):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = _innermost(inner, kind)
        if found is not None:
            return found
    return None


def _posts(server: FakeMCPServer) -> list[tuple[str | None, str | None, int | None]]:
    return [(e.era, e.rpc_method, e.status) for e in server.journal if e.http_method == "POST"]


@needs_mcp2
@pytest.mark.asyncio
async def test_a_rollback_to_the_handshake_under_a_modern_client_fails_its_next_call(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call").switch_era("handshake")
    async with Client(fake_mcp_server.url) as client:
        await client.list_tools()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"text": "hi"})
    assert caught.value.code == -32600  # the handshake era's "Missing session ID": the client has no session
    assert _posts(fake_mcp_server) == [
        ("modern", "server/discover", 200),
        ("modern", "tools/list", 200),
        ("handshake", "tools/call", 400),
    ]


@needs_mcp2
@pytest.mark.asyncio
async def test_an_upgrade_to_modern_only_under_a_legacy_session_fails_its_next_call(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call").switch_era("modern")
    async with Client(fake_mcp_server.url, mode="legacy") as client:
        await client.list_tools()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"text": "b"})
    assert caught.value.code == -32602  # its handshake request has no envelope
    assert _posts(fake_mcp_server)[-1] == ("modern", "tools/call", 400)
    delete = fake_mcp_server.journal.get_request(http_method="DELETE")
    assert delete is not None
    assert (delete.era, delete.status) == ("modern", 405)  # no session to end any more


@needs_mcp2
@pytest.mark.asyncio
async def test_a_discover_slower_than_the_probe_timeout_makes_the_client_fall_back(
    fake_mcp_server: FakeMCPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp.client.session
    from mcp import Client

    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 0.3)  # the SDK's 10 s, shortened
    fake_mcp_server.on("server/discover").delay(5.0)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    probe, *rest = [e for e in fake_mcp_server.journal if e.http_method == "POST"]
    assert probe.rpc_method == "server/discover"
    assert [e.rpc_method for e in rest][:2] == ["initialize", "notifications/initialized"]
    assert probe.status is None  # the client fell back while its probe was held, and never got its answer
    assert {e.era for e in rest} == {"handshake"}


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("versions", [["2099-01-01"], ["2025-11-25"], []], ids=["unknown", "handshake-only", "none"])
async def test_discover_naming_no_version_the_client_speaks_makes_it_fall_back(
    fake_mcp_server: FakeMCPServer, versions: list[str]
) -> None:
    from mcp import Client

    fake_mcp_server.on("server/discover").discover_versions(versions)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    posts = _posts(fake_mcp_server)
    assert posts[0] == ("modern", "server/discover", 200)
    assert posts[1] == ("handshake", "initialize", 200)
    probe = fake_mcp_server.journal.get_request(method="server/discover")
    assert probe is not None
    assert probe.response_messages[0]["result"]["supportedVersions"] == versions


@needs_mcp2
@pytest.mark.asyncio
async def test_discover_naming_our_version_keeps_the_client_modern(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.on("server/discover").discover_versions(["2099-01-01", "2026-07-28"])
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    assert {era for era, _, _ in _posts(fake_mcp_server)} == {"modern"}


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(("ttl_ms", "lists_on_the_wire"), [(60_000, 1), (0, 3)], ids=["cacheable", "not-cacheable"])
async def test_cache_hints_decide_whether_the_client_lists_again(
    fake_mcp_server: FakeMCPServer, ttl_ms: int, lists_on_the_wire: int
) -> None:
    from mcp import Client

    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=ttl_ms, scope="public")
    async with Client(fake_mcp_server.url) as client:
        for _ in range(3):
            await client.list_tools()
    lists = fake_mcp_server.journal.get_requests(method="tools/list")
    assert len(lists) == lists_on_the_wire
    assert lists[0].response_messages[0]["result"]["ttlMs"] == ttl_ms
    assert lists[0].response_messages[0]["result"]["cacheScope"] == "public"


@pytest.mark.asyncio
async def test_a_refused_initialize_names_the_modern_versions_to_a_handshake_client(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("initialize").refuse_initialize()
    with pytest.raises(BaseException) as caught:
        async with sdk_session(fake_mcp_server.url):
            pass
    if MCP2:
        from mcp import MCPError

        error = _innermost(caught.value, MCPError)
        assert error.code == -32022
    else:
        import httpx

        assert _innermost(caught.value, httpx.HTTPStatusError).response.status_code == 400
    refused = fake_mcp_server.journal.get_request(method="initialize")
    assert refused is not None
    assert refused.status == 400
    assert refused.response_messages[0]["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_era_faults_check_their_arguments(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"switch_era\('stateless'\): era must be one of"):
        fake_mcp_server.on("tools/call").switch_era("stateless")
    with pytest.raises(ScriptError, match=r"cache_hint\(ttl_ms=-1\) must be an int >= 0"):
        fake_mcp_server.on("tools/list").cache_hint(ttl_ms=-1)
    with pytest.raises(ScriptError, match=r"cache_hint\(scope='shared'\) must be 'private' or 'public'"):
        fake_mcp_server.on("tools/list").cache_hint(ttl_ms=1, scope="shared")
    with pytest.raises(ScriptError, match=r"takes a list of version strings"):
        fake_mcp_server.on("server/discover").discover_versions("2026-07-28")  # type: ignore[arg-type]


@pytest.mark.fake_mcp_fault("server/discover", discover_versions=["2099-01-01"])
def test_the_marker_scripts_era_faults(fake_mcp_server: FakeMCPServer) -> None:
    import httpx

    response = httpx.post(
        fake_mcp_server.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
        },
        timeout=10,
    )
    if MCP2 or response.status_code == 200:
        assert response.json()["result"]["supportedVersions"] == ["2099-01-01"]
