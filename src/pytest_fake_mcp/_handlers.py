"""Answers to JSON-RPC requests in the handshake era: initialize, ping, tools, resources, prompts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._errors import JSONRPCError
from ._protocol import INVALID_PARAMS, METHOD_NOT_FOUND, Flavour, Incoming, negotiate_version
from ._tools import Catalog, Context
from ._types import JSONObject

if TYPE_CHECKING:
    from ._options import FakeMCPOptions
    from ._sessions import Session

__all__ = ["KNOWN_METHODS", "MethodHandlers"]

KNOWN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
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


class MethodHandlers:
    """Turns one JSON-RPC request into its result (or raises JSONRPCError)."""

    def __init__(self, catalog: Catalog, options: Callable[[], FakeMCPOptions]) -> None:
        self.catalog = catalog
        self._options = options
        self.tool_executions: Counter[str] = Counter()

    def capabilities(self) -> JSONObject:
        caps: JSONObject = {}
        if self._options().server_flavour is Flavour.MCP1:
            caps["experimental"] = {}
        caps["logging"] = {}
        caps["completions"] = {}
        caps["prompts"] = {"listChanged": False}
        caps["resources"] = {"listChanged": False, "subscribe": False}
        caps["tools"] = {"listChanged": False}
        return caps

    def initialize(self, message: Incoming, session: Session) -> JSONObject:
        options = self._options()
        version = negotiate_version(message.params.get("protocolVersion"))
        session.initialize_count += 1
        session.protocol_version = version
        session.initialized = True
        result: JSONObject = {
            "capabilities": self.capabilities(),
            "protocolVersion": version,
            "serverInfo": {"name": options.server_name, "version": options.server_version},
        }
        if options.instructions is not None:
            result["instructions"] = options.instructions
        return result

    async def answer(self, message: Incoming, session: Session, ctx: Context) -> JSONObject:
        """The result of ``message``; raises JSONRPCError for a JSON-RPC error answer."""
        method = message.method
        params = message.params
        handler = self._table().get(method or "")
        if handler is None:
            if method == "initialize":
                return self.initialize(message, session)
            if method == "logging/setLevel":
                level = params.get("level")
                if not isinstance(level, str):
                    raise JSONRPCError(INVALID_PARAMS, "Invalid params: 'level' must be a string")
                session.log_level = level
                return {}
            if self._options().server_flavour is Flavour.MCP1:
                raise JSONRPCError(INVALID_PARAMS, "Invalid request parameters", "")
            raise JSONRPCError(METHOD_NOT_FOUND, "Method not found", method)
        return await handler(params, ctx)

    def _table(self) -> dict[str, Callable[[JSONObject, Context], Awaitable[JSONObject]]]:
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

    async def _call_tool(self, params: JSONObject, ctx: Context) -> JSONObject:
        name = params.get("name")
        if isinstance(name, str) and name in self.catalog.tools:
            self.tool_executions[name] += 1
        return await self.catalog.call_tool(params, ctx)

    async def _list_resources(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_resources()

    async def _list_templates(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_templates()

    async def _list_prompts(self, params: JSONObject, ctx: Context) -> JSONObject:
        return self.catalog.list_prompts()

    async def _complete(self, params: JSONObject, ctx: Context) -> JSONObject:
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
