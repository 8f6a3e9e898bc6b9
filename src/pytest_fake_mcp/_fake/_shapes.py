"""SessionLossShape: every way real servers say "I do not know this session" (see docs/faults.md), and look-alikes.

Each member is one HTTP answer: a status, a body and whether it *means* session loss. A client's
session-loss classifier should re-initialize on every member with ``session_unknown`` and on no
other; the controls (a genuinely bad request, a capacity refusal, "already initialized") exist so
a contract suite can check that too::

    @pytest.mark.parametrize("shape", list(SessionLossShape))
    async def test_classifier(fake_mcp_server, shape): ...
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._wire._protocol import SESSION_HEADER, dumps

if TYPE_CHECKING:
    from .._wire._types import JSONValue
    from ._request import RequestContext

__all__ = ["SessionLossShape", "answer_with_shape"]

_NGINX_404 = (
    b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
    b"<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
_CONTENT_TYPES: dict[str, str | None] = {
    "empty": None,
    "text": "text/plain; charset=utf-8",
    "html": "text/html",
    "sse": "text/event-stream",
}
_SSE_HEADERS = (("cache-control", "no-cache, no-transform"), ("content-type", "text/event-stream"))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shape:
    status: int
    body: Literal["sdk2", "sdk1", "ts", "empty", "text", "html", "sse"]
    code: int | None = None
    message: str = ""
    session_unknown: bool
    source: str
    echo_session: bool = False


class SessionLossShape(enum.Enum):
    """One server answer to a request whose session the server does not know (or a look-alike control).

    ``.status`` is the HTTP status, ``.session_unknown`` whether a client should treat it as session
    loss, ``str(shape)`` describes it. Use with ``fake_mcp_server.drop_session(shape=...)``,
    ``.restart(shape=...)``, ``.sessions_expired(shape=...)`` or ``.on(...).respond(shape)``.
    """

    NOT_FOUND = _Shape(
        status=404, body="sdk2", code=-32600, message="Session not found", session_unknown=True, source="python-sdk 2.x"
    )
    NOT_FOUND_MCP1 = _Shape(
        status=404, body="sdk1", code=-32600, message="Session not found", session_unknown=True, source="python-sdk 1.x"
    )
    TERMINATED_MCP1 = _Shape(
        status=404,
        body="sdk1",
        code=-32600,
        message="Not Found: Session has been terminated",
        session_unknown=True,
        source="python-sdk 1.x after DELETE",
        echo_session=True,
    )
    NOT_FOUND_32001 = _Shape(
        status=404, body="ts", code=-32001, message="Session not found", session_unknown=True, source="TypeScript-style"
    )
    NOT_FOUND_EMPTY = _Shape(status=404, body="empty", session_unknown=True, source="a proxy")
    NOT_FOUND_TEXT = _Shape(status=404, body="text", message="Not Found", session_unknown=True, source="a proxy")
    NOT_FOUND_HTML = _Shape(status=404, body="html", session_unknown=True, source="nginx")
    NO_VALID_SESSION_ID = _Shape(
        status=400,
        body="ts",
        code=-32000,
        message="Bad Request: No valid session ID provided",
        session_unknown=True,
        source="TypeScript SDK example servers",
    )
    NOT_INITIALIZED = _Shape(
        status=400,
        body="ts",
        code=-32000,
        message="Bad Request: Server not initialized",
        session_unknown=True,
        source="TypeScript SDK servers",
    )
    INVALID_REQUEST_SESSION_NOT_FOUND = _Shape(
        status=400,
        body="ts",
        code=-32600,
        message="Invalid Request: Session not found",
        session_unknown=True,
        source="mcphub",
    )
    UNAUTHORIZED = _Shape(
        status=401, body="text", message="Unauthorized: Session not found", session_unknown=True, source="rmcp"
    )
    GONE = _Shape(
        status=410, body="ts", code=-32001, message="Session expired", session_unknown=True, source="410 Gone servers"
    )
    SERVICE_UNAVAILABLE = _Shape(
        status=503, body="ts", code=-32000, message="Session not found", session_unknown=True, source="503 servers"
    )
    SSE_ERROR = _Shape(
        status=200,
        body="sse",
        code=-32600,
        message="Session not found",
        session_unknown=True,
        source="servers answering 200 with an SSE error event",
    )
    INVALID_REQUEST = _Shape(
        status=400,
        body="ts",
        code=-32600,
        message="Invalid Request",
        session_unknown=False,
        source="control: a genuinely bad request, not session loss",
    )
    ALREADY_INITIALIZED = _Shape(
        status=400,
        body="ts",
        code=-32600,
        message="Invalid Request: Server already initialized",
        session_unknown=False,
        source="single-session TypeScript servers",
    )
    TOO_MANY_SESSIONS = _Shape(
        status=503,
        body="sdk2",
        code=-32603,
        message="Too many open sessions",
        session_unknown=False,
        source="python-sdk 2.x at max_sessions",
    )

    @property
    def status(self) -> int:
        return self.value.status

    @property
    def session_unknown(self) -> bool:
        """True if a client should read this answer as "my session is gone"."""
        return self.value.session_unknown

    @property
    def code(self) -> int | None:
        """The JSON-RPC error code in the body, or None for a body that is not JSON-RPC."""
        return self.value.code

    @property
    def message(self) -> str:
        return self.value.message

    @property
    def content_type(self) -> str | None:
        return _CONTENT_TYPES.get(self.value.body, "application/json")

    def body(self, request_id: JSONValue = None) -> bytes:
        """The response body (for SSE, the one event's ``data``; ``request_id`` goes into it)."""
        shape = self.value
        if shape.body == "empty":
            return b""
        if shape.body == "text":
            return shape.message.encode()
        if shape.body == "html":
            return _NGINX_404
        error = {"code": shape.code, "message": shape.message}
        if shape.body == "sdk2":
            return dumps({"jsonrpc": "2.0", "id": None, "error": error})
        if shape.body == "sdk1":
            return dumps({"jsonrpc": "2.0", "id": "server-error", "error": error})
        if shape.body == "sse":
            return dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
        return dumps({"jsonrpc": "2.0", "error": error, "id": None})  # TypeScript SDK field order

    def __str__(self) -> str:
        shape = self.value
        if shape.body == "sse":
            what = f"200 with an SSE event carrying JSON-RPC {shape.code} {shape.message!r}"
        elif shape.code is not None:
            what = f"{shape.status} with JSON-RPC {shape.code} {shape.message!r}"
        elif shape.body == "empty":
            what = f"{shape.status} with an empty body"
        else:
            what = f"{shape.status} with a {'text' if shape.body == 'text' else 'HTML'} body"
        return f"{what} ({shape.source})"

    def __repr__(self) -> str:
        return f"SessionLossShape.{self.name}"


async def answer_with_shape(request: RequestContext, shape: SessionLossShape) -> None:
    """Send ``shape`` as the whole answer to ``request``."""
    headers: list[tuple[str, str]] = []
    if shape.value.echo_session and request.session_id is not None:
        headers.append((SESSION_HEADER, request.session_id))
    incoming = request.incoming
    body = shape.body(incoming.id if incoming is not None else None)
    if shape.value.body == "sse":
        await request.start(200, [*_SSE_HEADERS, *headers], "sse")
        await request.send_event(json.loads(body))
        await request.finish()
        return
    if shape.content_type == "application/json":
        await request.respond_json(shape.status, json.loads(body), headers=headers)
        return
    await request.respond(shape.status, body, content_type=shape.content_type, headers=headers)
