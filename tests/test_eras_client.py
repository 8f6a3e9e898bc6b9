"""The reference client in both eras: ``ReusingSessionClient(url, mode="auto")`` goes modern against a fake that
serves the 2026-07-28 era and keeps to the handshake against one that does not (issue 10)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from _sdk import MCP2
from pytest_fake_mcp.client import ReusingSessionClient

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "era", [pytest.param("modern", marks=pytest.mark.fake_mcp_server(era="modern"), id="modern"), "dual"]
)
async def test_the_reference_client_goes_modern_and_reuses_its_http_client(
    fake_mcp_server: FakeMCPServer, era: str
) -> None:
    async with ReusingSessionClient(fake_mcp_server.url, mode="auto") as client:
        for i in range(3):
            result = await client.call_tool("echo", {"text": str(i)})
            assert result.content[0].text == str(i)
        assert client.session_ids == ()
        assert client.generation == 1  # one connection, never reopened
    assert {e.era for e in fake_mcp_server.journal} == {"modern"}
    fake_mcp_server.assert_discover_once()
    fake_mcp_server.assert_no_session_ids()
    fake_mcp_server.assert_tool_ran("echo", times=3)


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_the_reference_client_in_auto_mode_falls_back_to_one_session(fake_mcp_server: FakeMCPServer) -> None:
    async with ReusingSessionClient(fake_mcp_server.url, mode="auto") as client:
        for _ in range(3):
            await client.call_tool("echo", {"text": "hi"})
        assert len(client.session_ids) == 1
    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_all_sessions_closed()
    assert fake_mcp_server.figures.discover_count == (1 if MCP2 else 0)


def test_an_unknown_mode_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"mode='modern' must be 'legacy'"):
        ReusingSessionClient("http://127.0.0.1:1/mcp", mode="modern")


@needs_mcp2
@pytest.mark.asyncio
async def test_a_session_assertion_on_a_client_that_went_sessionless_names_the_era_pin(
    fake_mcp_server: FakeMCPServer,
) -> None:
    """Under the default era="dual" a modern-era client opens no session: the session assertions say so and name
    the pin, not "a persisted session id" (issue 25: FastMCP 4 in a new user's first test)."""
    async with ReusingSessionClient(fake_mcp_server.url, mode="auto") as client:
        await client.call_tool("echo", {"text": "hi"})

    pin = '@pytest.mark.fake_mcp_server(era="handshake")'
    with pytest.raises(AssertionError, match="2026-07-28 protocol") as counted:
        fake_mcp_server.assert_initialize_count(1)
    assert pin in str(counted.value)
    assert "persisted session id" not in str(counted.value)
    with pytest.raises(AssertionError, match="no initialize opened a session") as reused:
        fake_mcp_server.assert_session_reused()
    assert pin in str(reused.value)
    with pytest.raises(AssertionError, match=r"created 0, expected 1") as sessions:
        fake_mcp_server.assert_sessions(created=1)
    assert pin in str(sessions.value)


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_a_handshake_client_missing_its_initialize_keeps_the_handshake_hint(
    fake_mcp_server: FakeMCPServer,
) -> None:
    """The era hint is for modern-era exchanges only: a handshake-era request without initialize keeps its own."""
    import httpx

    async with httpx.AsyncClient() as client:
        await client.post(
            fake_mcp_server.url,
            headers={"accept": "application/json, text/event-stream", "mcp-session-id": "0" * 32},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    with pytest.raises(AssertionError, match=r"skipped the handshake \(a persisted session id\?\)") as counted:
        fake_mcp_server.assert_initialize_count(1)
    assert "era=" not in str(counted.value).split("Hint:")[1]
