"""FastMCP's ``Client`` through the contract suite (docs/frameworks/fastmcp.md).

The recipe itself (reuse, loss, close) is docs/examples.md's "Recipe: an agent built on FastMCP's ``Client``",
tested by tests/examples/test_howto_fastmcp.py in CI's interop step. This module adds the contract suite through
the ``open_client`` form and the stateless-era test, in a venv of its own
(``pip install -e '.[test]' -r tests/frameworks/requirements-fastmcp.txt``). Not installed, the module skips; CI
sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns the skip into a failure.
"""

# ruff: noqa: E402
# (the snippet regions' imports follow the framework's, as the page shows them)
from __future__ import annotations

import importlib.metadata

from _frameworks import assert_measured, require_framework

fastmcp = require_framework("fastmcp", "fastmcp")

# --8<-- [start:fastmcp-imports]
import asyncio
from typing import ClassVar

import pytest
from fastmcp import Client

from pytest_fake_mcp.contract import SessionReuseSuite

# --8<-- [end:fastmcp-imports]

# --8<-- [start:fastmcp-modern]


@pytest.mark.asyncio  # no era pin: the fake's default "dual" serves the 2026-07-28 era, which FastMCP 4 speaks
async def test_fastmcp_4_has_no_session_to_lose_in_the_stateless_era(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "before"})
        fake_mcp_server.restart()  # a deploy: nothing to forget
        after = await client.call_tool("echo", {"text": "after"})

    assert after.content[0].text == "after"
    assert fake_mcp_server.get_requests(method="initialize") == []  # server/discover, then stateless calls
    assert fake_mcp_server.sessions == ()
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:fastmcp-modern]


# --8<-- [start:fastmcp-contract]
DEAD_ID_KEPT = (
    "keeps the dead session id until the `async with` is left: the call that met the 404 and every later one raise "
    "MCPError 'Session not found' ('Session terminated' when the 404 carries no JSON-RPC body)"
)


class TestFastMCPContract(SessionReuseSuite):
    """FastMCP's `Client` is an `async with` with call_tool(name, arguments): no adapter at all."""

    eras = ("handshake", "modern")  # the era-neutral scenarios once per era; the session ones meet the handshake
    client_timeout = 5.0
    known_failures: ClassVar[dict[str, str]] = {"test_lost_session_is_reopened_once_and_the_call_retried": DEAD_ID_KEPT}

    @pytest.fixture
    def open_client(self):
        return lambda url: Client(url, timeout=self.client_timeout)


# --8<-- [end:fastmcp-contract]


def test_the_observed_facts_are_of_the_installed_versions() -> None:
    """tests/frameworks/observed/fastmcp.toml (the verification table's row) names what these tests ran on."""
    assert_measured("fastmcp", "fastmcp-slim")
    assert fastmcp.__version__ == importlib.metadata.version("fastmcp-slim")
