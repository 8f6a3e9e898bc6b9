"""Type aliases shared by every module: JSON values, JSON-RPC messages, ASGI callables."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

__all__ = [
    "ASGIApp",
    "JSONObject",
    "JSONValue",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "SessionId",
]

JSONValue: TypeAlias = Any
"""Any value ``json.loads`` can return."""
JSONObject: TypeAlias = dict[str, Any]
"""A decoded JSON object, e.g. one JSON-RPC message."""
SessionId: TypeAlias = str
"""The value of an ``Mcp-Session-Id`` header."""

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
