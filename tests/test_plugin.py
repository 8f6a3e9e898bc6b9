"""The plugin's report side (plugin.py): the exchanges section on failing tests, --fake-mcp-trace,
the opt-in requests-after-close teardown check and the mcp_http_clients fixture, through pytester.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx  # noqa: F401 - imported here so in-process inner runs reuse them instead of importing anew
import mcp.client.streamable_http  # noqa: F401
import pytest

from _sdk import INNER_ARGS

HEADER = """
import asyncio
import contextlib

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@contextlib.asynccontextmanager
async def session(url, *, http_client=None):
    async with asyncio.timeout(10), streamable_http_client(url, http_client=http_client) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            yield s
"""


def write_inner(pytester: pytest.Pytester, body: str, name: str = "test_inner") -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(**{name: HEADER + textwrap.dedent(body)})


def run_inner(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    write_inner(pytester, body)
    return pytester.runpytest(*INNER_ARGS, *args)


# --- the report section ------------------------------------------------------------------------------


def test_failing_test_gets_the_exchanges_section_and_a_passing_one_does_not(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_fails(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("echo", {"text": "x"})
            assert False, "the client got it wrong"

        @pytest.mark.asyncio
        async def test_passes(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("echo", {"text": "x"})
        """,
        "-rA",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the client got it wrong",
            "*- fake MCP server exchanges -*",
            "http://127.0.0.1:*/mcp",
            "*0.0ms  client ── initialize ─*▶ server   200 sid=????*",
            "*ms  client ── tools/call echo [[]????] ─*▶ server   200*",
            "*ms  client ── DELETE [[]????] ─*▶ server   200*",
            "*short test summary info*",
        ]
    )
    assert result.stdout.str().count("fake MCP server exchanges") == 1


def test_a_test_failing_on_the_clients_own_error_after_a_404_gets_the_hint(pytester: pytest.Pytester) -> None:
    """The SDK client surfaces a lost session's 404 as its own error: the report names the 404 it came from."""
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_recovers(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("echo", {"text": "x"})
                fake_mcp_server.drop_session()
                await s.call_tool("echo", {"text": "y"})  # raises the client's error for the 404
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- fake MCP server exchanges -*",
            "*tools/call echo [[]????] ─*▶ server   404*",
            "Hint: the server answered #* with 404: session ???? was gone (dropped), and the client opened no new "
            "session after it, so an error it raised may be that 404; a client that recovers opens a new session "
            "once and retries the call (docs/failure-modes.md#r01)",
        ]
    )


def test_a_failure_with_nothing_to_say_about_sessions_gets_no_hint(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_fails(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("echo", {"text": "x"})
                fake_mcp_server.drop_session()
            assert False, "the test's own check"
        """,
    )
    result.assert_outcomes(failed=1)
    assert "Hint:" not in result.stdout.str()


def test_an_answer_naming_a_session_not_kept_reads_alike_in_the_journal_and_the_report(
    pytester: pytest.Pytester,
) -> None:
    """The mcp 2.x server names a session in its 400 to a session-less request and keeps none: str(journal) and
    the report's diagram both say `(not kept)`, and the report's legend says why."""
    result = run_inner(
        pytester,
        """
        import httpx

        @pytest.mark.asyncio
        @pytest.mark.fake_mcp_server(flavour="mcp2", era="handshake")
        async def test_refused(fake_mcp_server):
            async with httpx.AsyncClient() as client:
                await client.post(
                    fake_mcp_server.url,
                    headers={"accept": "application/json, text/event-stream"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                )
            print("JOURNAL", str(fake_mcp_server.journal))
            assert False
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "JOURNAL *client ── tools/list ──▶ server   400 sid=???? (not kept)",
            "*- fake MCP server exchanges -*",
            "*sid=… (not kept): the answer named a session id the server then did not keep, as the mcp 2.x server "
            "does when it refuses a request that had none (docs/protocol.md)):",
            "*client ── tools/list ──▶ server   400 sid=???? (not kept)",
        ]
    )


def test_a_teardown_failure_draws_its_diagram_once_without_the_plugins_frames(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_handler_bug(fake_mcp_server):
            def broken() -> str:
                raise KeyError("oops")

            fake_mcp_server.add_tool("broken", broken)
            async with session(fake_mcp_server.url) as s:
                with contextlib.suppress(Exception):  # the SDK raises for the -32603 answer
                    await s.call_tool("broken", {})
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_handler_bug*",
            "E   pytest_fake_mcp.VerificationError: The fake MCP server raised 1 error(s) while answering:",
            "*ms  client ── tools/call broken [[]????] ─*▶ server   200 error -32603*",
            "All traceback entries are hidden*",
        ]
    )
    output = result.stdout.str()
    assert "fake MCP server exchanges" not in output  # no second copy of the diagram in a report section
    assert "def fake_mcp_server(" not in output  # nor the fixture's source


