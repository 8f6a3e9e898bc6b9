"""Which protocol era a request belongs to, and the answers of the era the fake does not serve yet.

The seam for serving the 2026-07-28 stateless era beside the handshake era: the app
asks :func:`era_of`, and a request of the modern era goes to :func:`answer_unserved_modern` until that
era is served; serving it means answering here instead.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ._checks import accepts, security_ok
from ._protocol import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    Flavour,
    Incoming,
    ParseFailure,
    error_response,
)

if TYPE_CHECKING:
    from ._options import FakeMCPOptions
    from ._request import RequestContext

__all__ = ["Era", "answer_unserved_modern", "era_of"]


class Era(enum.Enum):
    """Which protocol era a request belongs to (the seam for serving 2026-07-28 beside the handshake)."""

    HANDSHAKE = "handshake"
    MODERN = "modern"


def era_of(flavour: Flavour, version_header: str | None) -> Era:
    """2.x routes on the ``MCP-Protocol-Version`` header alone; 1.x knows only the handshake era."""
    if flavour is Flavour.MCP2 and version_header is not None and version_header not in HANDSHAKE_VERSIONS:
        return Era.MODERN
    return Era.HANDSHAKE


async def answer_unserved_modern(request: RequestContext, options: FakeMCPOptions) -> bool:
    """Requests routed to the stateless era, answered as a handshake-only 2.x server answers them.

    Malformed envelopes get the 2.3.0 modern handler's errors. A well-formed request (e.g. the
    ``server/discover`` probe) is left unanswered (returns False): the app refuses it as a
    session-less handshake request (``400 Missing session ID``), so an auto-mode client falls back
    to ``initialize``. Serving the era itself plugs in here.
    """
    if not await security_ok(request, options):
        return True
    if request.http_method != "POST":
        await request.respond(405, b"", headers=[("allow", "POST")])
        return True
    if not accepts(request, options.server_flavour, json=True, sse=not options.json_response):
        await request.respond(406, b"")
        return True
    message = request.message
    if isinstance(message, ParseFailure) and message.code != INVALID_PARAMS:
        await request.respond_json(
            400, {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}
        )
        return True
    if isinstance(message, Incoming) and message.is_notification:
        await request.respond(202, b"")
        return True
    if not isinstance(message, Incoming) or message.is_response:
        await request.respond_json(
            400,
            error_response(None, INVALID_REQUEST, "Body must be a single JSON-RPC request or notification object"),
        )
        return True
    if not isinstance(message.params.get("_meta"), dict):
        text = (
            "params._meta must be an object carrying the required 'io.modelcontextprotocol/protocolVersion' "
            "and 'io.modelcontextprotocol/clientCapabilities' envelope keys"
        )
        await request.respond_json(400, error_response(message.id, INVALID_PARAMS, text))
        return True
    return False
