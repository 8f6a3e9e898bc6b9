"""Serving the 2026-07-28 era beside the handshake era (``era="handshake" | "modern" | "dual"``; issue 10).

The proof is the real mcp 2.x ``Client()`` in auto mode: it probes with ``server/discover`` and goes modern
against a fake that serves the modern era, and falls back to ``initialize`` against a handshake-only fake;
the journal shows the probe, the era of every exchange and the fallback.
"""

from __future__ import annotations

import contextlib
import json
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
    from pytest_fake_mcp._cli._main import main

    assert main(["serve", "--flavour", "mcp1", "--era", "modern"]) == 2
    assert "era='modern' needs flavour='mcp2'" in capsys.readouterr().err


# --- JSON unless it streams; closing the stream cancels ----------------------------------------------------

_CALL_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "progressToken": "p1",
}


def _call(name: str) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    body["params"]["_meta"] = _CALL_META  # type: ignore[index]
    return body, {**MODERN_HEADERS, "mcp-method": "tools/call", "mcp-name": name}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_tool_that_notifies_streams_in_sse_mode_and_answers_json_in_json_mode(
    fake_mcp_server: FakeMCPServer, mode: str
) -> None:
    import httpx

    def slow(ctx: Any) -> str:
        ctx.progress(0.5, 1.0)
        return "done"

    fake_mcp_server.add_tool("slow", slow)
    body, headers = _call("slow")
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(fake_mcp_server.url, json=body, headers=headers)
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    if mode == "sse":
        assert response.headers["content-type"] == "text/event-stream"
        frames = [line for line in response.text.splitlines() if line.startswith("data: ")]
        assert [json.loads(f[6:]).get("method") for f in frames] == ["notifications/progress", None]
        assert json.loads(frames[-1][6:])["result"]["content"][0]["text"] == "done"
    else:
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["content"][0]["text"] == "done"  # the notification was dropped


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_closing_the_stream_cancels_the_tool(fake_mcp_server: FakeMCPServer) -> None:
    import asyncio

    import httpx

    started = asyncio.Event()
    cancelled = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def forever() -> str:
        loop.call_soon_threadsafe(started.set)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            loop.call_soon_threadsafe(cancelled.set)
            raise
        return "never"

    fake_mcp_server.add_tool("forever", forever)
    body, headers = _call("forever")
    async with httpx.AsyncClient(timeout=10) as http:
        request = asyncio.ensure_future(http.post(fake_mcp_server.url, json=body, headers=headers))
        async with asyncio.timeout(10):
            await started.wait()
        request.cancel()  # the client gives up: its connection closes
        with contextlib.suppress(asyncio.CancelledError):
            await request
    async with asyncio.timeout(10):
        await cancelled.wait()


@needs_mcp2
@pytest.mark.asyncio
async def test_the_journal_filters_by_era(fake_mcp_server: FakeMCPServer) -> None:
    await _use_client(fake_mcp_server.url)
    await _use_client(fake_mcp_server.url, mode="legacy")
    modern = fake_mcp_server.journal.get_requests(era="modern")
    handshake = fake_mcp_server.journal.get_requests(era="handshake")
    assert [e.rpc_method for e in modern][:2] == ["server/discover", "tools/list"]
    assert handshake[0].rpc_method == "initialize"
    assert fake_mcp_server.figures.era_counts == {"modern": len(modern), "handshake": len(handshake)}
    assert "server/discover: 1" in str(fake_mcp_server.figures)


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern", sse_ping_interval=0.05)
async def test_a_silent_tool_past_the_ping_interval_commits_to_sse_with_pings(fake_mcp_server: FakeMCPServer) -> None:
    import asyncio

    import httpx

    loop = asyncio.get_running_loop()
    pinged = asyncio.Event()

    async def slow() -> str:  # answers once the client saw a ping (the fake runs on its own thread and loop)
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_wait(pinged), loop))
        return "late"

    async def _wait(event: asyncio.Event) -> None:
        async with asyncio.timeout(10):
            await event.wait()

    fake_mcp_server.add_tool("slow", slow)
    body, headers = _call("slow")
    chunks: list[bytes] = []
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream("POST", fake_mcp_server.url, json=body, headers=headers) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
            if b": ping" in b"".join(chunks):
                pinged.set()
    text = b"".join(chunks).decode()
    assert text.startswith(": ping\r\n\r\n")
    assert json.loads(text.rsplit("data: ", 1)[1])["result"]["content"][0]["text"] == "late"
