"""Exceptions raised by pytest-fake-mcp.

The tree::

    FakeMCPError                      base of everything we raise
    ├── ScriptError(ValueError)       a test scripted the fake wrongly; names the fix
    ├── LifecycleError(RuntimeError)  a call not allowed in the server's current state
    ├── ServerSideError               the fake failed while answering; re-raised at teardown
    ├── VerificationError(AssertionError)  a teardown check failed (unfired fault, server error)
    ├── SessionLostError(ConnectionError)   ReusingSessionClient: 404 on every new session, gave up
    ├── SessionClosedError(ConnectionError) ReusingSessionClient: the session died under a call
    └── SessionOpenError(ConnectionError)   ReusingSessionClient: opening a session failed

Handlers raise these to shape a tool's answer (they are not failures of the fake):

    ToolError        -> a ``tools/call`` result with ``isError: true``
    JSONRPCError     -> a JSON-RPC error response with the given code
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FakeMCPError",
    "JSONRPCError",
    "LifecycleError",
    "ScriptError",
    "ServerSideError",
    "ToolError",
    "VerificationError",
]


class FakeMCPError(Exception):
    """Base class of every exception pytest-fake-mcp raises."""


class ScriptError(FakeMCPError, ValueError):
    """A test scripted the fake server wrongly; the message names the fix."""


class LifecycleError(FakeMCPError, RuntimeError):
    """A call the server cannot take in its current state."""


class ServerSideError(FakeMCPError):
    """An exception raised inside the fake while it answered a request.

    The fake answers the client as a real server would (500 or a JSON-RPC error)
    and re-raises this at the test's teardown, so the error is never lost in a log.
    """

    def __init__(self, where: str, error: BaseException) -> None:
        self.where = where
        self.error = error
        super().__init__(f"{where}: {type(error).__name__}: {error}")


class VerificationError(FakeMCPError, AssertionError):
    """A check the fixture runs at teardown failed."""


class ToolError(Exception):
    """Raise in a tool handler to answer with a result marked ``isError: true``.

    Example::

        def search(query: str) -> str:
            raise ToolError(f"no index for {query!r}")
    """


class JSONRPCError(Exception):
    """Raise in a handler to answer with a JSON-RPC error object.

    Example::

        def search(query: str) -> str:
            raise JSONRPCError(-32602, "query must not be empty")
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"JSON-RPC error {code}: {message}")
