"""The assert_* helpers of fake_mcp_server (_oracles): each one passing for a correct client and
firing for a buggy one, with real SDK clients over loopback, checked through pytester as a user sees it.
"""

from __future__ import annotations

import textwrap

import httpx  # noqa: F401 - imported here so in-process inner runs reuse them instead of importing anew
import mcp.client.streamable_http  # noqa: F401
import pytest

from _sdk import INNER_ARGS

SDK_CLIENTS = '''
"""Small real-SDK clients, correct and deliberately buggy, for the inner tests."""

import asyncio
import contextlib
import importlib.metadata

import httpx
import mcp
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
SDKError = mcp.MCPError if MCP2 else mcp.McpError
VERSION = "2025-11-25"


@contextlib.asynccontextmanager
async def session(url, *, terminate_on_close=True):
    async with streamable_http_client(url, terminate_on_close=terminate_on_close) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            yield s


async def reused(url, calls=2):
    """Correct: one session for every call."""
    async with session(url) as s:
        for i in range(calls):
            await s.call_tool("echo", {"text": str(i)})


async def session_per_call(url, calls=3):
    """Buggy (faults.md C01): a new session for every call."""
    for i in range(calls):
        async with session(url) as s:
            await s.call_tool("echo", {"text": str(i)})


async def recovers_from_drop(server):
    """Correct: the 404 tells it the session is gone; it opens a new one and never sends the dead id again."""
    async with session(server.url, terminate_on_close=False) as old:
        await old.call_tool("echo", {"text": "before"})
        server.drop_session()
        with contextlib.suppress(SDKError):
            await old.call_tool("echo", {"text": "lost"})
    async with session(server.url) as new:
        await new.call_tool("echo", {"text": "after"})


async def deletes_dead_session(server):
    """Allowed: after the 404, closing the SDK's default transport DELETEs the dead session once (harmless)."""
    async with session(server.url) as s:
        await s.call_tool("echo", {"text": "before"})
        server.drop_session()
        with contextlib.suppress(SDKError):
            await s.call_tool("echo", {"text": "lost"})


async def reinitializes_with_old_id(server):
    """Buggy (faults.md R02): after the 404 it re-initializes, still sending the dead session id."""
    async with session(server.url, terminate_on_close=False) as s:
        await s.call_tool("echo", {"text": "before"})
        server.drop_session()
        with contextlib.suppress(SDKError):
            await s.call_tool("echo", {"text": "lost"})
    dead = server.sessions[0].id
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "buggy", "version": "0"}},
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-session-id": dead}
    async with httpx.AsyncClient() as raw:
        response = await raw.post(server.url, json=body, headers=headers)
    assert response.status_code == 404


async def calls_old_session_after_reinit(server):
    """Buggy (faults.md R03, C07): a tool handle bound to the old session is used after the new one opened."""
    async with session(server.url, terminate_on_close=False) as old:
        await old.call_tool("echo", {"text": "before"})
        server.drop_session()
        with contextlib.suppress(SDKError):
            await old.call_tool("echo", {"text": "lost"})
        async with session(server.url) as new:
            await new.call_tool("echo", {"text": "after"})
            with contextlib.suppress(SDKError):
                await old.call_tool("echo", {"text": "old handle"})


async def leaves_session_open(url):
    """Buggy (faults.md T08): the transport never sends DELETE."""
    async with session(url, terminate_on_close=False) as s:
        await s.call_tool("echo", {"text": "x"})


def barrier_tool(n):
    """A tool whose calls wait until n of them are running (bounded), so the test never sleeps."""
    state = {"count": 0, "event": None}

    async def wait(text: str) -> str:
        if state["event"] is None:
            state["event"] = asyncio.Event()
        state["count"] += 1
        if state["count"] >= n:
            state["event"].set()
        await asyncio.wait_for(state["event"].wait(), 5)
        return text

    return wait
'''

