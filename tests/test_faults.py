"""Fault scripting: matching on the MCP message, counting, chaining, markers, script errors, teardown checks.

The faults themselves, each met by a real SDK client, are in ``test_faults_*.py``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from _fault_helpers import MCP1, attempt, echo, raw_call, raw_initialize, sdk_session, seen, text_of
from pytest_fake_mcp import FakeMCPServer, Outcome, ScriptedFault, ScriptError, SessionLossShape

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_fake_mcp import FakeMCPServerFactory


def run_inner(pytester: pytest.Pytester) -> pytest.RunResult:
    """Run the inner test file in a subprocess (in-process runs unload modules the outer tests use)."""
    return pytester.runpytest_subprocess("-p", "no:randomly", "-o", "asyncio_default_fixture_loop_scope=function")


def tool_calls(server: FakeMCPServer) -> list[Any]:
    return server.get_requests(method="tools/call")


# --- sentences ----------------------------------------------------------------------------------------


@pytest.mark.fake_mcp_server(assert_all_faults_fired=False)
@pytest.mark.asyncio
async def test_a_scripted_fault_reads_as_a_sentence(fake_mcp_server: FakeMCPServer) -> None:
    assert str(fake_mcp_server.on("initialize").delay(0.5).once()) == (
        "Delay 0.5s on POST initialize in any session, once"
    )
    assert str(fake_mcp_server.on("tools/call", tool="search").nth(2).respond(503)) == (
        "Answer 503 with JSON-RPC -32603 'Service Unavailable' on POST tools/call 'search' in any session, "
        "on the 2nd matching request"
    )
    assert str(fake_mcp_server.on("tools/call").after(1).drop_session()) == (
        "Drop the session on POST tools/call in any session, after 1 matching request, once"
    )
    assert str(fake_mcp_server.on(http_method="GET").always().respond(405, body=None)) == (
        "Answer 405 with an empty body on GET stream in any session, always"
    )
    assert str(fake_mcp_server.on("initialize", has_session=True).times(3).respond(SessionLossShape.GONE)) == (
        "Answer 410 with JSON-RPC -32001 'Session expired' (410 Gone servers) on POST initialize carrying a "
        "session id, 3 times"
    )
    assert repr(fake_mcp_server.on("ping").optional().hang()).startswith("<ScriptedFault Hang")


# --- counting -----------------------------------------------------------------------------------------

SCHEDULES: dict[str, tuple[Callable[[ScriptedFault], ScriptedFault], list[bool]]] = {
    "once (default)": (lambda f: f, [False, True, True]),
    "nth(2)": (lambda f: f.nth(2), [True, False, True]),
    "times(2)": (lambda f: f.times(2), [False, False, True]),
    "after(1)": (lambda f: f.after(1), [True, False, True]),
    "after(1).always()": (lambda f: f.after(1).always(), [True, False, False]),
    "always()": (lambda f: f.always(), [False, False, False]),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.asyncio
async def test_the_schedule_picks_which_matching_requests_the_fault_fires_on(
    fake_mcp_server: FakeMCPServer, name: str
) -> None:
    count, expected_ok = SCHEDULES[name]
    fault = count(fake_mcp_server.on("tools/call")).respond(404)
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), echo("c"))
    assert [r.ok for r in results[1:]] == expected_ok
    assert {r.code for r in results[1:] if not r.ok} == {32600 if MCP1 else -32600}
    calls = tool_calls(fake_mcp_server)
    assert [bool(e.faults) for e in calls] == [not ok for ok in expected_ok]
    assert fault.seen == 3
    assert fault.fired == expected_ok.count(False)
    assert fault.fired_on == [e.seq for e in calls if e.faults]


# --- matching on the MCP message ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_faults_match_the_tool_and_arguments_not_the_url(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("search", lambda query: f"found {query}")
    by_tool = fake_mcp_server.on("tools/call", tool="search").always().respond(404)
    by_arguments = fake_mcp_server.on("tools/call", arguments={"text": "poison"}).respond(404)
    async with sdk_session(fake_mcp_server.url) as session:
        assert text_of(await session.call_tool("echo", {"text": "fine"})) == "fine"
        assert not (await seen(session.call_tool("search", {"query": "x"}))).ok
        assert not (await seen(session.call_tool("echo", {"text": "poison"}))).ok
    assert (by_tool.fired, by_arguments.fired) == (1, 1)
    assert by_tool.seen == 1  # the echo calls are not 'search'


@pytest.mark.asyncio
async def test_a_fault_can_target_one_session(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as first, sdk_session(fake_mcp_server.url) as second:
        target = fake_mcp_server.get_requests(method="initialize")[1].response_session_id
        assert target is not None
        fault = fake_mcp_server.on("tools/call", session_id=target).always().respond(404)
        assert (await seen(first.call_tool("echo", {"text": "a"}))).ok
        assert not (await seen(second.call_tool("echo", {"text": "b"}))).ok
    assert fault.fired == 1
    assert str(fault).endswith(f"in session {target[:8]}, always")


@pytest.mark.asyncio
async def test_http_method_matches_delete_and_the_get_stream(fake_mcp_server: FakeMCPServer) -> None:
    delete = fake_mcp_server.on(http_method="DELETE").respond(500, body=None)
    stream = fake_mcp_server.on(http_method="GET").always().respond(403)
    results = await attempt(fake_mcp_server.url, echo("a"))
    assert [r.ok for r in results] == [True, True]  # both clients survive a 403 GET and a 500 DELETE
    assert (delete.fired, stream.fired) == (1, fake_mcp_server.get_requests(http_method="GET").__len__())
    [gone] = fake_mcp_server.get_requests(http_method="DELETE")
    assert gone.status == 500
    assert gone.faults == (str(delete),)


@pytest.mark.asyncio
async def test_every_due_fault_fires_in_script_order_until_one_answers(fake_mcp_server: FakeMCPServer) -> None:
    slow = fake_mcp_server.on("tools/call").delay(0.05)
    refused = fake_mcp_server.on("tools/call").respond(404)
    never = fake_mcp_server.on("tools/call").optional().respond(410)
    results = await attempt(fake_mcp_server.url, echo("a"))
    assert not results[1].ok
    [call] = tool_calls(fake_mcp_server)
    assert call.status == 404
    assert call.faults == (str(slow), str(refused))
    assert (slow.fired, refused.fired, never.fired, never.seen) == (1, 1, 0, 1)
    assert call.duration is not None
    assert call.duration >= 0.05


# --- script errors fail at the scripting line, naming the fix ---------------------------------------------

BAD_SCRIPTS: dict[str, tuple[Callable[[FakeMCPServer], object], str]] = {
    "negative delay": (lambda f: f.on("initialize").delay(-1), "must be a number >= 0; to never answer use .hang()"),
    "times(0)": (lambda f: f.on("initialize").times(0), "times(n=0) must be an int >= 1"),
    "nth(0)": (lambda f: f.on("initialize").nth(0), "the first matching request is nth(1)"),
    "after(-1)": (lambda f: f.on("initialize").after(-1), "after(n=-1) must be an int >= 0"),
    "method typo": (lambda f: f.on("tools_call"), "did you mean 'tools/call'?"),
    "initialise": (lambda f: f.on("initialise"), "did you mean 'initialize'?"),
    "HTTP verb as method": (lambda f: f.on("GET"), "use on(http_method='GET')"),
    "tool on another method": (lambda f: f.on("tools/list", tool="x"), "only matches 'tools/call'"),
    "method with GET": (lambda f: f.on("ping", http_method="GET"), "never matches http_method='GET'"),
    "bad status": (lambda f: f.on("ping").respond(700), "must be an HTTP status 100..599"),
    "malformed typo": (lambda f: f.on("ping").malformed("bad-jsn"), "did you mean 'bad-json'?"),  # type: ignore[arg-type]
    "action after an answer": (lambda f: f.on("ping").respond(503).delay(1), "already answers the request"),
    "asyncio.Event gate": (lambda f: f.on("ping").delay(until=asyncio.Event()), "use a pytest_fake_mcp.Gate"),  # type: ignore[arg-type]
    "barrier order": (lambda f: f.on("ping").barrier(2, order=[0, 0]), "must list each arrival index 0..1 once"),
    "barrier counted once": (lambda f: f.on("ping").barrier(2).once(), "use .times(2) or .always()"),
    "negative idle clock": (lambda f: f.advance_idle_clock(-5), "must be a number >= 0"),
    "cap of 0": (lambda f: f.cap_sessions(0), "must be an int >= 1"),
}


@pytest.mark.fake_mcp_server(assert_all_faults_fired=False)
@pytest.mark.parametrize("name", list(BAD_SCRIPTS))
@pytest.mark.asyncio
async def test_bad_scripting_fails_at_the_line_with_the_fix(fake_mcp_server: FakeMCPServer, name: str) -> None:
    script, fix = BAD_SCRIPTS[name]
    with pytest.raises(ScriptError, match=_escape(fix)):
        script(fake_mcp_server)
    assert isinstance(ScriptError("x"), ValueError)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.fake_mcp_server(flavour="mcp1")
@pytest.mark.asyncio
async def test_the_idle_clock_needs_an_idle_timeout(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"set one with @pytest.mark.fake_mcp_server\(idle_timeout=60\)"):
        fake_mcp_server.advance_idle_clock(61)


# --- markers -------------------------------------------------------------------------------------------


@pytest.mark.fake_mcp_fault("tools/call", nth=2, respond=404)
@pytest.mark.fake_mcp_fault("initialize", delay=0.01)
@pytest.mark.asyncio
async def test_the_marker_scripts_faults_declaratively(fake_mcp_server: FakeMCPServer) -> None:
    assert [str(f) for f in fake_mcp_server.scripted_faults] == [  # in reading order
        "Answer 404 with JSON-RPC -32600 'Not Found' on POST tools/call in any session, on the 2nd matching request",
        "Delay 0.01s on POST initialize in any session, once",
    ]
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"))
    assert [r.ok for r in results] == [True, True, False]


def test_the_marker_help_lists_every_match_field_count_and_action_of_the_builder(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.fake_mcp_fault(method=ANY, *, tool=, target=, arguments=, session_id=, has_session=, "
            "http_method=, era=, once=, times=, nth=, after=, always=, optional=, <action>=value): script a fault on "
            "this test's fake_mcp_server, as fake_mcp_server.on(method, ...).<count>.<action>(value); actions: delay, "
            "hang, barrier, respond, drop_session, reset_connection, close_connection, cut_stream, end_stream, "
            "hold_stream, cut_after_events, refuse_replay, partial_replay, malformed, bogus_session_id, switch_era, "
            "cache_hint, discover_versions, refuse_initialize, expire_tokens, unauthorized, insufficient_scope, "
            "refuse_refresh, delay_refresh, refuse_registration (docs/faults.md)."
        ]
    )


def test_a_new_action_is_one_builder_method_and_the_marker_parses_and_lists_it() -> None:
    from pytest_fake_mcp._faults import ANY, RequestMatcher, apply_fault_marker, fault_marker_help
    from pytest_fake_mcp._faults._instead import Respond
    from pytest_fake_mcp._faults._rule import action_step

    class WithTeapot(ScriptedFault):
        @action_step
        def teapot(self, status: int = 418) -> ScriptedFault:
            """Answer as a teapot."""
            return self._add(Respond(status=status))

    def on(method: Any = ANY, **match: Any) -> ScriptedFault:
        return WithTeapot(RequestMatcher(method=method, **match))

    assert fault_marker_help(WithTeapot).endswith("refuse_registration, teapot (docs/faults.md).")
    assert "teapot" not in fault_marker_help()
    rule = apply_fault_marker(on, ("tools/call",), {"teapot": 418, "times": 2}, builder=WithTeapot)
    assert str(rule).startswith("Answer 418 with JSON-RPC -32600")
    assert str(rule).endswith("on POST tools/call in any session, 2 times")
    with pytest.raises(ScriptError, match="unexpected keyword argument 'teapot'"):  # the plain builder has no teapot
        apply_fault_marker(on, ("tools/call",), {"teapot": True})


# --- teardown: unfired faults, per-lease scripts, held requests -----------------------------------------------


INNER = """
import httpx, pytest

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

