"""Which protocol era answers a request, and the stateless 2026-07-28 era served beside the handshake.

The app asks :func:`era_of` for every request. A handshake request goes down the app's session path; a
modern one to :class:`ModernEra`, which answers it as the mcp 2.3.0 server's modern handler does: security,
405 for anything but POST, Accept, parse, notification (202), one request object, duplicated routing headers,
the envelope ladder (``_meta``, then the ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` headers, then
the version), the ``Mcp-Param-*`` headers of a ``tools/call``, then the method. The JSON-RPC error code picks the
HTTP status. A fake serving only the handshake era answers well-formed modern requests as a session-less
handshake request instead (:func:`answer_unserved_modern`), so an auto-mode client falls back to ``initialize``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._wire._errors import JSONRPCError
from .._wire._mcp_param import PARAM_HEADER_PREFIX, decode_header_value, param_header_mismatch
from .._wire._protocol import (
    HANDSHAKE_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    PARSE_ERROR,
    VERSION_HEADER,
    Flavour,
    Incoming,
    ParseFailure,
    error_response,
    result_response,
)
from ._announce import announce_capabilities
from ._catalog import Context
from ._checks import accepts, security_ok
from ._handlers import CACHEABLE_METHODS

if TYPE_CHECKING:
    from .._wire._options import FakeMCPOptions
    from .._wire._types import JSONObject, JSONValue
    from ._announce import Announcer
    from ._handlers import MethodHandlers
    from ._request import RequestContext

__all__ = [
    "HEADER_MISMATCH",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "CacheHint",
    "Era",
    "ModernEra",
    "answer_unserved_modern",
    "era_of",
    "modern_status",
]

HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
_NAME_BEARING: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_ROUTING_HEADERS: Final = frozenset({VERSION_HEADER, METHOD_HEADER, NAME_HEADER})
_STATUS_OF_CODE: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
_INVALID_BODY: Final = "Body must be a single JSON-RPC request or notification object"
_SSE_HEADERS: Final = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache, no-transform"),
    ("connection", "keep-alive"),
    ("x-accel-buffering", "no"),
)


class Era(enum.Enum):
    """Which protocol era answers a request."""

    HANDSHAKE = "handshake"
    """Sessions, ``initialize``, ``Mcp-Session-Id`` (protocol 2024-11-05 to 2025-11-25)."""
    MODERN = "modern"
    """Stateless: every request carries its envelope, ``server/discover`` (protocol 2026-07-28)."""


def era_of(flavour: Flavour, served: str, version_header: str | None) -> Era:
    """2.x routes on the ``MCP-Protocol-Version`` header alone; a modern-only fake routes everything to that era.

    1.x knows only the handshake era (its own version check refuses the rest). ``served`` is ``"handshake"``,
    ``"modern"`` or ``"dual"``; a handshake-only fake still routes a modern header here, to refuse it.
    """
    if flavour is Flavour.MCP1:
        return Era.HANDSHAKE
    if served == "modern":
        return Era.MODERN
    if version_header is not None and version_header not in HANDSHAKE_VERSIONS:
        return Era.MODERN
    return Era.HANDSHAKE


def modern_status(code: int | None) -> int:
    """The HTTP status of a modern-era answer with JSON-RPC error ``code`` (None: a result, 200)."""
    return 200 if code is None else _STATUS_OF_CODE.get(code, 200)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheHint:
    """The ``ttlMs`` and ``cacheScope`` a cacheable modern result carries."""

    ttl_ms: int = 0
    scope: str = "private"

    def __str__(self) -> str:
        return f"ttlMs={self.ttl_ms} cacheScope={self.scope!r}"


class ModernEra:
    """Answers 2026-07-28 requests: no session, the envelope checked on every request, JSON unless it streams."""

    def __init__(
        self,
        handlers: MethodHandlers,
        options: Callable[[], FakeMCPOptions],
        record_error: Callable[[str, BaseException], object],
    ) -> None:
        self.handlers = handlers
        self._options = options
        self._record_error = record_error
        self.announcer: Announcer | None = None
        """Serves ``subscriptions/listen`` when the fake announces list changes (``list_changed=True``)."""

    async def serve(self, request: RequestContext) -> None:
        options = self._options()
        if not await security_ok(request, options):
            return
        if request.http_method != "POST":
            await request.respond(405, b"", headers=[("allow", "POST")])
            return
        if not accepts(request, Flavour.MCP2, json=True, sse=not options.json_response):
            await request.respond(406, b"")
            return
        try:
            decoded: Any = json.loads(request.body)
        except (ValueError, RecursionError):
            await self._write(request, error_response(None, PARSE_ERROR, "Parse error"))
            return
        if isinstance(decoded, dict) and "id" not in decoded:
            await self._acknowledge(request, decoded)
            return
        message = request.message
        if not _is_single_request(decoded) or not isinstance(message, Incoming):
            await self._write(request, error_response(None, INVALID_REQUEST, _INVALID_BODY))
            return
        refusal = self._refusal(request, message)
        if refusal is not None:
            await self._write(request, refusal)
            return
        await self._answer(request, message, options)

    def _refusal(self, request: RequestContext, message: Incoming) -> JSONObject | None:
        """The first check of the modern ladder the request fails, as its error answer; None if it passes."""
        duplicated = _duplicated_routing_header(request.header_list)
        if duplicated is not None:
            return error_response(message.id, HEADER_MISMATCH, f"{duplicated} header appears more than once")
        if message.method == "initialize" and request.protocol_version in (None, *HANDSHAKE_VERSIONS):
            # Only a modern-only server routes a handshake-era request here: it names the versions it serves.
            requested = message.params.get("protocolVersion")
            data: JSONObject = {"supported": list(MODERN_VERSIONS)}
            if isinstance(requested, str):
                data["requested"] = requested
            return error_response(message.id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)
        return _ladder(message, request.headers) or self._param_refusal(request, message)

    def _param_refusal(self, request: RequestContext, message: Incoming) -> JSONObject | None:
        """A ``tools/call`` whose ``Mcp-Param-*`` headers disagree with its arguments, as the 2.3.0 server finds it.

        Checked against the called tool's input schema; an unknown tool, arguments that are not an object, or a
        call with neither arguments nor such headers is left to the method.
        """
        if message.method != "tools/call":
            return None
        name, arguments = message.params.get("name"), message.params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return None
        prefix = PARAM_HEADER_PREFIX.lower()
        if not arguments and not any(header.startswith(prefix) for header, _ in request.header_list):
            return None
        tool = self.handlers.catalog.tools.get(name)
        if tool is None:
            return None
        mismatch = param_header_mismatch(tool.input_schema, arguments or {}, request.header_list)
        return None if mismatch is None else error_response(message.id, HEADER_MISMATCH, mismatch)

    async def _acknowledge(self, request: RequestContext, decoded: dict[str, Any]) -> None:
        """An id-less body: 202 for a notification at a served version (then dropped), else refused."""
        params = decoded.get("params")
        if decoded.get("jsonrpc") != "2.0" or not isinstance(decoded.get("method"), str) or not _is_params(params):
            await self._write(request, error_response(None, INVALID_REQUEST, _INVALID_BODY))
            return
        requested = request.protocol_version or ""
        if requested not in MODERN_VERSIONS:
            await self._write(request, _unsupported(None, requested))
            return
        await request.respond(202, b"")

    async def _write(self, request: RequestContext, message: JSONObject) -> None:
        error = message.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        await request.respond_json(modern_status(code if isinstance(code, int) else None), message)

    async def _answer(self, request: RequestContext, message: Incoming, options: FakeMCPOptions) -> None:
        """Run the method; JSON unless it emits a notification (SSE mode) or outlasts the ping interval.

        Closing the request's stream cancels the handler: in this era that is how a client cancels.
        """
        if request.disconnected.is_set():  # the client already gave up (e.g. a held probe it timed out on)
            return
        queue: asyncio.Queue[JSONObject] = asyncio.Queue()
        meta = message.params.get("_meta")
        ctx = Context(
            session_id=None,
            state={},
            request_id=message.id,
            progress_token=meta.get("progressToken") if isinstance(meta, dict) else None,
            emit=queue.put_nowait,
            seq=request.seq,
        )
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._run(request, message, ctx))
        gone = loop.create_task(request.disconnected.wait())
        try:
            if options.json_response and message.method != "subscriptions/listen":  # a listen stream is SSE always
                await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    await self._write(request, task.result())
                return
            getter: asyncio.Future[JSONObject] = asyncio.ensure_future(queue.get())
            waiters: set[asyncio.Future[Any]] = {task, getter, gone}
            done, _ = await asyncio.wait(
                waiters, timeout=options.sse_ping_interval, return_when=asyncio.FIRST_COMPLETED
            )
            if task in done and getter not in done:
                getter.cancel()
                await self._write(request, task.result())
                return
            if gone in done:
                getter.cancel()
                return
            await request.start(200, _SSE_HEADERS, "sse")
            while True:
                if getter.done():
                    await request.send_event(getter.result())
                    getter = asyncio.ensure_future(queue.get())
                elif not task.done():
                    await request.write(b": ping\r\n\r\n")
                if task.done() and queue.empty():
                    getter.cancel()
                    break
                waiters = {task, getter, gone}
                done, _ = await asyncio.wait(
                    waiters, timeout=options.sse_ping_interval, return_when=asyncio.FIRST_COMPLETED
                )
                if gone in done:
                    getter.cancel()
                    return
            await request.send_event(task.result())
            await request.finish()
        finally:
            for pending in (task, gone):
                if not pending.done():
                    pending.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pending

    async def _run(self, request: RequestContext, message: Incoming, ctx: Context) -> JSONObject:
        method = message.method or ""
        try:
            if method == "server/discover":
                result = self.discover(request.discover_versions)
            elif method == "subscriptions/listen" and self.announcer is not None and self._options().list_changed:
                result = await self.announcer.listen(message.id, message.params, ctx._emit)
            else:
                result = await self.handlers.answer_modern(message, ctx)
            hint = CacheHint(ttl_ms=request.cache_hint[0], scope=request.cache_hint[1]) if request.cache_hint else None
            return result_response(message.id, self._shaped(method, result, hint))
        except JSONRPCError as exc:
            return error_response(message.id, exc.code, exc.message, exc.data)
        except Exception as exc:
            what = " ".join(filter(None, [method, message.target]))
            self._record_error(f"handler of {what} (exchange #{request.seq})", exc)
            return error_response(message.id, INTERNAL_ERROR, "Internal server error")

    def discover(self, versions: tuple[str, ...] | None = None) -> JSONObject:
        """The ``server/discover`` result (before its cache hint and server stamp); ``versions`` replace ours."""
        options = self._options()
        result: JSONObject = {
            "supportedVersions": list(MODERN_VERSIONS if versions is None else versions),
            "capabilities": announce_capabilities(self.handlers.capabilities(), options),
        }
        if options.instructions is not None:
            result["instructions"] = options.instructions
        return result

    def _shaped(self, method: str, result: JSONObject, hint: CacheHint | None = None) -> JSONObject:
        """``resultType``, a cacheable result's cache hint and the server's stamp, as the 2.3.0 server adds them."""
        options = self._options()
        shaped: JSONObject = {}
        if method in CACHEABLE_METHODS:
            hint = hint or CacheHint()
            shaped.update({"ttlMs": hint.ttl_ms, "cacheScope": hint.scope})
        shaped.update(result)
        shaped.setdefault("resultType", "complete")
        meta = shaped.get("_meta")
        stamp = {SERVER_INFO_KEY: {"name": options.server_name, "version": options.server_version}}
        shaped["_meta"] = {**meta, **stamp} if isinstance(meta, dict) else stamp
        return shaped


def _is_params(params: object) -> bool:
    return params is None or isinstance(params, dict)


def _is_single_request(decoded: Any) -> bool:
    """The SDK's ``JSONRPCRequest``: one object, ``jsonrpc`` 2.0, a string or integer id, a string method."""
    if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
        return False
    request_id = decoded.get("id")
    id_ok = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    return id_ok and isinstance(decoded.get("method"), str) and _is_params(decoded.get("params"))


