"""JSON-RPC 2.0 and MCP streamable-HTTP vocabulary: constants, parsing, message builders.

Pure functions, no I/O. Shapes follow what the mcp 1.27 and 2.3 SDK servers send, as measured.
"""

from __future__ import annotations

import enum
import json
import json.scanner
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ._types import JSONObject, JSONValue

__all__ = [
    "DEFAULT_NEGOTIATED_VERSION",
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "MODERN_VERSIONS",
    "Flavour",
    "Incoming",
    "ParseFailure",
    "dumps",
    "error_body",
    "error_response",
    "negotiate_version",
    "parse_message",
    "result_response",
    "sse_frame",
    "sse_ping",
]

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION: Final = "2025-11-25"
DEFAULT_NEGOTIATED_VERSION: Final = "2025-03-26"
AUTH_SERVER_PATHS: Final = ("/.well-known/", "/register", "/authorize", "/token")
"""Path prefixes of the authorization server beside the endpoint (``auth=True``): no MCP exchange starts with one."""
MODERN_VERSIONS: Final = ("2026-07-28",)

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


class Flavour(enum.StrEnum):
    """Which SDK server line the fake imitates where the two differ on the wire."""

    MCP2 = "mcp2"
    """mcp 2.x: ``"id": null`` on transport errors, -32601 for unknown methods, 4 MiB body limit."""
    MCP1 = "mcp1"
    """mcp 1.x: ``"id": "server-error"``, -32602 for unknown methods, terminated ids stay registered."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""Built once: ``json.dumps`` with arguments builds an encoder per call, on every answer (issue 11)."""


def _object_encoder() -> Callable[[JSONObject], str] | None:
    """What ``_ENCODER.encode`` does with an object, less its set-up per call: json's C encoder, made for each
    message (its table of the containers being encoded, which catches a cycle, must start empty)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without json's C speedups
        return None
    encoder = _ENCODER
    options = (
        encoder.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # no indent
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(message: JSONObject) -> str:
        return "".join(make({}, *options)(message, 0))

    return encode


_encode_object = _object_encoder()


def dumps(message: JSONValue) -> bytes:
    """Serialise compactly, as the SDK servers do."""
    if type(message) is dict and _encode_object is not None:  # every JSON-RPC message
        return _encode_object(message).encode()
    return _ENCODER.encode(message).encode()


def error_body(flavour: Flavour, code: int, message: str) -> JSONObject:
    """The JSON-RPC error body the SDK transport sends on an HTTP-level error."""
    error_id: str | None = "server-error" if flavour is Flavour.MCP1 else None
    return {"jsonrpc": "2.0", "id": error_id, "error": {"code": code, "message": message}}


def error_response(request_id: JSONValue, code: int, message: str, data: JSONValue = None) -> JSONObject:
    """A JSON-RPC error response to ``request_id``."""
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_response(request_id: JSONValue, result: JSONObject) -> JSONObject:
    """A JSON-RPC success response to ``request_id``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def sse_frame(message: JSONValue, event_id: str | None = None) -> bytes:
    """One SSE event carrying a JSON-RPC message, framed as sse-starlette frames it."""
    head = b"event: message\r\ndata: " if event_id is None else f"id: {event_id}\r\nevent: message\r\ndata: ".encode()
    return b"".join((head, dumps(message), b"\r\n\r\n"))


def sse_ping() -> bytes:
    """The keepalive comment sse-starlette sends every 15 s."""
    return f": ping - {datetime.now(UTC)}\r\n\r\n".encode()


def negotiate_version(requested: object) -> str:
    """Echo a supported handshake version, otherwise answer the latest (both SDK lines do this)."""
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return LATEST_HANDSHAKE_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """One parsed JSON-RPC message from a client POST."""

    raw: JSONObject
    method: str | None
    id: JSONValue
    params: JSONObject

    # parse_message keeps a method call's id only if it is a RequestId, so ``id`` answers both (issue 11).
    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None

    @property
    def is_notification(self) -> bool:
        """A method without a usable id: the SDK models read ``"id": null`` (or 1.0, true) as a notification."""
        return self.method is not None and self.id is None

    @property
    def is_response(self) -> bool:
        return self.method is None

    @property
    def target(self) -> str | None:
        """The tool, prompt or resource the request names (``params.name`` or ``params.uri``)."""
        for key in ("name", "uri"):
            value = self.params.get(key)
            if isinstance(value, str):
                return value
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseFailure:
    """Why a POST body is not one JSON-RPC message: the code and message the SDK answers with."""

    code: int
    message: str
    body: JSONValue = None