def ping(server):
    with httpx.Client(timeout=5) as client:
        return client.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=HEADERS)

def test_forgot(fake_mcp_server):
    fake_mcp_server.on("initialize").delay(0.5).once()
    fake_mcp_server.on("tools/call", tool="serach").nth(2).respond(503)
    fake_mcp_server.on("tools/list").optional().respond(503)
    ping(fake_mcp_server)

@pytest.mark.fake_mcp_server(assert_all_faults_fired=False)
def test_opted_out(fake_mcp_server):
    fake_mcp_server.on("initialize").delay(0.5)

def test_barrier_never_filled(fake_mcp_server):
    fake_mcp_server.on("ping").barrier(2, timeout=0.2)
    assert ping(fake_mcp_server).status_code == 400  # released after 0.2s, then answered

def test_one_field_off(fake_mcp_server):
    fake_mcp_server.on("ping", has_session=True).respond(503)
    ping(fake_mcp_server)

def test_answered_first(fake_mcp_server):
    fake_mcp_server.on("ping").respond(503)
    fake_mcp_server.on("ping").bogus_session_id()
    ping(fake_mcp_server)

@pytest.mark.fake_mcp_fault("tools/cal", respond=503)
def test_marker_typo(fake_mcp_server):
    pass

@pytest.mark.fake_mcp_fault("tools/call", tool="x")
def test_marker_without_action(fake_mcp_server):
    pass
