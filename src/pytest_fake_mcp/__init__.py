"""pytest-fake-mcp: a fake streamable-HTTP MCP server for testing MCP clients.

Example::

    async def test_my_agent_lists_tools(fake_mcp_server):
        fake_mcp_server.add_tool("search", handler=lambda query: f"results for {query}")
        client = MyAgentMcpClient(fake_mcp_server.url)
        assert "search" in await client.tool_names()

Names are imported on first use, so loading the pytest plugin (which imports this package)
costs unrelated test runs nothing: Starlette, uvicorn and the SDKs load only when a test needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
    from ._assertions import ServerFigures
    from ._cache import SessionCache
    from ._client import ReusingSessionClient, SessionClosedError, SessionLostError, SessionOpenError
    from ._counters import HTTPClientCounter, HTTPClientRecord
    from ._errors import (
        FakeMCPError,
        JSONRPCError,
        LifecycleError,
        ScriptError,
        ServerSideError,
        ToolError,
        VerificationError,
    )
    from ._faults import ScriptedFault
    from ._gate import Gate
    from ._handlers import ToolExecution
    from ._journal import Exchange, Journal, JournalEvent, Outcome
    from ._options import FakeMCPOptions
    from ._protocol import Flavour
    from ._server import FakeMCPServer, FakeMCPServerFactory
    from ._sessions import EndReason, SessionRecord
    from ._shapes import SessionLossShape
    from ._tools import Context, ToolResult

_EXPORTS: dict[str, str] = {
    "Context": "_tools",
    "EndReason": "_sessions",
    "Exchange": "_journal",
    "FakeMCPError": "_errors",
    "FakeMCPOptions": "_options",
    "FakeMCPServer": "_server",
    "FakeMCPServerFactory": "_server",
    "Flavour": "_protocol",
    "Gate": "_gate",
    "HTTPClientCounter": "_counters",
    "HTTPClientRecord": "_counters",
    "JSONRPCError": "_errors",
    "Journal": "_journal",
    "JournalEvent": "_journal",
    "LifecycleError": "_errors",
    "Outcome": "_journal",
    "ReusingSessionClient": "_client",
    "ScriptError": "_errors",
    "ScriptedFault": "_faults",
    "ServerFigures": "_assertions",
    "ServerSideError": "_errors",
    "SessionCache": "_cache",
    "SessionClosedError": "_client",
    "SessionLossShape": "_shapes",
    "SessionLostError": "_client",
    "SessionOpenError": "_client",
    "SessionRecord": "_sessions",
    "ToolError": "_errors",
    "ToolExecution": "_handlers",
    "ToolResult": "_tools",
    "VerificationError": "_errors",
}

__all__ = [
    "Context",
    "EndReason",
    "Exchange",
    "FakeMCPError",
    "FakeMCPOptions",
    "FakeMCPServer",
    "FakeMCPServerFactory",
    "Flavour",
    "Gate",
    "HTTPClientCounter",
    "HTTPClientRecord",
    "JSONRPCError",
    "Journal",
    "JournalEvent",
    "LifecycleError",
    "Outcome",
    "ReusingSessionClient",
    "ScriptError",
    "ScriptedFault",
    "ServerFigures",
    "ServerSideError",
    "SessionCache",
    "SessionClosedError",
    "SessionLossShape",
    "SessionLostError",
    "SessionOpenError",
    "SessionRecord",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "VerificationError",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        globals()[name] = version("pytest-fake-mcp")
        return globals()[name]
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'pytest_fake_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    if isinstance(value, type) and value.__module__.startswith("pytest_fake_mcp."):
        value.__module__ = "pytest_fake_mcp"  # tracebacks and reprs show the name users import
    globals()[name] = value
    return value


def _resolve_public_names() -> None:
    """Resolve every public name now, so each prints as ``pytest_fake_mcp.X`` even if first met elsewhere.

    The plugin calls it when a fixture starts a server (which imports most modules anyway): an error
    raised from a private module then shows ``pytest_fake_mcp.VerificationError`` in the test report.
    """
    for name in __all__:
        __getattr__(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
