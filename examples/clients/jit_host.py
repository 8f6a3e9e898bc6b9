"""(e) A framework's MCP host: servers registered just in time, on first use, tools named ``server-tool``.

Pattern 3 of ``docs/examples.md``.

Registering a server opens its session (transport and ``initialize``), lists its tools and records
each one as ``f"{server}-{tool}"``, routed to that server's session. A registration must finish
within ``registration_timeout``. The design note asks for three things: a registration that times
out is cleaned up, one slow server does not block the others, and a failure does not affect the
other servers.

* ``MCPHost`` does all three. Each server has its own registration (concurrent callers share it) and
  its own session owner task (``clients.owned``). When a registration times out, the caller gets
  ``RegistrationTimeoutError`` at once. The owner lets the handshake finish, then DELETEs the
  session, and ``aclose()`` waits for that.
* ``DraftMCPHost`` is the note's first draft. One host-wide lock serializes registrations ("so no
  server is registered twice"), so a slow server holds up every server behind it. On timeout it
  cancels the registration (``asyncio.wait_for`` and then ``stack.aclose()`` in the note), which
  cancels the ``initialize`` in flight. The server has already created that session, and no DELETE
  will ever reach it. ``examples/buggy/test_buggy_jit_host.py`` shows both flaws.

The note's own code has a third flaw: it enters each session's contexts in whatever task registers
the server and exits them at shutdown, from another task. Both hosts here avoid it with owner tasks,
so the buggy tests show only the two flaws above. Pattern 4 (``clients.helper``) covers the third.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp import ClientSession

from .owned import OwnedSession
from .sdk import new_http_client


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """An MCP server the host may register: a name for the tool prefix and its URL."""

    name: str
    url: str


class RegistrationTimeoutError(TimeoutError):
    """Registering ``server`` took longer than ``timeout`` seconds; nothing it opened stays open."""

    def __init__(self, server: str, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        super().__init__(f"registration of MCP server {server!r} timed out after {timeout:g}s")


class UnknownToolError(LookupError):
    """No registered or registrable server offers this tool."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(f"no MCP tool {name!r}; known: {sorted(known)!r}")


class MCPHost:
    """Registers MCP servers on first use and routes ``server-tool`` names to their sessions."""

    def __init__(self, servers: Iterable[ServerConfig], *, registration_timeout: float = 10.0) -> None:
        self._configs = {server.name: server for server in servers}
        for name in self._configs:
            if "-" in name:
                raise ValueError(f"server name {name!r} must not contain '-': it separates server and tool")
        self.registration_timeout = registration_timeout
        self._http_client: Any = None
        self._sessions: dict[str, ClientSession] = {}
        self._tools: dict[str, tuple[str, str]] = {}  # "server-tool" -> (server, tool)
        self._owners: list[OwnedSession] = []
        self._registering: dict[str, asyncio.Future[None]] = {}

    async def __aenter__(self) -> MCPHost:
        self._http_client = new_http_client()  # one HTTP client for every server
        await self._http_client.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    def is_registered(self, server: str) -> bool:
        return server in self._sessions

    async def register(self, server: str) -> None:
        """Register ``server`` unless it is; callers asking at the same time share one registration."""
        if server in self._sessions:
            return
        if server not in self._configs:
            raise KeyError(f"no MCP server named {server!r}; configured: {sorted(self._configs)!r}")
        pending = self._registering.get(server)
        if pending is None:
            pending = asyncio.ensure_future(self._register(self._configs[server]))
            self._registering[server] = pending
            pending.add_done_callback(lambda _: self._registering.pop(server, None))
        await asyncio.shield(pending)

    async def register_all(self, servers: Iterable[str]) -> dict[str, BaseException]:
        """Register an agent's servers at once (just in time); return the failures by server."""
        names = list(servers)
        outcomes = await asyncio.gather(*(self.register(name) for name in names), return_exceptions=True)
        return {name: outcome for name, outcome in zip(names, outcomes, strict=True) if outcome is not None}

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``server-tool``, registering ``server`` first if this is its first use."""
        server, _, tool = name.partition("-")
        if server not in self._configs or not tool:
            raise UnknownToolError(name, self._tools)
        await self.register(server)
        if name not in self._tools:
            raise UnknownToolError(name, self._tools)
        return await self._sessions[server].call_tool(tool, arguments)

    async def aclose(self) -> None:
        """Close every session (each owner DELETEs its own), then the HTTP client."""
        owners, self._owners = self._owners, []
        self._sessions.clear()
        self._tools.clear()
        await asyncio.gather(*(owner.aclose() for owner in owners))
        if self._http_client is not None:
            http_client, self._http_client = self._http_client, None
            await http_client.aclose()

    # --8<-- [start:register]
    async def _register(self, config: ServerConfig) -> None:
        owner = OwnedSession(config.url, self._http_client)
        self._owners.append(owner)  # aclose() waits for it, registered or not
        try:
            async with asyncio.timeout(self.registration_timeout):
                session = await owner.open()
                listed = await session.list_tools()
        except TimeoutError:
            await self._give_up(owner)
            raise RegistrationTimeoutError(config.name, self.registration_timeout) from None
        except BaseException:
            await self._give_up(owner)
            raise
        for tool in listed.tools:
            self._tools[f"{config.name}-{tool.name}"] = (config.name, tool.name)
        self._sessions[config.name] = session

    async def _give_up(self, owner: OwnedSession) -> None:
        """A failed registration: the owner finishes any handshake in flight, then closes the session."""
        owner.stop_soon()
        # --8<-- [end:register]


# --8<-- [start:draft-host]
class DraftMCPHost(MCPHost):
    """The design note's first draft: one registration at a time, and a timeout cancels the handshake."""

    def __init__(self, servers: Iterable[ServerConfig], *, registration_timeout: float = 10.0) -> None:
        super().__init__(servers, registration_timeout=registration_timeout)
        self._registration_lock = asyncio.Lock()

    async def register(self, server: str) -> None:
        async with self._registration_lock:  # no server registered twice... and no two servers at once
            await super().register(server)

    async def _give_up(self, owner: OwnedSession) -> None:
        # The note's `except asyncio.TimeoutError: await session_stack.aclose()`: cancel everything it
        # opened, the initialize in flight included, so the session id never arrives.
        await owner.abort()

    # --8<-- [end:draft-host]
