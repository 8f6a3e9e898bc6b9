"""Hosting the fake: the server a test talks to, the pool that leases it, and where its app runs.

- ``_server``: :class:`FakeMCPServer`, the face a test talks to (serving, journal, faults, figures, ``assert_*``);
- ``_factory``: :class:`FakeMCPServerFactory`, the session's pool of listeners, leasing a clean server per test;
- ``_listener``: :class:`Listener`, uvicorn on 127.0.0.1 in a background thread with its own loop;
- ``_inprocess``: :class:`InProcessFake`, the app on the current loop with every httpx client routed to it.
"""

from __future__ import annotations

from ._factory import FakeMCPServerFactory
from ._inprocess import InProcessFake
from ._listener import Listener
from ._server import FakeMCPServer, app_of, reset

__all__ = ["FakeMCPServer", "FakeMCPServerFactory", "InProcessFake", "Listener", "app_of", "reset"]
