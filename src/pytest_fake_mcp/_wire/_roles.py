"""Who built an HTTP client: the test's stand-in browser (``HeadlessOAuth``) is not the client under test.

``HeadlessOAuth`` plays the user's browser: it builds an HTTP client of its own to GET the authorization URL.
Built inside :func:`stand_in_browser`, that client is recorded as the browser's, and ``mcp_http_clients`` lists it
without counting it (docs/authorization.md).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["STAND_IN_BROWSER", "building_role", "stand_in_browser"]

STAND_IN_BROWSER = "HeadlessOAuth's stand-in browser, not the client under test"
_role: ContextVar[str | None] = ContextVar("pytest_fake_mcp_http_client_role", default=None)


@contextlib.contextmanager
def stand_in_browser() -> Iterator[None]:
    """HTTP clients built in this block are the stand-in browser's."""
    token = _role.set(STAND_IN_BROWSER)
    try:
        yield
    finally:
        _role.reset(token)


def building_role() -> str | None:
    """The role of an HTTP client built now (None: the code under test's)."""
    return _role.get()
