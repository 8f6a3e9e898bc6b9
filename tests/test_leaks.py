"""The leak check at teardown and the hint for an async test no plugin ran (plugin.py), through pytester."""

from __future__ import annotations

import gc
import textwrap
import warnings

import httpx  # noqa: F401 - imported here so in-process inner runs reuse them instead of importing anew
import mcp.client.streamable_http  # noqa: F401
import pytest

from _sdk import INNER_ARGS

HEADER = """
import asyncio
import contextlib

import httpx
import pytest
import pytest_asyncio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

try:
    import httpx2 as http  # mcp 2.x
except ImportError:
    http = httpx  # mcp 1.x


@pytest_asyncio.fixture
async def later():
    # Set up before fake_mcp_server, so torn down after its check: the clients the test leaves open are closed
    # here, on the test's loop, and the inner run leaves no socket behind (the loop's end closes the SDK's side).
    clients = []
    yield clients
    for client in clients:
        if isinstance(client, http.AsyncClient):
            await client.aclose()


async def open_session(stack, url, client):
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session
"""

LEAKING = """
{marker}
@pytest.mark.asyncio
async def test_leaks(later, fake_mcp_server):
    client = http.AsyncClient()  # line 36: never closed by the test
    later.append(client)
    stack = contextlib.AsyncExitStack()  # the session is left open too (the loop's end closes it)
    later.append(stack)
    session = await open_session(stack, fake_mcp_server.url, client)
    await session.call_tool("echo", {{"text": "hi"}})
"""


def run_inner(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_inner=HEADER + textwrap.dedent(body))
    return pytester.runpytest(*INNER_ARGS, *args)


# --- leaks ---------------------------------------------------------------------------------------------


def test_a_client_left_open_is_a_warning_naming_it_its_session_and_the_fix(pytester: pytest.Pytester) -> None:
    result = run_inner(pytester, LEAKING.format(marker=""))

    result.assert_outcomes(passed=1, warnings=1)
    source = (pytester.path / "test_inner.py").read_text().splitlines()
    def_line = next(n for n, text in enumerate(source, 1) if text.startswith("async def test_leaks"))
    assert f"test_inner.py:{def_line}: FakeMCPLeakWarning" in result.stdout.str()  # its def, not a decorator
    result.stdout.fnmatch_lines(
        [
            "*test_inner.py:*: FakeMCPLeakWarning: 1 HTTP client that talked to the fake MCP server was left open "
            "by the test (test_inner.py::test_leaks):",
            "*#1 httpx*.AsyncClient  OPEN    talked to http://127.0.0.1:*   created at test_inner.py:36 in test_leaks",
            "*The fake still holds 1 session that got no DELETE: * (opened by exchange #1).",
            "*Fix: leave each MCP client's `async with` block before the test ends*close each HTTP client you build*"
            '@pytest.mark.fake_mcp_server(leaks="ignore")*docs/fixtures.md#leaks.',
        ]
    )


def test_leaks_fail_makes_a_client_left_open_a_teardown_error(pytester: pytest.Pytester) -> None:
    result = run_inner(pytester, LEAKING.format(marker='@pytest.mark.fake_mcp_server(leaks="fail")'))

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks*",
            "*1 HTTP client that talked to the fake MCP server was left open by the test (test_inner.py::test_leaks):",
        ]
    )
    assert "FakeMCPLeakWarning" not in result.stdout.str()


def test_the_documented_filterwarnings_line_makes_the_warning_an_error(pytester: pytest.Pytester) -> None:
    """docs/fixtures.md#leaks: ``error::pytest_fake_mcp.plugin.FakeMCPLeakWarning``, as written there."""
    result = run_inner(pytester, LEAKING.format(marker=""), "-W", "error::pytest_fake_mcp.plugin.FakeMCPLeakWarning")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*FakeMCPLeakWarning: 1 HTTP client that talked to the fake MCP server*"])


def test_leaks_ignore_keeps_a_test_that_means_to_leave_it_open_quiet(pytester: pytest.Pytester) -> None:
    result = run_inner(pytester, LEAKING.format(marker='@pytest.mark.fake_mcp_server(leaks="ignore")'))

    result.assert_outcomes(passed=1)
    assert "left open by the test" not in result.stdout.str()