def _duplicated_routing_header(header_list: list[tuple[str, str]]) -> str | None:
    seen: set[str] = set()
    for name, _ in header_list:
        if name in _ROUTING_HEADERS:
            if name in seen:
                return name
            seen.add(name)
    return None


def _unsupported(request_id: JSONValue, requested: str) -> JSONObject:
    data: JSONObject = {"supported": list(MODERN_VERSIONS), "requested": requested}
    return error_response(request_id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)


def _ladder(message: Incoming, headers: dict[str, str]) -> JSONObject | None:
    """The envelope checks of the 2.3.0 server, first failure wins: ``_meta``, the headers, the version."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict):
        text = (
            f"params._meta must be an object carrying the required {PROTOCOL_VERSION_KEY!r} "
            f"and {CLIENT_CAPABILITIES_KEY!r} envelope keys"
        )
        return error_response(message.id, INVALID_PARAMS, text)
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        text = f"params._meta is missing the required envelope key(s): {', '.join(missing)}"
        return error_response(message.id, INVALID_PARAMS, text)
    version = meta[PROTOCOL_VERSION_KEY]
    if headers.get(VERSION_HEADER) is None or headers.get(VERSION_HEADER) != version:
        text = f"{VERSION_HEADER} header does not match the request envelope's protocol version"
        return error_response(message.id, HEADER_MISMATCH, text)
    if headers.get(METHOD_HEADER) != message.method:
        return error_response(
            message.id, HEADER_MISMATCH, f"{METHOD_HEADER} header does not match the request body's method"
        )
    name_key = _NAME_BEARING.get(message.method or "")
    if name_key is not None:
        body_value = message.params.get(name_key)
        if body_value is not None and decode_header_value(headers.get(NAME_HEADER)) != body_value:
            text = f"{NAME_HEADER} header does not match the request body's {name_key!r} parameter"
            return error_response(message.id, HEADER_MISMATCH, text)
    if not isinstance(version, str):
        return error_response(message.id, INVALID_PARAMS, "the protocol-version envelope value must be a string")
    if version not in MODERN_VERSIONS:
        return _unsupported(message.id, version)
    return None


async def answer_unserved_modern(request: RequestContext, options: FakeMCPOptions) -> bool:
    """Requests routed to the stateless era when the fake serves only the handshake, answered as a
    handshake-only 2.x server answers them.

    Malformed envelopes get the 2.3.0 modern handler's errors. A well-formed request (e.g. the
    ``server/discover`` probe) is left unanswered (returns False): the app refuses it as a
    session-less handshake request (``400 Missing session ID``), so an auto-mode client falls back
    to ``initialize``.
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
        await request.respond_json(400, error_response(None, PARSE_ERROR, "Parse error"))
        return True
    if isinstance(message, Incoming) and message.is_notification:
        await request.respond(202, b"")
        return True
    if not isinstance(message, Incoming) or message.is_response:
        await request.respond_json(400, error_response(None, INVALID_REQUEST, _INVALID_BODY))
        return True
    if not isinstance(message.params.get("_meta"), dict):
        text = (
            f"params._meta must be an object carrying the required {PROTOCOL_VERSION_KEY!r} "
            f"and {CLIENT_CAPABILITIES_KEY!r} envelope keys"
        )
        await request.respond_json(400, error_response(message.id, INVALID_PARAMS, text))
        return True
    return False
