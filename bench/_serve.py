"""Serve one bench baseline in this process until stdin closes: ``python bench/_serve.py KIND [--json]``.

* ``real``: a real mcp SDK server (the tests' reference server: the low-level ``Server`` behind the
  SDK's session manager, on uvicorn);
* ``floor``: a canned raw-ASGI endpoint under the same uvicorn that answers the same requests with fixed
  bytes and no logic; only the JSON-RPC id is spliced in, since a client drops an answer to another id;
* ``floor-one-write``: the same floor behind the fake's own listener, each answer sent in one write as the fake
  sends it (head, body and end together), to tell what the fake's own work costs apart from that.

The first line on stdout is the endpoint URL, as ``fake-mcp serve`` prints it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

_ID = re.compile(rb'"id"\s*:\s*("[^"]*"|-?\d+)')
_SESSION = b"0123456789abcdef0123456789abcdef"
_INITIALIZE = (
    b'{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":false},"logging":{}},'
    b'"serverInfo":{"name":"floor","version":"1.0"}}'
)
_TOOLS = (
    b'{"tools":[{"name":"echo","description":"Echo the text back.","inputSchema":{"type":"object",'
    b'"properties":{"text":{"type":"string"}},"required":["text"]}}]}'
)
_CALL = b'{"content":[{"type":"text","text":"x"}],"isError":false}'
_EMPTY = b"{}"


class FloorApp:
    """The least a streamable-HTTP MCP server can do: fixed answers, one session id, no checks."""

    def __init__(self, json_response: bool) -> None:
        self.json_response = json_response

    async def _answer(self, scope: dict[str, Any], send: Any, start: dict[str, Any], body: dict[str, Any]) -> None:
        batch = scope.get("extensions", {}).get("fake_mcp.transport")
        if batch is not None:
            batch.hold()
        try:
            await send(start)
            await send(body)
        finally:
            if batch is not None:
                batch.release()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        method = scope["method"]
        if method == "GET":  # the standalone stream: open until the client leaves
            await send({"type": "http.response.start", "status": 200, "headers": _headers(b"text/event-stream")})
            await send({"type": "http.response.body", "body": b"", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if method == "DELETE" or b'"id"' not in body:  # a DELETE (200) or a notification (202)
            status = 200 if method == "DELETE" else 202
            start = {"type": "http.response.start", "status": status, "headers": _headers(b"application/json", 0)}
            await self._answer(scope, send, start, {"type": "http.response.body", "body": b""})
            return
        found = _ID.search(body)
        rpc_id = found.group(1) if found else b"null"
        if b'"initialize"' in body:
            result = _INITIALIZE
        elif b'"tools/call"' in body:
            result = _CALL
        elif b'"tools/list"' in body:
            result = _TOOLS
        else:
            result = _EMPTY
        answer = b'{"jsonrpc":"2.0","id":' + rpc_id + b',"result":' + result + b"}"
        if self.json_response:
            payload, kind = answer, b"application/json"
        else:
            payload, kind = b"event: message\r\ndata: " + answer + b"\r\n\r\n", b"text/event-stream"
        start = {"type": "http.response.start", "status": 200, "headers": _headers(kind, len(payload))}
        await self._answer(scope, send, start, {"type": "http.response.body", "body": payload})


def _headers(kind: bytes, length: int | None = None) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", kind), (b"mcp-session-id", _SESSION)]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return headers


def main() -> None:
    from _reference_server import _starlette_app, serve_in_thread

    kind, json_response = sys.argv[1], "--json" in sys.argv[2:]
    if kind == "floor-one-write":
        from pytest_fake_mcp._fake._app import FakeMCPApp
        from pytest_fake_mcp._host._listener import Listener

        listener = Listener(FakeMCPApp(), front=FloorApp(json_response))
        listener.start()
        print(f"{listener.origin}/mcp", flush=True)
        sys.stdin.read()
        listener.stop()
        return
    app = FloorApp(json_response) if kind == "floor" else _starlette_app(json_response)
    with serve_in_thread(app, name=f"bench {kind} server") as port:
        print(f"http://127.0.0.1:{port}/mcp", flush=True)
        sys.stdin.read()  # until the bench closes our stdin


if __name__ == "__main__":
    main()
