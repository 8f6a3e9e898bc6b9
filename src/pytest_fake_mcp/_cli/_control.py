"""ControlFront: the ``/_fake/`` control API beside the MCP endpoint, for clients in any language.

``fake-mcp serve`` puts this plain-ASGI front before the fake: requests under ``/_fake/`` go to
the control handlers, everything else to the fake unchanged. The control API answers loopback
clients only, checks Host and Origin (a web page must not drive it through DNS rebinding or a
cross-site POST), and reads at most 64 KiB of body. No request value reaches a shell or a file.

| endpoint | what |
|---|---|
| ``POST /_fake/drop_session`` | end every live session, or the one in ``{"session_id": ...}`` |
| ``POST /_fake/restart`` | forget every session and end open streams, as a restarted server |
| ``POST /_fake/reset`` | back to a clean fake: sessions, journal, faults; the profile is served again |
| ``POST /_fake/faults`` | script a fault: a JSON object with the ``fake_mcp_fault`` marker's fields |
| ``GET /_fake/faults`` | the faults scripted since the last reset |
| ``GET /_fake/journal`` | every exchange with the MCP endpoint since the last reset, as JSON |
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from .._faults import ANY, RequestMatcher, ScriptedFault, apply_fault_marker
from .._host import app_of, reset
from .._wire._errors import FakeMCPError
from .._wire._types import JSONObject

if TYPE_CHECKING:
    from .._fake._app import FakeMCPApp
    from .._host._server import FakeMCPServer
    from .._record._journal import Exchange
    from .._wire._types import Receive, Scope, Send

__all__ = ["CONTROL_PREFIX", "MAX_CONTROL_BODY", "ControlFront"]

CONTROL_PREFIX: Final = "/_fake/"
MAX_CONTROL_BODY: Final = 64 * 1024
"""Bytes of body a control request may carry (413 past it)."""
_LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]")
_EXCHANGE_FIELDS: Final = (
    "seq",
    "http_method",
    "path",
    "rpc_method",
    "rpc_id",
    "kind",
    "target",
    "session_id",
    "response_session_id",
    "protocol_version",
    "era",
    "status",
    "response_format",
    "error_code",
    "outcome",
    "faults",
    "started",
    "ended",
)

Handler = Callable[[JSONObject], Awaitable[tuple[int, JSONObject]]]


class _Refused(Exception):
    """A control request refused before it ran: status and reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _dry_run(method: Any = ANY, **match: Any) -> ScriptedFault:
    """Builds a fault from the marker's fields as ``fake_mcp_server.on`` does, without scripting it."""
    return ScriptedFault(RequestMatcher(method=method, **match))


