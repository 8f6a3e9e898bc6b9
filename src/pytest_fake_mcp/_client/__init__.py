"""The client side: the reference reusing client, the session cache, and what the suites need of any client.

- ``_reusing``: :class:`ReusingSessionClient`, one HTTP client and one MCP session at a time, a new session on 404;
- ``_cache``: :class:`SessionCache`, one reusing client per (server URL, run id), shared by sub-agents;
- ``_under_test``: the client forms the contract and race suites drive (``make_client``'s :class:`ContractClient`,
  ``open_client``'s context manager), sync steps bounded in worker threads.
- ``_suite_forms``: :class:`ClientForms`, what both suites take of a user's subclass (the client's form,
  ``session_policy``, ``known_failures``); it imports pytest, so this package does not import it.
- ``_oauth``: :class:`HeadlessOAuth`, the SDK's OAuth client completing the authorization-code flow without a browser,
  and the browser of a client that serves its own callback (FastMCP's).

Nothing here imports the server side; ``pytest_fake_mcp.client`` is the public face.
"""

from __future__ import annotations

from ._cache import SessionCache, current_run_id
from ._reusing import ReusingSessionClient, SessionClosedError, SessionLostError, SessionOpenError
from ._under_test import ClientOpener, ContractCaller, ContractClient, Subject, ThreadBlocked, in_thread

__all__ = [
    "ClientOpener",
    "ContractCaller",
    "ContractClient",
    "ReusingSessionClient",
    "SessionCache",
    "SessionClosedError",
    "SessionLostError",
    "SessionOpenError",
    "Subject",
    "ThreadBlocked",
    "current_run_id",
    "in_thread",
]