HEADER = """
import asyncio
import contextlib

import pytest

from sdk_clients import *  # noqa: F403

pytestmark = pytest.mark.asyncio
"""

ARROW = "*ms  client ── {label} *▶ server   {result}*"


def run_inner(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    """Run ``body`` (test functions using the SDK clients above) as an inner test file."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(sdk_clients=SDK_CLIENTS)
    pytester.makepyfile(test_inner=HEADER + textwrap.dedent(body))
    return pytester.runpytest(*INNER_ARGS)


def lit(text: str) -> str:
    """``text`` as an fnmatch pattern matching ``[`` literally (``?`` and ``*`` stay wildcards)."""
    return text.replace("[", "[[]")


def arrow(label: str, result: str) -> str:
    """The pattern of one diagram arrow line."""
    return ARROW.format(label=lit(label), result=lit(result))  # ends in "*": "after 150ms" on a slow machine


# --- assert_initialize_count -------------------------------------------------------------------------


def test_initialize_count_passes_for_one_reused_session(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_reuse(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=3)
            fake_mcp_server.assert_initialize_count(1)
            assert fake_mcp_server.figures.initialize_per_session == {fake_mcp_server.sessions[0].id: 1}
        """,
    )
    result.assert_outcomes(passed=1)


def test_initialize_count_fires_for_a_session_per_call_with_the_diagram_and_hint(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_per_call(fake_mcp_server):
            async with asyncio.timeout(10):
                await session_per_call(fake_mcp_server.url, calls=3)
            fake_mcp_server.assert_initialize_count(1)
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_initialize_count(1): 3 initialize requests arrived, expected 1.",
            "*  session ????: opened by #1, 1 initialize, * carried its id, ended by the client's DELETE",
            "*Exchanges (arrival order*",
            arrow("initialize", "200 sid=????"),
            arrow("notifications/initialized [????]", "202"),
            arrow("tools/call echo [????]", "200"),
            arrow("DELETE [????]", "200"),
            arrow("initialize", "200 sid=????*← initialize 2 of 3"),
            "*Hint: one initialize per tools/call: the client opens a session per call; open one and reuse it",
        ]
    )


def test_initialize_count_hints_single_flight_when_first_calls_opened_sessions_at_once(
    pytester: pytest.Pytester,
) -> None:
    result = run_inner(
        pytester,
        """
        async def test_concurrent_first_calls(fake_mcp_server):
            fake_mcp_server.on("initialize").barrier(2)  # both handshakes in flight together
            async with asyncio.timeout(10):
                await asyncio.gather(reused(fake_mcp_server.url, calls=1), reused(fake_mcp_server.url, calls=1))
            fake_mcp_server.assert_initialize_count(1)
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_initialize_count(1): 2 initialize requests arrived, expected 1.",
            "*Hint: initialize requests were in flight at the same time: concurrent first calls each opened a "
            "session; make opening single-flight*",
        ]
    )


def test_initialize_count_hints_at_recoveries_when_the_server_ended_sessions(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_recovered(fake_mcp_server):
            async with asyncio.timeout(10):
                await recovers_from_drop(fake_mcp_server)
            fake_mcp_server.assert_initialize_count(1)
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_initialize_count(1): 2 initialize requests arrived, expected 1.",
            "*Hint: 1 session ended on the server and each recovery opens one: expect 1 + 1 initialize*",
        ]
    )


def test_initialize_count_rejects_a_negative_count(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_negative(fake_mcp_server):
            with pytest.raises(ValueError, match=r"n=-1 must be an int >= 0"):
                fake_mcp_server.assert_initialize_count(-1)
        """,
    )
    result.assert_outcomes(passed=1)


# --- assert_sessions ---------------------------------------------------------------------------------