class ControlFront:
    """Plain ASGI: ``/_fake/*`` to the control handlers, everything else to the fake.

    ``reinstall`` runs after every reset, so the served profile comes back. Example::

        front = ControlFront(server, reinstall=install_conformance_profile)
        listener = Listener(app_of(server), front=front)
    """

    def __init__(self, server: FakeMCPServer, *, reinstall: Callable[[FakeMCPServer], None]) -> None:
        self._server = server
        self._app: FakeMCPApp = app_of(server)
        self._reinstall = reinstall
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "drop_session"): self._drop_session,
            ("POST", "restart"): self._restart,
            ("POST", "reset"): self._reset,
            ("POST", "faults"): self._add_fault,
            ("GET", "faults"): self._list_faults,
            ("GET", "journal"): self._journal,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope.get("path", "")
            if path.startswith(CONTROL_PREFIX) or path == CONTROL_PREFIX.rstrip("/"):
                await self._control(scope, receive, send)
                return
        await self._app(scope, receive, send)

    # --- the control API -----------------------------------------------------------------------------

    async def _control(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            _check_caller(scope)
            name = scope["path"][len(CONTROL_PREFIX) :]
            method = scope.get("method", "")
            handler = self._routes.get((method, name))
            if handler is None:
                allowed = sorted(m for m, n in self._routes if n == name)
                if allowed:
                    raise _Refused(405, f"{method} /_fake/{name}: use {' or '.join(allowed)}")
                known = ", ".join(sorted({f"{m} /_fake/{n}" for m, n in self._routes}))
                raise _Refused(404, f"no control endpoint {method} {scope['path']}; known: {known}")
            body = await _read_body(receive)
            payload = _json_object(body)
            status, result = await handler(payload)
        except _Refused as refused:
            status, result = refused.status, {"error": refused.reason}
        await _send_json(send, status, result)

    async def _drop_session(self, payload: JSONObject) -> tuple[int, JSONObject]:
        _only(payload, "session_id")
        session_id = payload.get("session_id")
        if session_id is not None and not isinstance(session_id, str):
            raise _Refused(400, f"session_id={session_id!r} must be a string (or absent: every live session)")
        dropped = await asyncio.to_thread(self._server.drop_session, session_id)
        return 200, {"dropped": dropped}

    async def _restart(self, payload: JSONObject) -> tuple[int, JSONObject]:
        _only(payload)
        live = [s.id for s in self._app.sessions.live()]
        await asyncio.to_thread(self._server.restart)
        return 200, {"forgotten": live}

    async def _reset(self, payload: JSONObject) -> tuple[int, JSONObject]:
        _only(payload)

        await asyncio.to_thread(reset, self._server)
        self._reinstall(self._server)  # back on the server loop: no request sees a half-built catalog
        return 200, {"reset": True}

    async def _add_fault(self, payload: JSONObject) -> tuple[int, JSONObject]:
        try:
            # A dry run first: the marker parser scripts the rule before it checks the action, and a refused
            # fault must leave nothing scripted.
            apply_fault_marker(_dry_run, (), payload)
            rule = await asyncio.to_thread(apply_fault_marker, self._server.on, (), payload)
        except (FakeMCPError, TypeError, ValueError) as exc:
            raise _Refused(400, f"{exc}; see docs/faults.md for the fields") from None
        return 201, {"fault": str(rule)}

    async def _list_faults(self, payload: JSONObject) -> tuple[int, JSONObject]:
        _only(payload)
        return 200, {"faults": [str(rule) for rule in self._server.scripted_faults]}

    async def _journal(self, payload: JSONObject) -> tuple[int, JSONObject]:
        _only(payload)
        journal = self._app.journal
        return 200, {
            "exchanges": [exchange_json(e) for e in journal.exchanges],
            "events": [{"after_seq": e.after_seq, "text": e.text} for e in journal.events],
        }


def exchange_json(exchange: Exchange) -> JSONObject:
    """One journal exchange as JSON: the fields a client in another language needs."""
    entry: JSONObject = {name: getattr(exchange, name) for name in _EXCHANGE_FIELDS}
    entry["outcome"] = str(exchange.outcome)
    entry["faults"] = list(exchange.faults)
    return entry


def _check_caller(scope: Scope) -> None:
    """Loopback peers only; Host a loopback name; an Origin, if any, a loopback origin."""
    client = scope.get("client")
    peer = client[0] if client else ""
    if not _is_loopback(peer):
        raise _Refused(403, "the control API answers loopback clients only")
    host = _header(scope, b"host") or ""
    if _host_name(host) not in _LOOPBACK_HOSTS:
        raise _Refused(421, f"Host {host!r} is not a loopback name; use 127.0.0.1, localhost or [::1]")
    origin = _header(scope, b"origin")
    if origin is not None:
        scheme, _, rest = origin.partition("://")
        if scheme != "http" or _host_name(rest) not in _LOOPBACK_HOSTS:
            raise _Refused(403, f"Origin {origin!r} is not a loopback origin")


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """``127.0.0.1:8000`` -> ``127.0.0.1``; ``[::1]:8000`` -> ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if ":" in host else host


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Refused(400, "the client went away before its body arrived")
        body += message.get("body", b"")
        if len(body) > MAX_CONTROL_BODY:
            raise _Refused(413, f"a control request body may be at most {MAX_CONTROL_BODY} bytes")
        if not message.get("more_body", False):
            return bytes(body)


def _json_object(body: bytes) -> JSONObject:
    if not body.strip():
        return {}
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise _Refused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise _Refused(400, f"the body must be a JSON object, got {type(payload).__name__}")
    return payload


def _only(payload: Mapping[str, Any], *names: str) -> None:
    unknown = sorted(set(payload) - set(names))
    if unknown:
        accepted = ", ".join(names) or "no fields"
        raise _Refused(400, f"unknown field(s) {', '.join(unknown)}; this endpoint takes {accepted}")


async def _send_json(send: Send, status: int, payload: JSONObject) -> None:
    body = json.dumps(payload, default=str).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
