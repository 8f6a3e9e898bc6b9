"""The SDK servers' stateless request checks: transport security, Accept, Content-Type, protocol version.

Each reads only the request and the options, never the app's state, so both eras (``_app``'s
handshake path and ``_eras``' unserved modern era) use them without reaching into the app. The
order they run in, and what answers a failure, stay with the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._wire._protocol import HANDSHAKE_VERSIONS, Flavour

if TYPE_CHECKING:
    from .._wire._options import FakeMCPOptions
    from ._request import RequestContext

__all__ = ["accepts", "content_type_is_json", "first_header", "security_ok", "security_refusal", "unsupported_version"]

_SUPPORTED = ", ".join(HANDSHAKE_VERSIONS)


async def security_ok(request: RequestContext, options: FakeMCPOptions) -> bool:
    """The SDK's TransportSecurityMiddleware: Content-Type (POST), then Host, then Origin; answers a failure."""
    refusal = security_refusal(request, options)
    if refusal is not None:
        await request.respond(*refusal)
        return False
    return True


def security_refusal(request: RequestContext, options: FakeMCPOptions) -> tuple[int, bytes] | None:
    """What :func:`security_ok` answers a request it refuses (status, body), or None if it passes; a request that
    passes (nearly all do) costs no coroutine (issue 11)."""
    headers = request.first_headers
    if request.http_method == "POST":
        content_type = headers.get("content-type") or ""
        if not content_type.lower().startswith("application/json"):
            return 400, b"Invalid Content-Type header"
    if options.dns_rebinding_protection:
        host = headers.get("host")
        if not host or not _allowed(host, options.allowed_hosts):
            return 421, b"Invalid Host header"
        origin = headers.get("origin")
        if origin and not _allowed(origin, options.allowed_origins):  # an empty Origin passes, as in the SDK
            return 403, b"Invalid Origin header"
    return None


_ACCEPTS: dict[tuple[str | None, bool, bool, bool], bool] = {}
"""Answers of :func:`accepts` by header value: a client sends the same ``Accept`` on every request (issue 11). The
flavour is in the key as ``flavour is Flavour.MCP2``: an enum member hashes in Python code, a bool in C."""
_ACCEPTS_LIMIT = 256


def accepts(request: RequestContext, flavour: Flavour, *, json: bool, sse: bool) -> bool:
    """Whether the ``Accept`` header admits JSON (if ``json``) and SSE (if ``sse``), as that SDK line reads it."""
    key = (request.first_headers.get("accept"), flavour is Flavour.MCP2, json, sse)
    known = _ACCEPTS.get(key)
    if known is None:
        known = _accepts(key[0], flavour, json=json, sse=sse)
        if len(_ACCEPTS) < _ACCEPTS_LIMIT:
            _ACCEPTS[key] = known
    return known


def _accepts(accept: str | None, flavour: Flavour, *, json: bool, sse: bool) -> bool:
    parts = (accept or "").split(",")
    if flavour is Flavour.MCP2:
        types = [part.split(";")[0].strip().lower() for part in parts]
        has_json = any(t in ("application/json", "application/*", "*/*") for t in types)
        has_sse = any(t in ("text/event-stream", "text/*", "*/*") for t in types)
    else:  # 1.x: a case-sensitive prefix test on each raw entry (its _check_accept_headers)
        types = [part.strip() for part in parts]
        has_json = any(t.startswith("application/json") for t in types)
        has_sse = any(t.startswith("text/event-stream") for t in types)
    return (has_json or not json) and (has_sse or not sse)


_JSON_TYPES: dict[str | None, bool] = {}
"""Answers of :func:`content_type_is_json` by header value (a client sends the same one every time; issue 11)."""


def content_type_is_json(request: RequestContext) -> bool:
    """The SDK's ``_check_content_type``: ``application/json`` among the media types, exact and case-sensitive."""
    value = request.first_headers.get("content-type")
    known = _JSON_TYPES.get(value)
    if known is None:
        media_types = [part.strip() for part in (value or "").split(";")[0].split(",")]
        known = "application/json" in media_types
        if len(_JSON_TYPES) < _ACCEPTS_LIMIT:
            _JSON_TYPES[value] = known
    return known


def unsupported_version(request: RequestContext, flavour: Flavour) -> str | None:
    """1.x's refusal of an unknown ``MCP-Protocol-Version`` (after the session); None if it passes.

    2.x routes an unknown version by era instead, so it never refuses here.
    """
    version = request.protocol_version
    if flavour is Flavour.MCP1 and version is not None and version not in HANDSHAKE_VERSIONS:
        return f"Bad Request: Unsupported protocol version: {version}. Supported versions: {_SUPPORTED}"
    return None


def first_header(request: RequestContext, name: str) -> str | None:
    """The first line of a header, as the SDK reads it (Starlette's ``Headers.get``); repeats are ignored."""
    return request.first_headers.get(name)


def _allowed(value: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]):
            return True
    return False