def test_sessions_pass_for_a_recovered_drop_counting_how_each_ended(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_recovered(fake_mcp_server):
            async with asyncio.timeout(10):
                await recovers_from_drop(fake_mcp_server)
            fake_mcp_server.assert_sessions(created=2, ended=2, live=0, ended_by={"dropped": 1, "delete": 1})
            figures = fake_mcp_server.figures
            assert figures.ended_by == {"dropped": 1, "delete": 1}
            assert figures.not_found_count == 1
            assert list(figures.requests_per_session.values()) == [6, 6]
        """,
    )
    result.assert_outcomes(passed=1)


def test_sessions_fire_when_the_client_never_deletes(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_no_delete(fake_mcp_server):
            async with asyncio.timeout(10):
                await leaves_session_open(fake_mcp_server.url)
            fake_mcp_server.assert_sessions(created=1, ended_by={"delete": 1})
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_sessions(created=1, ended_by={'delete': 1}): ended_by {}, expected {'delete': 1}.",
            "*  session ????: opened by #1, 1 initialize, 4 later requests carried its id, live",
            "*Exchanges (arrival order*",
            arrow("initialize", "200 sid=????*← opened ????"),
            "*Hint: a session is still live: close the client (it sends DELETE) before asserting on ended sessions",
        ]
    )


def test_sessions_reject_unknown_end_reasons_and_no_figures(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_bad_arguments(fake_mcp_server):
            with pytest.raises(ValueError, match=r"ended_by key 'deleted' is not a way a session ends; use one of"):
                fake_mcp_server.assert_sessions(ended_by={"deleted": 1})
            with pytest.raises(TypeError, match=r"needs at least one of created="):
                fake_mcp_server.assert_sessions()
        """,
    )
    result.assert_outcomes(passed=1)


# --- assert_session_reused -----------------------------------------------------------------------------


def test_session_reused_passes_with_the_sdks_get_stream_and_hidden_tools_list(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_reuse(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=3)
            assert fake_mcp_server.get_requests(method="tools/list")  # protocol.md §6 item 18
            assert fake_mcp_server.get_requests(http_method="GET")
            fake_mcp_server.assert_session_reused()
        """,
    )
    result.assert_outcomes(passed=1)


def test_session_reused_passes_when_a_new_session_replaces_a_dropped_one(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_recovered(fake_mcp_server):
            async with asyncio.timeout(10):
                await recovers_from_drop(fake_mcp_server)
            fake_mcp_server.assert_session_reused()
        """,
    )
    result.assert_outcomes(passed=1)


def test_session_reused_fires_for_a_session_per_call(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_per_call(fake_mcp_server):
            async with asyncio.timeout(10):
                await session_per_call(fake_mcp_server.url, calls=2)
            fake_mcp_server.assert_session_reused()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_session_reused(): 1 exchange did not reuse the session "
            "(2 sessions opened by initialize).",
            "*Exchanges (arrival order*",
            arrow("DELETE [????]", "200"),
            arrow("initialize", "200 sid=????*← new session after the client's own DELETE of ????"),
            "*Hint: the client opened a new session while it had one (per call or per task: *#c01)*",
        ]
    )


def test_session_reused_fires_for_a_call_on_the_old_session_after_reinitializing(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_old_handle(fake_mcp_server):
            async with asyncio.timeout(10):
                await calls_old_session_after_reinit(fake_mcp_server)
            fake_mcp_server.assert_session_reused()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_session_reused(): 1 exchange did not reuse the session*",
            "*✂ drop_session(every live session)*",
            arrow("tools/call echo [????]", "404"),
            arrow("initialize", "200 sid=????"),
            arrow("tools/call echo [????!]", "404*← old session ????; current ????"),
            "*Hint: after the new session opened, a request still carried the old id (docs/failure-modes.md#r03)*",
        ]
    )


# --- assert_no_stale_session_ids -----------------------------------------------------------------------


