"""Answers to JSON-RPC requests in the handshake era: initialize, ping, tools, resources, prompts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .._wire._errors import JSONRPCError
from .._wire._protocol import INVALID_PARAMS, METHOD_NOT_FOUND, Flavour, Incoming, negotiate_version
from .._wire._types import JSONObject, JSONValue, SessionId
from ._announce import announce_capabilities
from ._catalog import Catalog, Context, ServerRequests

if TYPE_CHECKING:
    from .._record._sessions import Session
    from .._wire._options import FakeMCPOptions

__all__ = ["CACHEABLE_METHODS", "KNOWN_METHODS", "MODERN_METHODS", "MethodHandlers", "ToolExecution", "ToolLedger"]

KNOWN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "logging/setLevel",
        "completion/complete",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
        "server/discover",
    }
)
"""Every method name the fake knows; fault scripts are checked against it for typos."""

MODERN_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
"""The requests the 2026-07-28 era serves: ``initialize``, ``ping`` and ``logging/setLevel`` are gone from it (a
2.3.0 server answers them 404 -32601, as any unknown method)."""

CACHEABLE_METHODS = frozenset(
    {"server/discover", "tools/list", "resources/list", "resources/read", "resources/templates/list", "prompts/list"}
)
"""Modern-era results that must carry ``ttlMs`` and ``cacheScope`` (the 2.x client rejects them otherwise)."""

_INVALID = "Invalid request parameters"
"""What both SDK lines answer (-32602, ``data: ""``) for params their request models reject, or a request
that arrives before the session is initialized."""
_LOG_LEVELS = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
_CAPABILITY_FIELDS = ("experimental", "roots", "sampling", "elicitation", "tasks")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One run of a tool's handler (the side-effect ledger): what ran, with which arguments, for whom."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    session_id: SessionId | None = None
    seq: int
    """The exchange that ran it."""
    delivered: bool = True
    """False if a fault kept the result from the client (the call ran, the client never heard)."""

    def __str__(self) -> str:
        lost = "" if self.delivered else ", result never delivered"
        return f"{self.tool}({json.dumps(dict(self.arguments), sort_keys=True)}) in exchange #{self.seq}{lost}"


class ToolLedger:
    """The one record of tool runs: a run is written when its handler is entered, never for a refused call.

    Every figure reads it: ``tool_executions``, ``executions()``, ``assert_tool_ran`` and the diagram.
    """

    def __init__(self) -> None:
        # A run is kept as its fields and made a record when read: every tools/call writes one before its answer,
        # and few are ever read (issue 11: per-call cost).
        self._runs: list[ToolExecution | tuple[str, dict[str, Any], SessionId | None, int]] = []
        self.counts: Counter[str] = Counter()

    def ran(self, tool: str, arguments: Mapping[str, Any], ctx: Context) -> None:
        self._runs.append((tool, dict(arguments), ctx.session_id, ctx.seq))
        self.counts[tool] += 1

    def undelivered(self, seq: int) -> None:
        """The runs of exchange ``seq`` never reached the client (a fault swallowed or cut the answer)."""
        self._runs = [replace(_record(run), delivered=False) if _seq(run) == seq else run for run in self._runs]

    def redelivered(self, seq: int) -> None:
        """A replay delivered the result of exchange ``seq`` after all (a resumed stream, _fake/_events.py)."""
        if any(_seq(run) == seq for run in self._runs):
            self._runs = [replace(_record(run), delivered=True) if _seq(run) == seq else run for run in self._runs]

    def runs(self) -> list[ToolExecution]:
        runs = self._runs
        out = [_record(run) for run in list(runs)]
        for i, record in enumerate(out):  # made once: later reads return the same records
            run = runs[i] if i < len(runs) else None
            if isinstance(run, tuple) and _seq(run) == record.seq:
                runs[i] = record
        return out

    def clear(self) -> None:
        self._runs.clear()
        self.counts.clear()


def _record(run: ToolExecution | tuple[str, dict[str, Any], SessionId | None, int]) -> ToolExecution:
    if isinstance(run, ToolExecution):
        return run
    tool, arguments, session_id, seq = run
    return ToolExecution(tool=tool, arguments=arguments, session_id=session_id, seq=seq)


def _seq(run: ToolExecution | tuple[str, dict[str, Any], SessionId | None, int]) -> int:
    return run.seq if isinstance(run, ToolExecution) else run[3]


class MethodHandlers:
    """Turns one JSON-RPC request into its result (or raises JSONRPCError)."""

    def __init__(self, catalog: Catalog, options: Callable[[], FakeMCPOptions]) -> None:
        self.catalog = catalog
        self._options = options
        self.ledger = ToolLedger()
        self.server_requests = ServerRequests()
        """Requests handlers sent clients (``ctx.request()``), waiting for the answers."""
        self._handlers: dict[str, Callable[[JSONObject, Context], Awaitable[JSONObject]]] | None = None

    @property
    def tool_executions(self) -> Counter[str]:
        """How many times each tool's handler was entered."""
        return self.ledger.counts

    def capabilities(self) -> JSONObject:
        caps: JSONObject = {}
        if self._options().server_flavour is Flavour.MCP1:
            caps["experimental"] = {}
        caps["logging"] = {}
        caps["completions"] = {}
        caps["prompts"] = {"listChanged": False}
        caps["resources"] = {"listChanged": False, "subscribe": self.catalog.subscriptions}
        caps["tools"] = {"listChanged": False}
        return caps

    def initialize(self, message: Incoming, session: Session) -> JSONObject:
        options = self._options()
        if not _params_valid("initialize", message.params, options.server_flavour):
            raise JSONRPCError(INVALID_PARAMS, _INVALID, "")
        version = negotiate_version(message.params.get("protocolVersion"))
        session.initialize_count += 1
        session.protocol_version = version
        session.initialized = True
        result: JSONObject = {
            "capabilities": announce_capabilities(self.capabilities(), options),
            "protocolVersion": version,
            "serverInfo": {"name": options.server_name, "version": options.server_version},
        }
        if options.instructions is not None:
            result["instructions"] = options.instructions
        return result

    async def answer(self, message: Incoming, session: Session, ctx: Context) -> JSONObject:
        """The result of ``message``; raises JSONRPCError for a JSON-RPC error answer."""
        method = message.method or ""
        params = message.params
        if method == "initialize":
            return self.initialize(message, session)
        flavour = self._options().server_flavour
        ctx.bind_server_requests(self.server_requests)
        table = self._handlers
        handler = (self._table() if table is None else table).get(method)
        if method in ("resources/subscribe", "resources/unsubscribe") and self.catalog.subscriptions:
            handler = self._empty
        if method == "logging/setLevel":
            handler = self._empty
        # The SDK's order: 1.x validates the whole request union first, so unknown methods fail there too (-32602);
        # 2.x looks the handler up first (-32601, whatever the params), then validates that method's params; then
        # the gate that refuses requests before initialization (ping exempt).
        if handler is None and flavour is Flavour.MCP2:
            raise JSONRPCError(METHOD_NOT_FOUND, "Method not found", method)
        if handler is None or not _params_valid(method, params, flavour):
            raise JSONRPCError(INVALID_PARAMS, _INVALID, "")
        if not session.initialized and method != "ping":
            raise JSONRPCError(INVALID_PARAMS, _INVALID, "")
        if method == "logging/setLevel":
            level = params["level"]  # _params_valid checked it is a known level
            session.log_level = level if isinstance(level, str) else None
        return await handler(params, ctx)

    async def answer_modern(self, message: Incoming, ctx: Context) -> JSONObject:
        """The result of a 2026-07-28 request (no session); raises JSONRPCError as :meth:`answer` does.

        The 2.3.0 server's order: the method lookup (-32601 for anything the era does not have), then the
        request model (-32602). ``server/discover`` is answered by the caller, which owns its cache hints.
        """
        method = message.method or ""
        handler = self._table().get(method) if method in MODERN_METHODS else None
        if handler is None:
            raise JSONRPCError(METHOD_NOT_FOUND, "Method not found", method)
        if not _params_valid(method, message.params, Flavour.MCP2):
            raise JSONRPCError(INVALID_PARAMS, _INVALID, "")
        return await handler(message.params, ctx)

    def _table(self) -> dict[str, Callable[[JSONObject, Context], Awaitable[JSONObject]]]:
        table = self._handlers
        if table is None:  # built once: every request looks its method up here (issue 11)
            table = self._handlers = self._build_table()
        return table

    def _build_table(self) -> dict[str, Callable[[JSONObject, Context], Awaitable[JSONObject]]]:
        return {
            "ping": self._empty,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "resources/list": self._list_resources,
            "resources/read": self.catalog.read_resource,
            "resources/templates/list": self._list_templates,
            "prompts/list": self._list_prompts,
            "prompts/get": self.catalog.get_prompt,
            "completion/complete": self._complete,
        }

    async def _empty(self, params: JSONObject, ctx: Context) -> JSONObject:
        return {}

    async def _list_tools(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_tools()

    def _call_tool(self, params: JSONObject, ctx: Context) -> Awaitable[JSONObject]:
        # The catalog's coroutine itself, awaited by the caller: one coroutine fewer per call (issue 11).
        arguments = params.get("arguments")
        return self.catalog.call_tool(
            params,
            ctx,
            on_run=lambda name: self.ledger.ran(name, arguments if isinstance(arguments, dict) else {}, ctx),
        )

    async def _list_resources(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_resources()

    async def _list_templates(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_templates()

    async def _list_prompts(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_prompts()

    async def _complete(self, params: JSONObject, ctx: Context) -> JSONObject:
        return {"completion": {"values": [], "total": 0, "hasMore": False}}


def _is_object(value: JSONValue, *, nullable: bool = True) -> bool:
    return isinstance(value, dict) or (nullable and value is None)


def _is_text(value: JSONValue, *, nullable: bool = False) -> bool:
    return isinstance(value, str) or (nullable and value is None)


def _params_valid(method: str, params: JSONObject, flavour: Flavour) -> bool:
    """Whether the SDK's request model for ``method`` accepts ``params`` (its top-level fields; absent = ``{}``)."""
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return False
    if method == "tools/call":  # the commonest, first (issue 11)
        arguments = params.get("arguments")
        return isinstance(params.get("name"), str) and (arguments is None or isinstance(arguments, dict))
    if method == "initialize":
        version = params.get("protocolVersion")
        info = params.get("clientInfo")
        capabilities = params.get("capabilities")
        return (
            (isinstance(version, str) or (flavour is Flavour.MCP1 and isinstance(version, int)))  # 1.x: str | int
            and isinstance(capabilities, dict)
            and all(_is_object(capabilities.get(name)) for name in _CAPABILITY_FIELDS)
            and isinstance(info, dict)
            and _is_text(info.get("name"))
            and _is_text(info.get("version"))
        )
    if method in ("ping",):
        return True
    if method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
        return _is_text(params.get("cursor"), nullable=True)
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        return _is_text(params.get("uri"))
    if method == "prompts/get":
        arguments = params.get("arguments")
        return _is_text(params.get("name")) and (
            arguments is None or (isinstance(arguments, dict) and all(isinstance(v, str) for v in arguments.values()))
        )
    if method == "logging/setLevel":
        return params.get("level") in _LOG_LEVELS
    if method == "completion/complete":
        ref, argument = params.get("ref"), params.get("argument")
        return (
            isinstance(ref, dict)
            and ref.get("type") in ("ref/prompt", "ref/resource")
            and isinstance(argument, dict)
            and _is_text(argument.get("name"))
            and _is_text(argument.get("value"))
        )
    return True