def test_section_covers_servers_leased_from_the_factory_during_the_test(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
            with fake_mcp_server_factory.lease(flavour="mcp1") as other:
                async with session(other.url) as s:
                    await s.call_tool("echo", {"text": "on the other server"})
            assert False
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- fake MCP server exchanges (fake_mcp_server_factory.lease() #1) -*",
            "*ms  client ── tools/call echo [[]????] ─*▶ server   200*",
        ]
    )
    # The test's own fake_mcp_server saw nothing: no section for it.
    assert "exchanges (fake_mcp_server) -" not in result.stdout.str()


# --- --fake-mcp-trace --------------------------------------------------------------------------------

TRACED = """
@pytest.mark.asyncio
@pytest.mark.parametrize("n", [1, 2])
async def test_fails(fake_mcp_server, n):
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": f"call {n}"})
    assert n == 0

@pytest.mark.asyncio
async def test_passes(fake_mcp_server):
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": "fine"})
"""


def check_traces(directory: Path) -> None:
    """One self-contained HTML diagram per failing test, named after its nodeid."""
    files = sorted(p.name for p in directory.iterdir())
    assert len(files) == 2, files
    assert [name.rsplit("-", 1)[0] for name in files] == ["test_traced.py_test_fails_1", "test_traced.py_test_fails_2"]
    for n, name in enumerate(files, 1):
        page = (directory / name).read_text(encoding="utf-8")
        assert page.startswith("<!DOCTYPE html>")
        assert "<script" not in page
        assert "src=" not in page
        assert f"test_traced.py::test_fails[{n}]" in page
        assert f"assert {n} == 0" in page
        assert page.count('<td class="a">tools/call echo [') == 1


def test_trace_option_writes_one_html_diagram_per_failing_test(pytester: pytest.Pytester) -> None:
    write_inner(pytester, TRACED, name="test_traced")
    result = pytester.runpytest(*INNER_ARGS, "--fake-mcp-trace=traces")
    result.assert_outcomes(passed=1, failed=2)
    check_traces(pytester.path / "traces")


def test_trace_option_is_safe_under_xdist(pytester: pytest.Pytester) -> None:
    write_inner(pytester, TRACED, name="test_traced")
    result = pytester.runpytest_subprocess(*INNER_ARGS, "-n", "2", "--fake-mcp-trace=traces", timeout=120)
    result.assert_outcomes(passed=1, failed=2)
    check_traces(pytester.path / "traces")


# --- requests after close (opt-in teardown check) ----------------------------------------------------

AFTER_CLOSE = """
pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(assert_no_requests_after_close=True)]

async def test_clean_close(fake_mcp_server):
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": "x"})
    fake_mcp_server.mark_client_closed()

async def test_request_after_close(fake_mcp_server):
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": "x"})
    fake_mcp_server.mark_client_closed()
    async with session(fake_mcp_server.url) as s:  # a task that outlived the client
        await s.call_tool("echo", {"text": "late"})

async def test_never_marked(fake_mcp_server):
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": "x"})

@pytest.mark.fake_mcp_server(assert_no_requests_after_close=False)
async def test_opted_out(fake_mcp_server):
    fake_mcp_server.mark_client_closed()
    async with session(fake_mcp_server.url) as s:
        await s.call_tool("echo", {"text": "x"})
"""


def test_requests_after_close_fail_at_teardown_only_when_opted_in(pytester: pytest.Pytester) -> None:
    result = run_inner(pytester, AFTER_CLOSE, "-v")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_request_after_close*",
            "*AssertionError: assert_no_requests_after_close(): * requests arrived after the client was closed.",
            "*  closed after exchange #6",
            "*■ client closed (mark_client_closed)",
            "*ms  client ── initialize ─*▶ server   200 sid=????*← after close",
            "*Hint: a task outlived the client*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_never_marked*",
            "*AssertionError: assert_no_requests_after_close(): mark_client_closed() was never called*",
        ]
    )
    result.stdout.fnmatch_lines(["*test_clean_close PASSED*", "*test_opted_out PASSED*"])


# --- mcp_http_clients -------------------------------------------------------------------------------


def test_mcp_http_clients_passes_for_one_sdk_session(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_one_client(fake_mcp_server, mcp_http_clients):
            async with session(fake_mcp_server.url) as s:
                for i in range(3):
                    await s.call_tool("echo", {"text": str(i)})
            mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
            mcp_http_clients.assert_all_closed()
            assert len(fake_mcp_server.figures.connections) >= 1  # TCP connections: a separate figure
        """,
    )
    result.assert_outcomes(passed=1)


def test_mcp_http_clients_fires_for_a_client_per_call_and_an_unclosed_client(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_client_per_call(fake_mcp_server, mcp_http_clients):
            for i in range(3):
                async with session(fake_mcp_server.url) as s:
                    await s.call_tool("echo", {"text": str(i)})
            mcp_http_clients.assert_created(1)

        @pytest.mark.asyncio
        async def test_unclosed(fake_mcp_server, mcp_http_clients):
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client()
            try:
                async with session(fake_mcp_server.url, http_client=client) as s:
                    await s.call_tool("echo", {"text": "x"})
                mcp_http_clients.assert_all_closed()
            finally:
                await client.aclose()
        """,
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: assert_created(1): 3 HTTP clients were created, expected 1.",
            "*Hint: build one HTTP client and pass it to each transport*",
        ]
    )
    result.stdout.fnmatch_lines(["*AssertionError: assert_all_closed(): 1 of 1 HTTP client was not closed."])