def test_no_stale_session_ids_passes_when_the_dead_id_is_dropped_after_the_404(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_recovered(fake_mcp_server):
            async with asyncio.timeout(10):
                await recovers_from_drop(fake_mcp_server)
            fake_mcp_server.assert_no_stale_session_ids()
        """,
    )
    result.assert_outcomes(passed=1)


def test_no_stale_session_ids_passes_the_sdks_one_delete_of_a_dead_session_and_notes_it(
    pytester: pytest.Pytester,
) -> None:
    result = run_inner(
        pytester,
        """
        async def test_delete_after_404(fake_mcp_server):
            async with asyncio.timeout(10):
                await deletes_dead_session(fake_mcp_server)
            fake_mcp_server.assert_no_stale_session_ids()
            assert fake_mcp_server.figures.harmless_deletes == 1
            diagram = str(fake_mcp_server.journal)
            assert "DELETE [" in diagram and "!]" not in diagram, diagram
            assert "← note: DELETE of " in diagram and ": harmless" in diagram, diagram
        """,
    )
    result.assert_outcomes(passed=1)


def test_no_stale_session_ids_strict_fires_for_the_sdks_delete_of_a_dead_session(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_delete_after_404(fake_mcp_server):
            async with asyncio.timeout(10):
                await deletes_dead_session(fake_mcp_server)
            fake_mcp_server.assert_no_stale_session_ids(strict=True)
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_no_stale_session_ids(strict=True): 1 exchange carried a session id it "
            "should not have.",
            "*✂ drop_session(every live session)*",
            arrow("tools/call echo [????]", "404"),
            arrow("DELETE [????!]", "404*← stale: ???? already ended (404 at #*)"),
            "*Hint: the client sent DELETE for a session the server had already ended (strict=True flags even*",
        ]
    )


def test_no_stale_session_ids_fires_for_a_call_retried_on_the_dead_id(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_retry_on_dead_id(fake_mcp_server):
            async with asyncio.timeout(10):
                async with session(fake_mcp_server.url, terminate_on_close=False) as s:
                    await s.call_tool("echo", {"text": "before"})
                    fake_mcp_server.drop_session()
                    for _ in range(2):
                        with contextlib.suppress(SDKError):
                            await s.call_tool("echo", {"text": "lost"})
            fake_mcp_server.assert_no_stale_session_ids()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_no_stale_session_ids(): 1 exchange carried a session id it should not have.",
            arrow("tools/call echo [????]", "404"),
            arrow("tools/call echo [????!]", "404*← stale: ???? already ended (404 at #*)"),
            "*Hint: after the 404 the client kept the dead session id*",
        ]
    )


def test_no_stale_session_ids_fires_for_initialize_carrying_the_dead_id(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_reinit_with_old_id(fake_mcp_server):
            async with asyncio.timeout(10):
                await reinitializes_with_old_id(fake_mcp_server)
            fake_mcp_server.assert_no_stale_session_ids()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_no_stale_session_ids(): 1 exchange carried a session id it should not have.",
            arrow("tools/call echo [????]", "404"),
            arrow("initialize [????!]", "404*← stale session id on initialize"),
            "*Hint: an initialize carried Mcp-Session-Id: a new session starts without one*#r02)*",
        ]
    )


# --- assert_all_sessions_closed -----------------------------------------------------------------------


def test_all_sessions_closed_passes_for_deleted_and_learnt_dead_sessions(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_closed(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url)
                await recovers_from_drop(fake_mcp_server)
            fake_mcp_server.assert_all_sessions_closed()
        """,
    )
    result.assert_outcomes(passed=1)


def test_all_sessions_closed_fires_for_a_session_never_deleted(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_left_open(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url)
                await leaves_session_open(fake_mcp_server.url)
            fake_mcp_server.assert_all_sessions_closed()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_all_sessions_closed(): 1 of 2 sessions the client opened got no DELETE.",
            "*  session ???? (opened by #*): still live, no DELETE",
            arrow("initialize", "200 sid=????*← opened ????, never DELETEd"),
            "*Hint: close the client on every path (the SDK transport sends DELETE on exit unless "
            "terminate_on_close=False; docs/failure-modes.md#t08), and assert after it is closed",
        ]
    )


