"""The app has no thread affinity: the same ASGI app answers on the test's own loop, with no listener.

This is the seam the roadmap's race exploration needs (a controlled loop, no sockets, no threads).
"""

from __future__ import annotations

import httpx
import pytest

from pytest_fake_mcp import FakeMCPOptions
from pytest_fake_mcp._fake._app import FakeMCPApp

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json", "host": "127.0.0.1:1"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.mark.asyncio
async def test_the_app_serves_a_session_in_process_on_the_tests_loop() -> None:
    app = FakeMCPApp(FakeMCPOptions(json_response=True))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as client:
        opened = await client.post("/mcp", json=INIT, headers=HEADERS)
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        initialized = await client.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        call = await client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}},
            },
            headers=session,
        )
        deleted = await client.delete("/mcp", headers=session)

    assert [opened.status_code, initialized.status_code, call.status_code, deleted.status_code] == [200, 202, 200, 200]
    assert call.json()["result"]["content"] == [{"type": "text", "text": "x"}]
    assert [(e.http_method, e.rpc_method, e.status) for e in app.journal.exchanges] == [
        ("POST", "initialize", 200),
        ("POST", "notifications/initialized", 202),
        ("POST", "tools/call", 200),
        ("DELETE", None, 200),
    ]
    assert app.journal.exchanges[0].connection == "127.0.0.1:123"  # httpx.ASGITransport's made-up client address
