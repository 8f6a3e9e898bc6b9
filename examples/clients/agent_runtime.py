"""(g) Clients of an agent runtime, an MCP server that keeps agent sessions per client.

Pattern 5 of ``docs/examples.md``.

The server scopes everything to the MCP session. ``create_agent_session`` starts a conversation
with an agent and returns its ``agent_session_id``, and ``send_message`` continues it.
``list_agent_sessions`` shows the caller's conversations only, and another client's
``agent_session_id`` is "not found". The scoping holds only if every user has an MCP session of
their own, and if closing a client ends its session, which takes its agent sessions with it.

* ``AgentRuntimeClient``: one HTTP client and one MCP session per client object (per user), with a
  DELETE on close.
* ``PooledAgentRuntimeClient``: a process-wide ``SessionPool`` hands every client the same MCP
  session for a server URL ("one handshake per process, not per user"). Two users then share one
  session id, and with it each other's conversations. ``examples/buggy/test_buggy_agent_runtime.py``
  shows it.

``serve_agent_runtime(fake_mcp_server)`` is the server side, played by the fake: tool handlers that
keep their state in ``ctx.state``, one dict per MCP session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

from mcp import ClientSession

from pytest_fake_mcp import Context, FakeMCPServer, ToolError

from .sdk import is_error, new_http_client, open_session, text


class AgentSessionNotFoundError(LookupError):
    """The server does not know this agent session in the caller's MCP session."""


class AgentRuntimeClient:
    """One user's connection to the agent runtime: their own MCP session, closed with the client."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._stack = contextlib.AsyncExitStack()
        self._session: ClientSession | None = None

    async def __aenter__(self) -> AgentRuntimeClient:
        self._session = await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def create_session(self, agent: str) -> str:
        return str((await self._call("create_agent_session", {"agent": agent}))["agent_session_id"])

    async def send(self, agent_session_id: str, message: str) -> dict[str, Any]:
        return await self._call("send_message", {"agent_session_id": agent_session_id, "message": message})

    async def list_sessions(self) -> list[str]:
        return list((await self._call("list_agent_sessions", {}))["sessions"])

    async def close_session(self, agent_session_id: str) -> None:
        await self._call("close_agent_session", {"agent_session_id": agent_session_id})

    async def aclose(self) -> None:
        """End this client's MCP session (DELETE) and with it every agent session it started."""
        self._session = None
        await self._stack.aclose()

    async def _open(self) -> ClientSession:
        http_client = await self._stack.enter_async_context(new_http_client())
        session = await self._stack.enter_async_context(open_session(self.url, http_client))
        await session.initialize()
        return session

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            raise RuntimeError("the client is closed; use it inside `async with AgentRuntimeClient(url)`")
        result = await self._session.call_tool(tool, arguments)
        if is_error(result):
            raise AgentSessionNotFoundError(text(result))
        answer: dict[str, Any] = json.loads(text(result))
        return answer


# --8<-- [start:pool]
class SessionPool:
    """One MCP session per server URL for the whole process, shared by every client that asks."""

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        self._sessions: dict[str, ClientSession] = {}
        self._users: dict[str, int] = {}

    async def __aenter__(self) -> SessionPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def acquire(self, url: str) -> ClientSession:
        if url not in self._sessions:
            http_client = await self._stack.enter_async_context(new_http_client())
            session = await self._stack.enter_async_context(open_session(url, http_client))
            await session.initialize()
            self._sessions[url] = session
        self._users[url] = self._users.get(url, 0) + 1
        return self._sessions[url]

    def release(self, url: str) -> None:
        self._users[url] -= 1  # the session stays open for the next user

    async def aclose(self) -> None:
        self._sessions.clear()
        await self._stack.aclose()


class PooledAgentRuntimeClient(AgentRuntimeClient):
    """Saves a handshake per user by taking the process's pooled MCP session for the server."""

    def __init__(self, url: str, pool: SessionPool) -> None:
        super().__init__(url)
        self._pool = pool

    async def _open(self) -> ClientSession:
        return await self._pool.acquire(self.url)

    async def aclose(self) -> None:
        if self._session is not None:
            self._session = None
            self._pool.release(self.url)

    # --8<-- [end:pool]


# --8<-- [start:server]
def serve_agent_runtime(server: FakeMCPServer) -> None:
    """Serve the agent runtime's tools on a fake; agent sessions live in ``ctx.state`` (per MCP session)."""
    ids = itertools.count(1)

    def agent_sessions(ctx: Context) -> dict[str, dict[str, Any]]:
        sessions: dict[str, dict[str, Any]] = ctx.state.setdefault("agent_sessions", {})
        return sessions

    def create_agent_session(agent: str, ctx: Context) -> str:
        agent_session_id = f"{agent}#{next(ids)}"
        agent_sessions(ctx)[agent_session_id] = {"agent": agent, "messages": []}
        return json.dumps({"agent_session_id": agent_session_id})

    def send_message(agent_session_id: str, message: str, ctx: Context) -> str:
        conversation = agent_sessions(ctx).get(agent_session_id)
        if conversation is None:
            raise ToolError(f"Agent session not found: {agent_session_id}")
        conversation["messages"].append(message)
        reply = f"{conversation['agent']} read {message!r}"
        return json.dumps({"response": reply, "message_count": len(conversation["messages"])})

    def list_agent_sessions(ctx: Context) -> str:
        return json.dumps({"sessions": sorted(agent_sessions(ctx))})

    def close_agent_session(agent_session_id: str, ctx: Context) -> str:
        if agent_sessions(ctx).pop(agent_session_id, None) is None:
            raise ToolError(f"Agent session not found: {agent_session_id}")
        return json.dumps({"success": True})

    for handler in (create_agent_session, send_message, list_agent_sessions, close_agent_session):
        server.add_tool(handler.__name__, handler)
    # --8<-- [end:server]