"""


@pytest.mark.asyncio
async def test_teardown_and_marker_failures_read_as_sentences(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(INNER)
    result = run_inner(pytester)
    result.assert_outcomes(passed=5, errors=6)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_forgot*",
            "*VerificationError: 2 scripted fault(s) did not fire as scripted:",
            "*  - Delay 0.5s on POST initialize in any session, once: fired 0 of 1 time(s); saw 0 matching request(s)",
            "*      near miss: #1 POST /mcp ping -> 400   differs: method 'ping' != 'initialize'",
            "*  - Answer 503 with JSON-RPC -32603 'Service Unavailable' on POST tools/call 'serach' in any session, "
            "on the 2nd matching request: fired 0 of 1 time(s); saw 0 matching request(s)",
            "*Hint: call .optional() on a fault that may not fire, or set "
            "@pytest.mark.fake_mcp_server(assert_all_faults_fired=False)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_barrier_never_filled*",
            "*  - Hold until 2 requests arrived (at most 0.2s), then release them together on POST ping in any "
            "session, 2 times: only 1 of 2 requests arrived within 0.2s; released them",
            "*Hint: fewer requests reached the barrier than its parties: the client sent them one after another*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_one_field_off*",
            "*near miss: #1 POST /mcp ping -> * differs: has_session False != True",
            "*Hint: the closest request differs only in has_session: False, not True. Fix on(...has_session=...)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_answered_first*",
            "*  - Add a bogus Mcp-Session-Id to error answers on POST ping in any session, once: fired 0 of 1 time(s); "
            "saw 1 matching request(s); #1 had been answered by a fault scripted before it (script this one first)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_marker_typo*",
            "*ScriptError: method 'tools/cal' is not an MCP method the fake knows; did you mean 'tools/call'?",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_marker_without_action*",
            "*ScriptError: @pytest.mark.fake_mcp_fault('tools/call',): give an action, one of delay, hang, *",
        ]
    )
    forgot = result.stdout.str().split("did not fire as scripted")[1].split("Hint")[0]
    assert "tools/list" not in forgot  # optional faults are not listed


@pytest.mark.asyncio
async def test_faults_never_leak_into_the_next_lease(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    with fake_mcp_server_factory.lease() as first:
        first.on("tools/call").always().optional().respond(404)
        first.drop_session(shape=SessionLossShape.GONE)
    with fake_mcp_server_factory.lease() as second:
        assert second.scripted_faults == ()
        results = await attempt(second.url, echo("a"))
        assert [r.ok for r in results] == [True, True]
        assert all(not e.faults for e in second.journal.exchanges)


@pytest.mark.asyncio
async def test_a_held_request_is_released_at_teardown(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    with fake_mcp_server_factory.lease() as server:
        fault = server.on("ping").hang()
        async with httpx.AsyncClient(timeout=5) as client:
            session_id = await raw_initialize(client, server.url)
            call = asyncio.create_task(raw_call(client, server.url, session_id, "ping", {}))
            await fault.wait_fired()
            await asyncio.to_thread(server._verify)  # what the fixture runs at teardown
            with pytest.raises(httpx.TransportError):
                await call
        [held] = server.get_requests(method="ping")
        assert held.outcome is Outcome.RELEASED
        assert held.faults == (str(fault), "released at teardown, never answered")


def test_wait_fired_times_out_with_the_fault_named(fake_mcp_server: FakeMCPServer) -> None:
    fault = fake_mcp_server.on("ping").optional().respond(503)
    with pytest.raises(AssertionError, match=r"Answer 503 .* fired 0 of 1 time\(s\) within 0.05s"):
        fault.wait_fired_sync(timeout=0.05)
