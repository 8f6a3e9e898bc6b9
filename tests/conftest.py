"""Shared test configuration. The plugin itself is loaded through its pytest11 entry point."""

from __future__ import annotations

import contextlib

# In-process pytester runs forget modules first imported inside them; the SDK, httpx and httpx2
# import parts lazily and cache classes (our HTTP-client counters patch them), so import them here
# once for the whole session to keep results independent of test order.
for _name in ("httpcore", "httpcore2", "httpx", "httpx2", "mcp", "mcp.client.streamable_http"):
    with contextlib.suppress(ImportError):
        __import__(_name)
