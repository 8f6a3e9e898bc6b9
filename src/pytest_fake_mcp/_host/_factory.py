"""FakeMCPServerFactory: the pool of listeners a pytest session owns, leasing a clean server to each test.

The factory starts a uvicorn listener the first time no idle one is left; each test leases one,
reset to a clean state, and hands it back after the teardown checks. Tests pay for a reset, not a start.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .._fake._app import FakeMCPApp
from .._wire._errors import LifecycleError
from .._wire._options import FakeMCPOptions
from ._listener import Listener
from ._server import FakeMCPServer

__all__ = ["FakeMCPServerFactory"]


class FakeMCPServerFactory:
    """Owns the listeners of a pytest session and leases clean servers to tests.

    Example::

        def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
            with fake_mcp_server_factory.lease(flavour="mcp1") as other:
                ...
    """

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self._idle: list[FakeMCPServer] = []
        self._all: list[FakeMCPServer] = []
        self._lock = threading.Lock()
        self.started = 0

    def _acquire(self, options: FakeMCPOptions) -> FakeMCPServer:
        server = None
        with self._lock:
            while server is None and self._idle:
                server = self._idle.pop()
                if not server._listener.running:  # stopped while idle: never leased again
                    self._all.remove(server)
                    server = None
        if server is None:
            app = FakeMCPApp(options)
            listener = Listener(app, host=self.host)
            listener.start()
            server = FakeMCPServer(app, listener)
            self.started += 1
            with self._lock:
                self._all.append(server)
            server._reset(options)
        else:
            server._lease(options)
        return server

    def _release(self, server: FakeMCPServer) -> None:
        if not server._listener.running:
            # Stopped under its test (a down() that could not re-bind its port): never lease it again.
            with self._lock, contextlib.suppress(ValueError):
                self._all.remove(server)
            return
        server._recycle()
        with self._lock:
            self._idle.append(server)

    @contextlib.contextmanager
    def lease(self, options: FakeMCPOptions | None = None, /, **kwargs: Any) -> Iterator[FakeMCPServer]:
        """A clean server for the ``with`` block, verified when the block ends without error."""
        __tracebackhide__ = True
        if options is None:
            options = FakeMCPOptions(**kwargs)
        elif kwargs:
            raise LifecycleError("lease() takes a FakeMCPOptions or keyword options, not both")
        server = self._acquire(options)
        try:
            yield server
            server._verify()
        finally:
            self._release(server)

    def close(self) -> None:
        """Stop every listener."""
        with self._lock:
            servers, self._all, self._idle = self._all, [], []
        errors: list[BaseException] = []
        for server in servers:
            try:
                server._settled()
                server._listener.stop()
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
