"""Where the project-local node 22, conformance suite and TypeScript SDK live (``npm ci --prefix tests/node``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["NODE", "NODE_DIR", "require_node"]

NODE_DIR = Path(__file__).resolve().parent / "node"
NODE = NODE_DIR / "node_modules" / ".bin" / "node"
_PACKAGES = ("@modelcontextprotocol/sdk", "@modelcontextprotocol/conformance")


def require_node() -> Path:
    """The node binary; skips the test when the packages are not installed here.

    CI installs them and sets ``FAKE_MCP_REQUIRE_NODE=1``, which turns the skip into a failure.
    """
    absent = [str(p) for p in (NODE, *(NODE_DIR / "node_modules" / name for name in _PACKAGES)) if not p.exists()]
    if absent:
        reason = f"node packages not installed ({', '.join(absent)}); run: npm ci --prefix tests/node"
        if os.environ.get("FAKE_MCP_REQUIRE_NODE") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return NODE
