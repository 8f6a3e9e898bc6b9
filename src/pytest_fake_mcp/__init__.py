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
    from ._client._oauth import HeadlessOAuth
    from ._fake._catalog import Context, ToolResult
    from ._fake._gate import Gate
    from ._fake._handlers import ToolExecution
    from ._fake._shapes import SessionLossShape
    from ._faults import ScriptedFault
    from ._host._factory import FakeMCPServerFactory
    from ._host._server import FakeMCPServer
    from ._oracles._figures import ServerFigures
    from ._record._counters import HTTPClientCounter, HTTPClientRecord
    from ._record._journal import Exchange, Journal, JournalEvent, Outcome
    from ._record._sessions import EndReason, SessionRecord
    from ._wire._errors import (
        FakeMCPError,
        JSONRPCError,
        LifecycleError,
        ScriptError,
        ServerSideError,
        ToolError,
        VerificationError,
    )
    from ._wire._options import FakeMCPOptions
    from ._wire._protocol import Flavour

_EXPORTS: dict[str, str] = {
    "Context": "_fake._catalog",
    "EndReason": "_record._sessions",
    "Exchange": "_record._journal",
    "FakeMCPError": "_wire._errors",
    "FakeMCPOptions": "_wire._options",
    "FakeMCPServer": "_host._server",
    "FakeMCPServerFactory": "_host._factory",
    "Flavour": "_wire._protocol",
    "Gate": "_fake._gate",
    "HTTPClientCounter": "_record._counters",
    "HTTPClientRecord": "_record._counters",
    "HeadlessOAuth": "_client._oauth",
    "JSONRPCError": "_wire._errors",
    "Journal": "_record._journal",
    "JournalEvent": "_record._journal",
    "LifecycleError": "_wire._errors",
    "Outcome": "_record._journal",
    "ScriptError": "_wire._errors",
    "ScriptedFault": "_faults",
    "ServerFigures": "_oracles._figures",
    "ServerSideError": "_wire._errors",
    "SessionLossShape": "_fake._shapes",
    "SessionRecord": "_record._sessions",
    "ToolError": "_wire._errors",
    "ToolExecution": "_fake._handlers",
    "ToolResult": "_fake._catalog",
    "VerificationError": "_wire._errors",
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
    "HeadlessOAuth",
    "JSONRPCError",
    "Journal",
    "JournalEvent",
    "LifecycleError",
    "Outcome",
    "ScriptError",
    "ScriptedFault",
    "ServerFigures",
    "ServerSideError",
    "SessionLossShape",
    "SessionRecord",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "VerificationError",
]


_MOVED: dict[str, str] = {
    "ReusingSessionClient": "client",
    "SessionCache": "client",
    "SessionClosedError": "client",
    "SessionLostError": "client",
    "SessionOpenError": "client",
}
"""Names that moved to a public submodule: importing them from here works, with a warning, until the next release."""


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"pytest_fake_mcp.{name} moved: import it from pytest_fake_mcp.{_MOVED[name]} "
            "(the old name goes in the next release; docs/reusing-client.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(f".{_MOVED[name]}", __name__), name)
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
