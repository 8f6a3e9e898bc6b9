"""Serving the 2026-07-28 era beside the handshake era (``era="handshake" | "modern" | "dual"``; issue 10).

The proof is the real mcp 2.x ``Client()`` in auto mode: it probes with ``server/discover`` and goes modern
against a fake that serves the modern era, and falls back to ``initialize`` against a handshake-only fake;
the journal shows the probe, the era of every exchange and the fallback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from _sdk import MCP2, MODES
from pytest_fake_mcp import FakeMCPOptions, ScriptError

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)


def _wire(server: FakeMCPServer) -> list[tuple[str | None, str | None, int | None]]:
    return [(e.era, e.rpc_method, e.status) for e in server.journal if e.http_method == "POST"]


def _innermost(error: BaseException, kind: type[Any]) -> Any:
    """The first ``kind`` inside (possibly nested) exception groups; the SDK leaves its context wrapped in them."""
    if isinstance(error, kind):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = _innermost(inner, kind)
        if found is not None:
            return found
    return None


async def _use_client(url: str, **kwargs: Any) -> str:
    from mcp import Client

    async with Client(url, **kwargs) as client:
        await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})
        text: str = result.content[0].text  # type: ignore[union-attr]
        return text


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="modern")
async def test_auto_client_goes_modern_against_a_modern_fake(fake_mcp_server: FakeMCPServer, mode: str) -> None:
    assert await _use_client(fake_mcp_server.url) == "hi"
    assert _wire(fake_mcp_server) == [
        ("modern", "server/discover", 200),
        ("modern", "tools/list", 200),
        ("modern", "tools/call", 200),
    ]
    assert all(e.session_id is None and e.response_session_id is None for e in fake_mcp_server.journal)
    assert fake_mcp_server.figures.discover_count == 1


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="handshake")
async def test_auto_client_falls_back_against_a_handshake_only_fake(fake_mcp_server: FakeMCPServer, mode: str) -> None:
    assert await _use_client(fake_mcp_server.url) == "hi"
    wire = _wire(fake_mcp_server)
    assert wire[:3] == [
        ("handshake", "server/discover", 400),
        ("handshake", "initialize", 200),
        ("handshake", "notifications/initialized", 202),
    ]
    assert {era for era, _, _ in wire} == {"handshake"}
    assert fake_mcp_server.figures.discover_count == 1
    assert fake_mcp_server.figures.initialize_count == 1


@needs_mcp2
@pytest.mark.asyncio
async def test_a_dual_fake_serves_each_client_in_its_own_era(fake_mcp_server: FakeMCPServer) -> None:
    assert await _use_client(fake_mcp_server.url) == "hi"
    assert await _use_client(fake_mcp_server.url, mode="legacy") == "hi"
    eras = [(e.era, e.rpc_method) for e in fake_mcp_server.journal if e.http_method == "POST"]
    assert eras[:3] == [("modern", "server/discover"), ("modern", "tools/list"), ("modern", "tools/call")]
    assert ("handshake", "initialize") in eras[3:]
    assert {era for era, _ in eras[3:]} == {"handshake"}


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_modern_only_fake_refuses_initialize_naming_its_versions(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import MCPError

    with pytest.raises(BaseException) as caught:
        await _use_client(fake_mcp_server.url, mode="legacy")
    error = _innermost(caught.value, MCPError)
    assert error.code == -32022
    assert error.message == "Unsupported protocol version"
    exchange = fake_mcp_server.journal.get_request(method="initialize")
    assert exchange is not None
    assert exchange.status == 400
    assert exchange.era == "modern"
    assert exchange.response_messages[0]["error"]["data"]["supported"] == ["2026-07-28"]


def test_the_default_era_follows_the_flavour() -> None:
    assert FakeMCPOptions().era == "dual"
    assert FakeMCPOptions(flavour="mcp1").era == "handshake"


def test_an_unknown_era_names_the_known_ones() -> None:
    with pytest.raises(ScriptError, match=r"era='stateless' is not known; use one of 'handshake', 'modern', 'dual'"):
        FakeMCPOptions(era="stateless")


def test_the_modern_era_needs_the_mcp2_flavour() -> None:
    with pytest.raises(ScriptError, match=r"era='modern' needs flavour='mcp2'"):
        FakeMCPOptions(flavour="mcp1", era="modern")


# --- fake-mcp serve --era --------------------------------------------------------------------------------------

DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
MODERN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "server/discover",
}


@pytest.mark.parametrize(("era", "status"), [("modern", 200), ("dual", 200), ("handshake", 400)])
def test_serve_era_chooses_what_answers_the_probe(era: str, status: int) -> None:
    import signal

    import httpx

    from test_cli import serve, stop

    with serve("--era", era) as (process, url):
        response = httpx.post(url, json=DISCOVER, headers=MODERN_HEADERS, timeout=10)
        assert response.status_code == status
        if status == 200:
            assert response.json()["result"]["supportedVersions"] == ["2026-07-28"]
        assert stop(process, signal.SIGTERM)[0] == 0


def test_serve_refuses_the_modern_era_with_the_mcp1_flavour(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_fake_mcp._cli import main

    assert main(["serve", "--flavour", "mcp1", "--era", "modern"]) == 2
    assert "era='modern' needs flavour='mcp2'" in capsys.readouterr().err
