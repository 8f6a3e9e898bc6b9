"""(d) The project's reference client: ``ReusingSessionClient`` and the ``SessionCache`` built on it.

One HTTP client; one session at a time; concurrent first calls share one ``initialize``; on 404 a
*new* transport and ``ClientSession`` on the same HTTP client, and the call is retried. The cache
keys clients by ``(server URL, run id)`` with single-flight creation, so sub-agents share one.
"""

from __future__ import annotations

from pytest_fake_mcp.client import ReusingSessionClient, SessionCache

__all__ = ["ReusingSessionClient", "SessionCache"]
