"""(f) A framework's ``MCPHelper``: explicit connect and close over several servers, tools ``mcp_<server>_<tool>``.

Pattern 4 of ``docs/examples.md``.

``connect_mcp_async()`` connects every configured server, lists its tools and records each one
under a prefixed name (``mcp_docs_search``) in ``mcp_tools_map``, which maps it back to its server
and original name. ``call_mcp_tool(prefixed, arguments)`` sends the original name to the right
server. ``close_mcp_async()`` closes every connection, and the caller puts it in a ``finally``.

* ``MCPHelper`` gives each server's session an owner task (``clients.owned``), so
  ``close_mcp_async()`` works from any task: every session gets its DELETE and no cancel scope is
  exited in the wrong task.
* ``StackMCPHelper`` keeps the transports and sessions of every server on one ``AsyncExitStack``,
  entered by whichever task connected. Closed from that same task, it works. Closed from another
  task (a shutdown hook, a ``finally`` in a worker, ``asyncio.run`` of a cleanup coroutine), anyio
  refuses: "Attempted to exit cancel scope in a different task than it was entered in". The helper
  logs that and goes on, as the design note advises, but no DELETE goes out, and the task that
  connected is cancelled at its next ``await``. ``examples/buggy/test_buggy_helper.py`` shows it.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from mcp import ClientSession

from .owned import OwnedSession
from .sdk import new_http_client, open_session

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServer:
    """One entry of ``mcp_servers``: an id (the tool prefix) and the server's URL."""

    id: str
    url: str


class MCPHelper:
    """Connects MCP servers on request, routes prefixed tool names, closes them all on request."""

    def __init__(self, mcp_servers: list[MCPServer]) -> None:
        self.mcp_servers = mcp_servers
        self.mcp_tools_map: dict[str, tuple[str, str]] = {}  # "mcp_<id>_<tool>" -> (server id, tool)
        self._sessions: dict[str, ClientSession] = {}
        self._owners: list[OwnedSession] = []
        self._http_client: Any = None

    @property
    def tool_names(self) -> list[str]:
        return sorted(self.mcp_tools_map)

    async def connect_mcp_async(self) -> None:
        """Connect every server and discover its tools (call before the chain uses them)."""
        self._http_client = new_http_client()  # one HTTP client for every server
        await self._http_client.__aenter__()
        for server in self.mcp_servers:
            session = await self._connect(server)
            self._sessions[server.id] = session
            for tool in (await session.list_tools()).tools:
                self.mcp_tools_map[f"mcp_{server.id}_{tool.name}"] = (server.id, tool.name)

    async def call_mcp_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a prefixed tool on its own server, under its original name."""
        if name not in self.mcp_tools_map:
            raise LookupError(f"no MCP tool {name!r}; connected: {self.tool_names!r}")
        server_id, tool = self.mcp_tools_map[name]
        return await self._sessions[server_id].call_tool(tool, arguments)

    async def close_mcp_async(self) -> None:
        """Close every server's session (each gets its DELETE), then the HTTP client; from any task."""
        self.mcp_tools_map.clear()
        self._sessions.clear()
        owners, self._owners = self._owners, []
        for owner in reversed(owners):
            await owner.aclose()
        await self._close_http_client()

    async def _connect(self, server: MCPServer) -> ClientSession:
        owner = OwnedSession(server.url, self._http_client)
        self._owners.append(owner)
        return await owner.open()

    async def _close_http_client(self) -> None:
        if self._http_client is not None:
            http_client, self._http_client = self._http_client, None
            await http_client.aclose()


# --8<-- [start:stack-helper]
class StackMCPHelper(MCPHelper):
    """The usual first version: every server's contexts on one ``AsyncExitStack`` in the connecting task."""

    def __init__(self, mcp_servers: list[MCPServer]) -> None:
        super().__init__(mcp_servers)
        self._exit_stack = contextlib.AsyncExitStack()

    async def _connect(self, server: MCPServer) -> ClientSession:
        session = await self._exit_stack.enter_async_context(open_session(server.url, self._http_client))
        await session.initialize()
        return session

    async def close_mcp_async(self) -> None:
        self.mcp_tools_map.clear()
        self._sessions.clear()
        try:
            await self._exit_stack.aclose()
        except Exception:
            logger.exception("Error closing MCP connections")  # the design note: log it and go on
        await self._close_http_client()

    # --8<-- [end:stack-helper]