# --- assert_tool_ran -----------------------------------------------------------------------------------


def test_tool_ran_passes_counting_runs_not_requests(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_runs(fake_mcp_server):
            async with asyncio.timeout(10):
                await recovers_from_drop(fake_mcp_server)  # three calls: the one answered 404 never ran
            fake_mcp_server.assert_tool_ran("echo", times=2)
            fake_mcp_server.assert_tool_ran("echo")
            assert fake_mcp_server.figures.tool_executions == {"echo": 2}
        """,
    )
    result.assert_outcomes(passed=1)


def test_tool_ran_fires_for_a_wrong_count_and_a_misspelt_name(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_count(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=2)
            fake_mcp_server.assert_tool_ran("echo", times=1)

        async def test_name(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=1)
            fake_mcp_server.assert_tool_ran("ehco")
        """,
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_tool_ran('echo', times=1): the handler ran 2 times, expected 1 time.",
            "*  tool executions: echo×2",
            lit("*  tools/call 'echo': 2 requests, answered [200, 200]"),
            arrow("tools/call echo [????]", "200*← call of echo"),
            "*Hint: the client sent 2 calls of 'echo', with different arguments, and each ran",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_tool_ran('ehco'): the handler ran 0 times, expected at least once.",
            "*the fake serves no tool named 'ehco'; it serves 'echo'",
            "*Hint: did you mean 'echo'?",
        ]
    )


# --- assert_concurrent ---------------------------------------------------------------------------------


def test_concurrent_passes_for_calls_sent_together_on_one_session(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_gather(fake_mcp_server):
            fake_mcp_server.add_tool("wait", barrier_tool(3))
            async with asyncio.timeout(10), session(fake_mcp_server.url) as s:
                await asyncio.gather(*(s.call_tool("wait", {"text": str(i)}) for i in range(3)))
            fake_mcp_server.assert_concurrent(min_in_flight=3)
            fake_mcp_server.assert_session_reused()
        """,
    )
    result.assert_outcomes(passed=1)


def test_concurrent_fires_for_sequential_calls_despite_the_open_get_stream(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_sequential(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=3)
            assert fake_mcp_server.figures.max_in_flight >= 2  # the GET stream was open meanwhile
            fake_mcp_server.assert_concurrent(min_in_flight=2)
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_concurrent(min_in_flight=2): at most 1 JSON-RPC request in flight at once, "
            "expected at least 2.",
            "*  all exchanges in flight at once, GET streams included: *",
            arrow("GET stream [????]", "200*"),
            "*Hint: the client awaited each call before sending the next*",
        ]
    )


# --- assert_no_requests_after_close ------------------------------------------------------------------


def test_no_requests_after_close_passes_once_the_client_is_closed(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_closed(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url)
            fake_mcp_server.mark_client_closed()
            fake_mcp_server.assert_no_requests_after_close()
        """,
    )
    result.assert_outcomes(passed=1)


def test_no_requests_after_close_fires_for_a_request_after_the_mark(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        async def test_leftover(fake_mcp_server):
            async with asyncio.timeout(10):
                await reused(fake_mcp_server.url, calls=1)
                fake_mcp_server.mark_client_closed()
                await reused(fake_mcp_server.url, calls=1)  # a task that outlived the client
            fake_mcp_server.assert_no_requests_after_close()

        async def test_never_marked(fake_mcp_server):
            fake_mcp_server.assert_no_requests_after_close()
        """,
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_no_requests_after_close(): * requests arrived after the client was closed.",
            "*■ client closed (mark_client_closed)",
            arrow("initialize", "200 sid=????*← after close"),
            "*Hint: a task outlived the client*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_no_requests_after_close(): mark_client_closed() was never called*",
            "*Hint: call fake_mcp_server.mark_client_closed() right after your client is closed",
        ]
    )