def _json_error_text(flavour: Flavour, body: bytes, error: ValueError) -> str:
    if flavour is Flavour.MCP2:
        try:
            import pydantic_core

            pydantic_core.from_json(body)
        except ValueError as exc:
            return str(exc)
        except ImportError:  # pragma: no cover - mcp always brings pydantic
            pass
    return str(error)


_scan_object: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # typeshed names the scanner's own type; it takes a decoder
)
"""json's own scanner: ``json.loads`` of a text with nothing around its value, without the checks for what is."""


def _loads(body: bytes) -> Any:
    """``json.loads(body)``: the same value, and the same error for a body that is not JSON."""
    if body[:2] == b'{"':
        # A body that opens with '{"' is UTF-8 to json.loads (no BOM, no NUL bytes), which decodes it just so
        # before parsing; decoding it here skips its encoding sniffing (issue 11).
        text = body.decode("utf-8", "surrogatepass")
        try:
            decoded, end = _scan_object(text, 0)
        except (StopIteration, ValueError):  # not JSON: json.loads says how, in its own words
            return json.loads(text)
        if end == len(text):  # json.loads would check that only whitespace follows: nothing does
            return decoded
        return json.loads(text)
    return json.loads(body)


def parse_message(body: bytes, flavour: Flavour) -> Incoming | ParseFailure:
    """Parse and validate a POST body as the SDK servers do (-32700, then -32602)."""
    try:
        decoded = _loads(body)
    except ValueError as exc:
        return ParseFailure(code=PARSE_ERROR, message=f"Parse error: {_json_error_text(flavour, body, exc)}")
    if type(decoded) is dict and decoded.get("jsonrpc") == "2.0":
        # A request or notification, as nearly every body is: _kind's "message" case, told at once (issue 11).
        # json.loads makes exact types only, so ``type() is`` tests what _kind's isinstance tests do.
        method, params = decoded.get("method"), decoded.get("params")
        if type(method) is str and (params is None or type(params) is dict):
            request_id = decoded.get("id")
            return Incoming(
                raw=decoded,
                method=method,
                id=request_id if type(request_id) is str or type(request_id) is int else None,
                params={} if params is None else params,
            )
    kind = _kind(decoded, flavour)
    if kind not in ("message", "response"):
        return ParseFailure(code=INVALID_PARAMS, message=f"Validation error: {kind}", body=decoded)
    message: JSONObject = decoded  # _kind checked it is an object
    if kind == "response":
        return Incoming(raw=message, method=None, id=message.get("id"), params={})
    params = message.get("params")
    request_id = message.get("id")
    return Incoming(
        raw=message,
        method=message["method"],
        id=request_id if _is_request_id(request_id) else None,
        params=params if isinstance(params, dict) else {},
    )


def _is_request_id(value: object) -> bool:
    """The SDK's ``RequestId``: a string or a strict integer (not a bool, not a float)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_lax_int(value: object) -> bool:
    """What pydantic's lax ``int`` takes: ints and bools, integral floats, numeric strings."""
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, str):
        try:
            int(value.strip())
        except ValueError:
            return False
        return True
    return False


def _is_error_id(value: object, flavour: Flavour) -> bool:
    """2.x: ``RequestId | None``; 1.x: a lax ``str | int``, not nullable."""
    if flavour is Flavour.MCP2:
        return value is None or _is_request_id(value)
    return isinstance(value, str) or _is_lax_int(value)


def _kind(decoded: Any, flavour: Flavour) -> str:
    """``"message"`` (request or notification), ``"response"`` (result or error), or what is wrong.

    Mirrors the SDK's union of pydantic models (both lines): a request or notification wins over a response;
    an id that is not a ``RequestId`` makes a method call a notification; ``params`` must be an object or null.
    """
    if isinstance(decoded, list):
        return "a batch (JSON array) is not a JSON-RPC message in this protocol version"
    if not isinstance(decoded, dict):
        return f"expected a JSON-RPC object, got {type(decoded).__name__}"
    if decoded.get("jsonrpc") != "2.0":
        return "field 'jsonrpc' must be '2.0'"
    params = decoded.get("params")
    if isinstance(decoded.get("method"), str) and (params is None or isinstance(params, dict)):
        return "message"
    has_id = "id" in decoded
    if has_id and _is_request_id(decoded["id"]) and isinstance(decoded.get("result"), dict):
        return "response"
    error = decoded.get("error")
    if (
        has_id
        and _is_error_id(decoded["id"], flavour)
        and isinstance(error, dict)
        and _is_lax_int(error.get("code"))
        and isinstance(error.get("message"), str)
    ):
        return "response"
    if "method" in decoded:
        if not isinstance(decoded["method"], str):
            return "field 'method' must be a string"
        return "field 'params' must be an object"
    return "not a JSON-RPC request, notification or response"
