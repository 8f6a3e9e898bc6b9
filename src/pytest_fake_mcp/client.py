"""The reference reusing session client and the session cache: the client side, apart from the fake.

One HTTP client, one MCP session at a time, a new session on 404; and a cache that shares one such
client per (server URL, run id) among sub-agents. Neither imports anything of the fake server.

Example::

    from pytest_fake_mcp.client import ReusingSessionClient


    async def test_one_session(fake_mcp_server):
        fake_mcp_server.add_tool("echo", handler=lambda text: text)
        async with ReusingSessionClient(fake_mcp_server.url) as client:
            await client.call_tool("echo", {"text": "a"})
            await client.call_tool("echo", {"text": "b"})
        fake_mcp_server.assert_session_reused()

In 0.1 these names were imported from ``pytest_fake_mcp`` itself; those imports still work for one more
release, with a ``DeprecationWarning`` (docs/reusing-client.md).
"""

from __future__ import annotations

from ._client import (
    ReusingSessionClient,
    SessionCache,
    SessionClosedError,
    SessionLostError,
    SessionOpenError,
)

__all__ = [
    "ReusingSessionClient",
    "SessionCache",
    "SessionClosedError",
    "SessionLostError",
    "SessionOpenError",
]

for _name in __all__:
    globals()[_name].__module__ = __name__  # tracebacks and reprs show the name users import
del _name
