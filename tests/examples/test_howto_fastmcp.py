"""How-to: testing an agent built on FastMCP's ``Client`` (docs/examples.md, "Recipe: an agent on FastMCP").

FastMCP comes with the ``interop`` extra (4.x beside mcp 2.x, 3.4 beside mcp 1.x). Not installed, the module
skips; CI installs it and sets ``FAKE_MCP_REQUIRE_INTEROP=1``, which turns the skip into a failure (as in
tests/test_interop_clients.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:
    import fastmcp
except ImportError as exc:
    if os.environ.get("FAKE_MCP_REQUIRE_INTEROP") == "1":
        raise
    pytest.skip(f"fastmcp is not installed ({exc}); run: pip install -e '.[mcp2,interop]'", allow_module_level=True)


# --8<-- [start:fastmcp-reuse]
import asyncio

import pytest
from fastmcp import Client


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")  # under the default "dual", FastMCP 4 opens no session
async def test_fastmcp_client_keeps_one_session(fake_mcp_server, mcp_http_clients):
    async with asyncio.timeout(10), Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "one"})
        await client.call_tool("echo", {"text": "two"})

    fake_mcp_server.assert_initialize_count(1)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})  # leaving the block sent the DELETE
    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:fastmcp-reuse]


# --8<-- [start:fastmcp-lost-session]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="handshake")
async def test_fastmcp_client_recovers_only_when_the_block_is_entered_again(fake_mcp_server, mcp_http_clients):
    client = Client(fake_mcp_server.url)
    async with asyncio.timeout(10):
        async with client:
            await client.call_tool("echo", {"text": "before"})
            fake_mcp_server.drop_session()  # the server forgets it: its id now answers 404
            for _ in range(2):  # FastMCP keeps the dead id: every call in this block fails
                with pytest.raises(Exception, match=r"Session not found|Session terminated"):  # mcp 2.x | 1.x
                    await client.call_tool("echo", {"text": "after"})
            assert client.is_connected()  # though the client still counts itself connected
        async with client:  # leaving the block and entering it again opens a new session
            result = await client.call_tool("echo", {"text": "again"})

    assert result.content[0].text == "again"
    fake_mcp_server.assert_sessions(created=2, ended_by={"dropped": 1, "delete": 1})
    with pytest.raises(AssertionError, match="1 exchange carried a session id it should not have"):
        fake_mcp_server.assert_no_stale_session_ids()  # the second failed call sent the dead id again
    mcp_http_clients.assert_created(2)  # one HTTP client per `async with client:`


# --8<-- [end:fastmcp-lost-session]


def test_the_verification_page_names_the_fastmcp_line_measured_here() -> None:
    """docs/verification.md's table names the FastMCP major line these tests run on (the measured release: a newer
    patch or minor release the pins admit does not make the page wrong, and must not fail a fresh clone's CI)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "verification.md").read_text(encoding="utf-8")
    major = fastmcp.__version__.split(".")[0]
    row = f"| FastMCP `Client` {major}."
    assert row in page, (
        f"docs/verification.md has no row for FastMCP {major}.x, the line installed here ({fastmcp.__version__}): "
        "measure it (pytest tests/test_interop_clients.py tests/examples/test_howto_fastmcp.py) and add it to its table"
    )
    assert "does not install beside" not in page


def test_a_fastmcp_client_the_test_never_left_is_reported(pytester: pytest.Pytester) -> None:
    """The new user's trial (issue 25): a `Client` entered and never left. pytest-asyncio's loop ends before the
    fake's teardown and closes it by cancelling FastMCP's session task; the leak check still reports it, at the
    test's line (the client is built in FastMCP's own task), with the `async with` fix."""
    from _sdk import INNER_ARGS

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_inner="""
        import pytest
        from fastmcp import Client

        @pytest.mark.asyncio
        @pytest.mark.fake_mcp_server(era="handshake", leaks="fail")
        async def test_left_open(fake_mcp_server):
            client = Client(fake_mcp_server.url)
            await client.__aenter__()  # never left: the leak is placed at this line
            await client.call_tool("echo", {"text": "hi"})
        """
    )
    result = pytester.runpytest(*INNER_ARGS)

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*1 HTTP client that talked to the fake MCP server was left open by the test*",
            "*created at test_inner.py:* in test_left_open (inside fastmcp/*)   closed only as the event loop shut "
            "down",
            "*Fix: leave each MCP client's `async with` block before the test ends*fastmcp.Client(url)*",
        ]
    )
