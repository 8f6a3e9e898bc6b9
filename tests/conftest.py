"""Shared test configuration. The plugin itself is loaded through its pytest11 entry point."""

from __future__ import annotations

import contextlib

# In-process pytester runs forget modules first imported inside them; httpx and httpx2 import their
# transports lazily, so import them here once for the whole session (order-independent failures).
for _name in ("httpcore", "httpcore2", "httpx", "httpx2"):
    with contextlib.suppress(ImportError):
        __import__(_name)
