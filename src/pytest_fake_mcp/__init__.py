"""pytest-fake-mcp: a fake streamable-HTTP MCP server for testing MCP clients.

Example::

    async def test_my_agent_lists_tools(fake_mcp_server):
        fake_mcp_server.add_tool("search", handler=lambda query: f"results for {query}")
        client = MyAgentMcpClient(fake_mcp_server.url)
        assert "search" in await client.tool_names()
"""

from __future__ import annotations

from ._assertions import ServerFigures
from ._cache import SessionCache
from ._client import ReusingSessionClient, SessionClosedError, SessionLostError, SessionOpenError
from ._errors import (
    FakeMCPError,
    JSONRPCError,
    LifecycleError,
    ScriptError,
    ServerSideError,
    ToolError,
    VerificationError,
)
from ._gate import Gate
from ._journal import Exchange, Journal, JournalEvent, Outcome
from ._options import FakeMCPOptions
from ._protocol import Flavour
from ._script import ToolExecution
from ._scripted_fault import ScriptedFault
from ._server import FakeMCPServer, FakeMCPServerFactory
from ._sessions import EndReason, SessionRecord
from ._shapes import SessionLossShape
from ._tools import Context, ToolResult

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

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("pytest_fake_mcp."):
        _obj.__module__ = "pytest_fake_mcp"
del _name, _obj