def test_clients_that_closed_see_nothing_whatever_became_of_their_sessions(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_closes(fake_mcp_server):
            async with http.AsyncClient() as client, contextlib.AsyncExitStack() as stack:
                session = await open_session(stack, fake_mcp_server.url, client)
                await session.call_tool("echo", {"text": "hi"})

        @pytest.mark.asyncio
        async def test_the_sdk_builds_and_closes_its_own(fake_mcp_server):
            async with contextlib.AsyncExitStack() as stack:
                await open_session(stack, fake_mcp_server.url, None)

        @pytest.mark.asyncio
        async def test_the_server_dropped_the_session(fake_mcp_server):
            async with http.AsyncClient() as client, contextlib.AsyncExitStack() as stack:
                await open_session(stack, fake_mcp_server.url, client)
                fake_mcp_server.restart()  # the server ended it: no leak

        @pytest.mark.asyncio
        async def test_its_delete_failed(fake_mcp_server):
            fake_mcp_server.on(http_method="DELETE").respond(503)
            async with http.AsyncClient() as client, contextlib.AsyncExitStack() as stack:
                await open_session(stack, fake_mcp_server.url, client)

        def test_a_sync_client_without_delete(fake_mcp_server):
            with httpx.Client() as client:  # closed, its session never DELETEd: that is a client's choice
                client.post(
                    fake_mcp_server.url,
                    headers={"accept": "application/json, text/event-stream"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"}}},
                )
            assert fake_mcp_server.figures.live_sessions == 1
        """,
    )

    result.assert_outcomes(passed=5)
    assert "left open by the test" not in result.stdout.str()


HOLDER = """
async def hold(url, ready, stop):
    # A task that keeps an SDK session (and the HTTP client the SDK built) open until cancelled, as a framework's
    # background session runner does (FastMCP's Client): the test ends without closing it.
    async with contextlib.AsyncExitStack() as stack:
        await open_session(stack, url, None)
        ready.set()
        await stop.wait()

{marker}
@pytest.mark.asyncio
async def test_leaves_its_session_task_running(fake_mcp_server):
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(hold(fake_mcp_server.url, ready, stop))  # the test never stops it
    await ready.wait()
"""


def test_a_client_the_loops_end_closed_was_left_open(pytester: pytest.Pytester) -> None:
    """pytest-asyncio ends the test's loop before fake_mcp_server's teardown, cancelling the task that held the
    client: closed by then, but by the loop's end, not the test (issue 25's FastMCP trial)."""
    result = run_inner(pytester, HOLDER.format(marker='@pytest.mark.fake_mcp_server(leaks="fail")'))
    with warnings.catch_warnings():  # the loop's end cancelled the SDK's task group before some of its tasks ran:
        warnings.simplefilter("ignore", RuntimeWarning)  # their coroutines, never awaited, are collected here
        gc.collect()

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_its_session_task_running*",
            "*1 HTTP client that talked to the fake MCP server was left open by the test*",
            "*#1 httpx*.AsyncClient  closed  talked to http://127.0.0.1:*   created at test_inner.py:* in open_session*"
            "   closed only as the event loop shut down",
            '*"Closed only as the event loop shut down": the test ended with the client open*',
        ]
    )


def test_a_client_its_task_closed_before_the_test_ended_is_no_leak(pytester: pytest.Pytester) -> None:
    body = HOLDER.format(marker='@pytest.mark.fake_mcp_server(leaks="fail")').replace(
        "    await ready.wait()\n", "    await ready.wait()\n    stop.set()\n    await task\n"
    )
    result = run_inner(pytester, body)

    result.assert_outcomes(passed=1)
    assert "left open by the test" not in result.stdout.str()


def test_a_sync_client_left_open_is_named(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        KEPT = []

        @pytest.fixture
        def kept():
            yield KEPT
            KEPT.pop().close()

        def test_sync_leak(kept, fake_mcp_server):
            kept.append(httpx.Client())
            kept[0].get(fake_mcp_server.url, headers={"accept": "text/event-stream"})
        """,
    )

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*#1 httpx.Client  OPEN    talked to http://127.0.0.1:*   created at test_inner.py:*"])


# --- an async test no plugin ran --------------------------------------------------------------------------


def test_an_unmarked_async_test_of_ours_names_the_mark(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_unmarked(fake_mcp_server):
            pass

        async def test_unmarked_elsewhere():
            pass
        """,
    )

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_unmarked _*",
            "async def functions are not natively supported.",
            "*pytest-fake-mcp: test_unmarked is an async test that uses fake_mcp_server, but no async plugin ran "
            "it. Fix: pytest-asyncio is installed in strict mode, which runs only the tests marked for it: add "
            '@pytest.mark.asyncio to the test*asyncio_mode = "auto"*@pytest.mark.anyio. '
            "See docs/fixtures.md#async-tests.",
        ]
    )
    # Once, for the test with our fixtures (the short summary repeats whole messages when CI is set: not counted).
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("pytest-fake-mcp:") == 1