def test_plugin_import_loads_no_http_client_library_nor_the_sdk() -> None:
    code = (
        "import sys, pytest_fake_mcp.plugin\n"
        "loaded = [m for m in ('httpx', 'httpx2', 'mcp') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- calls of unknown tools ------------------------------------------------------------------------------


def test_a_call_of_an_unknown_tool_fails_the_test_at_teardown_naming_the_close_one(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_typo(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: query)
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("serch", {"query": "x"})  # an isError result the client may swallow
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_typo*",
            "E   AssertionError: The client called 1 time a tool the fake does not serve: 'serch' (did you mean "
            "'search'?).",
            "*the fake serves: 'echo', 'search'",
            "*client ── tools/call serch [[]????] ─*▶ server   200 unknown tool   ← unknown tool 'serch'",
            "*fail_on_unknown_tool=False)",
        ]
    )


def test_calls_of_served_tools_and_an_opted_out_unknown_call_pass(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_served(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                await s.call_tool("echo", {"text": "x"})
            assert fake_mcp_server.figures.unknown_tool_calls == ()

        @pytest.mark.asyncio
        @pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)
        async def test_meant(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:
                result = await s.call_tool("missing", {})
            assert (result.isError if hasattr(result, "isError") else result.is_error) is True
            assert len(fake_mcp_server.figures.unknown_tool_calls) == 1
        """,
    )
    result.assert_outcomes(passed=2)


def test_assert_tool_ran_on_a_tool_the_fake_does_not_serve_says_so(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        def test_name(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: query)
            fake_mcp_server.assert_tool_ran("serch")
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*assert_tool_ran('serch'): the handler ran 0 times, expected at least once.",
            "*the fake serves no tool named 'serch'; it serves 'echo', 'search'",
            "*Hint: did you mean 'search'?",
        ]
    )


def test_markers_help_shows_each_default_whole(pytester: pytest.Pytester) -> None:
    """pytest ends a marker's signature at its first ':', so a default with one is given whole after it."""
    out = pytester.runpytest("--markers", "-o", "asyncio_default_fixture_loop_scope=function").stdout.str()
    assert "127.0.0.1: *" not in out
    assert "allowed_hosts=<below>" in out
    assert "allowed_hosts=('127.0.0.1:*', 'localhost:*', '[::1]:*')" in out


# --- a skipped test's faults ---------------------------------------------------------------------------


def test_a_skipped_or_xfailed_test_is_not_failed_for_the_faults_it_never_reached(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.asyncio
        async def test_skips_after_scripting(fake_mcp_server):
            fake_mcp_server.on("tools/call").respond(503)
            pytest.skip("the feature is not there on this SDK line")

        @pytest.mark.asyncio
        async def test_xfails_after_scripting(fake_mcp_server):
            fake_mcp_server.on("tools/call").respond(503)
            pytest.xfail("known to fail")

        @pytest.mark.asyncio
        async def test_runs_and_never_reaches_its_fault(fake_mcp_server):
            fake_mcp_server.on("tools/call").respond(503)
        """,
        "-rA",
    )
    result.assert_outcomes(passed=1, skipped=1, xfailed=1, errors=1)  # only the test that ran is verified
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_runs_and_never_reaches_its_fault*"])


def test_a_client_that_sends_no_token_to_an_auth_fake_gets_the_hint_to_give_it_one(pytester: pytest.Pytester) -> None:
    result = run_inner(
        pytester,
        """
        @pytest.mark.fake_mcp_server(auth=True)
        @pytest.mark.asyncio
        async def test_forgets_the_provider(fake_mcp_server):
            async with session(fake_mcp_server.url) as s:  # no auth= on its HTTP client
                await s.call_tool("echo", {"text": "x"})

        @pytest.mark.fake_mcp_server(auth=True)
        @pytest.mark.asyncio
        async def test_fails_for_its_own_reason(fake_mcp_server):
            assert fake_mcp_server.issue_token()
            assert False, "the test's own assert"
        """,
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert out.count("Hint: every request was refused 401 and the client asked the authorization server nothing") == 1
    result.stdout.fnmatch_lines(["*HeadlessOAuth().provider(url)*issue_token()*docs/authorization.md*"])
