"""(a) The naive client: a new HTTP client and a new MCP session for every tool call.

It works, which is why it ships: every call succeeds and a dropped session never bites,
because no session outlives its call. The cost is on the wire: per call an ``initialize``,
a ``notifications/initialized``, the SDK's hidden ``tools/list``, a DELETE and a fresh
connection pool. ``examples/buggy/test_buggy_naive_client.py`` shows the plugin catching it.
"""

from __future__ import annotations

from typing import Any

from .sdk import new_http_client, open_session


class NaiveClient:
    """Calls tools on the MCP server at ``url``, opening everything afresh each time."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        async with new_http_client() as http, open_session(self.url, http) as session:
            await session.initialize()
            return await session.call_tool(name, arguments)
