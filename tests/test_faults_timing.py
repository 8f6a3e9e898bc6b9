"""Timing faults met by real SDK clients: delays (before headers, between SSE events, until a gate), barriers, hangs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from _fault_helpers import MCP1, attempt, echo, sdk_session, seen, text_of
from pytest_fake_mcp import FakeMCPServer, Gate, Outcome


def calls(server: FakeMCPServer) -> list[Any]:
    return server.get_requests(method="tools/call")


# --- delay --------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_delay_holds_the_answer_before_its_headers(fake_mcp_server: FakeMCPServer) -> None:
    slow = fake_mcp_server.on("initialize").delay(0.3).once()
    results = await attempt(fake_mcp_server.url, echo("a"))
    assert [r.ok for r in results] == [True, True]
    init = fake_mcp_server.get_requests(method="initialize")[0]
    assert init.duration is not None
    assert init.duration >= 0.3
    assert init.faults == (str(slow),) == ("Delay 0.3s on POST initialize in any session, once",)


@pytest.mark.asyncio
async def test_a_slow_call_past_the_client_read_timeout_times_out(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").delay(2)
    results = await attempt(fake_mcp_server.url, echo("a"), read_s=0.2)
    assert results[1].code == (408 if MCP1 else -32001)  # protocol.md §4: the SDKs' own timeout errors


@pytest.mark.asyncio
async def test_a_held_initialize_does_not_block_other_sessions(fake_mcp_server: FakeMCPServer) -> None:
    gate = fake_mcp_server.gate("first initialize")
    held = fake_mcp_server.on("initialize").delay(until=gate)
    first = asyncio.create_task(attempt(fake_mcp_server.url, echo("first")))
    await held.wait_fired()
    second = await attempt(fake_mcp_server.url, echo("second"))  # served while the first is held
    assert [r.ok for r in second] == [True, True]
    assert not first.done()
    gate.open()
    assert [r.ok for r in await first] == [True, True]
    first_init, second_init = fake_mcp_server.get_requests(method="initialize")
    assert first_init.ended is not None
    assert second_init.ended is not None
    assert second_init.ended < first_init.ended
    assert str(held) == "Delay until gate 'first initialize' opens on POST initialize in any session, once"


@pytest.mark.asyncio
async def test_a_threading_event_can_gate_a_delay(fake_mcp_server: FakeMCPServer) -> None:
    release = threading.Event()
    held = fake_mcp_server.on("tools/call").delay(0.01, until=release)
    task = asyncio.create_task(attempt(fake_mcp_server.url, echo("a")))
    await held.wait_fired()
    release.set()
    assert [r.ok for r in await task] == [True, True]
    assert str(held).startswith("Delay until the test's threading.Event opens, then 0.01s")


@pytest.mark.asyncio
async def test_a_delay_between_sse_events_slows_each_event(fake_mcp_server: FakeMCPServer) -> None:
    async def report(ctx: Any) -> str:
        ctx.progress(1, 2)
        ctx.progress(2, 2)
        return "done"

    fake_mcp_server.add_tool("report", report)
    slow = fake_mcp_server.on("tools/call").delay(0.1, between_events=True)
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("report", {}, progress_callback=on_progress)
    assert text_of(result) == "done"
    assert progress == [1, 2]
    [call] = calls(fake_mcp_server)
    assert call.response_format == "sse"
    assert call.duration is not None
    assert call.duration >= 0.3  # three events (two progress notifications and the result), each 0.1s late
    assert call.faults == (str(slow),)


# --- barrier ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_barrier_makes_k_calls_concurrent(fake_mcp_server: FakeMCPServer) -> None:
    barrier = fake_mcp_server.on("tools/call").barrier(3)
    async with sdk_session(fake_mcp_server.url) as session:
        results = await asyncio.gather(*(seen(session.call_tool("echo", {"text": t})) for t in "abc"))
    assert [text_of(r.result) for r in results] == ["a", "b", "c"]
    held = calls(fake_mcp_server)
    assert max(e.started for e in held) < min(e.ended for e in held)  # all three arrived before any answer
    assert barrier.fired == 3
    assert fake_mcp_server.figures.max_in_flight >= 3


@pytest.mark.asyncio
async def test_a_barrier_releases_in_the_given_order(fake_mcp_server: FakeMCPServer) -> None:
    """Each is answered only once the one before it was: the order is the fake's, whatever the client's tasks do."""
    fake_mcp_server.on("tools/call").barrier(3, order=[2, 0, 1])
    async with sdk_session(fake_mcp_server.url) as session:
        results = await asyncio.gather(*(seen(session.call_tool("echo", {"text": t})) for t in "abc"))
    assert [r.ok for r in results] == [True] * 3
    first, second, third = calls(fake_mcp_server)  # in arrival order
    assert third.ended is not None
    assert first.ended is not None
    assert second.ended is not None
    assert third.ended < first.ended < second.ended


@pytest.mark.asyncio
async def test_a_barrier_and_a_drop_give_k_concurrent_404s(fake_mcp_server: FakeMCPServer) -> None:
    """R08: K calls in flight when the session goes; each meets its own 404."""
    fake_mcp_server.on("tools/call").barrier(2)
    fake_mcp_server.on("tools/call").drop_session()
    async with sdk_session(fake_mcp_server.url) as session:
        results = await asyncio.gather(*(seen(session.call_tool("echo", {"text": t})) for t in "ab"))
    assert [r.code for r in results] == [32600 if MCP1 else -32600] * 2
    assert [e.status for e in calls(fake_mcp_server)] == [404, 404]


# --- hang ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_hung_call_never_answers_until_the_client_gives_up(fake_mcp_server: FakeMCPServer) -> None:
    hang = fake_mcp_server.on("tools/call").hang()
    results = await attempt(fake_mcp_server.url, echo("a"), echo("b"), read_s=0.3)
    assert results[1].code == (408 if MCP1 else -32001)
    assert results[2].ok  # the session itself is fine
    hung = calls(fake_mcp_server)[0]
    assert hung.status is None
    assert hung.outcome in (Outcome.DISCONNECTED, Outcome.IN_FLIGHT)  # 2.x closes the stream; 1.x leaves it
    assert hung.faults == (str(hang),)
    assert fake_mcp_server.executions() == [fake_mcp_server.executions()[0]]  # only the 2nd call ran
    fake_mcp_server._verify()  # lets the held request go, as the fixture does at teardown
    assert calls(fake_mcp_server)[0].outcome in (Outcome.DISCONNECTED, Outcome.RELEASED)


@pytest.mark.asyncio
async def test_a_black_holed_initialize_is_an_sdk_timeout(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("initialize").hang()
    results = await attempt(fake_mcp_server.url, read_s=0.3)
    assert not results[-1].ok
    assert {getattr(getattr(e, "error", None), "code", None) for e in results[-1].leaves} == {408 if MCP1 else -32001}


def test_a_gate_opens_from_any_thread() -> None:
    gate = Gate("x")
    loop = asyncio.new_event_loop()
    try:
        waiter = loop.create_task(gate.wait())
        loop.run_until_complete(asyncio.sleep(0))
        thread = threading.Thread(target=gate.open)
        thread.start()
        thread.join()
        loop.run_until_complete(asyncio.wait_for(waiter, 5))
        assert gate.is_open
        gate.close()
        assert not gate.is_open
    finally:
        loop.close()


@pytest.mark.asyncio
async def test_latency_slows_matching_requests_inside_the_block_only(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        with fake_mcp_server.latency(0.1, method="tools/call") as slow:
            await session.call_tool("echo", {"text": "slow"})
        await session.call_tool("echo", {"text": "fast"})
    inside, outside = calls(fake_mcp_server)
    assert inside.duration is not None
    assert inside.duration >= 0.1
    assert inside.faults == (str(slow),) == ("Delay 0.1s on POST tools/call in any session, always (optional)",)
    assert outside.faults == ()
    assert fake_mcp_server.scripted_faults == ()


# --- the per-test bound on what the fake holds (hold_timeout) ----------------------------------------------

HOLD_INNER = """
import asyncio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(hold_timeout=0.5)
async def test_hung_call_without_a_client_timeout(fake_mcp_server):
    fake_mcp_server.on("tools/call").hang()
    async with streamable_http_client(fake_mcp_server.url) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        await s.call_tool("echo", {"text": "held"})  # no timeout: only the fake's bound ends this


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(hold_timeout=10)  # the bound runs from the lease: 0.5 s can pass before the call, loaded
async def test_gate_opened_in_time(fake_mcp_server):
    gate = fake_mcp_server.gate("let it through")
    fake_mcp_server.on("tools/call").delay(until=gate)
    async with streamable_http_client(fake_mcp_server.url) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        call = asyncio.ensure_future(s.call_tool("echo", {"text": "held"}))
        gate.open()
        await asyncio.wait_for(call, 10)
"""


def test_a_fault_holding_a_request_past_hold_timeout_is_cut_and_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_inner=HOLD_INNER)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_hung_call_without_a_client_timeout*",
            "E   pytest_fake_mcp.VerificationError: The fake still held 1 request(s) at hold_timeout=0.5s and reset "
            "their connection(s), so the test could not wait on them for ever:",
            "*- #* POST tools/call echo, held by: Hang (accept, never answer) on POST tools/call*",
            "*client ── tools/call echo [[]*] ─*▶ server   connection reset*← held until hold_timeout=0.5s",
            "*✂ hold_timeout=0.5s: reset 1 held request(s)",
            "*Hint: a fault held a request the client awaited without a bound*",
        ]
    )
    assert "test_gate_opened_in_time" not in result.stdout.str().split("short test summary")[-1]


LATE_INNER = """
import asyncio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(hold_timeout=0.1)
async def test_hung_call_sent_after_the_bound(fake_mcp_server):
    fake_mcp_server.on("tools/call").hang()
    async with streamable_http_client(fake_mcp_server.url) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        await asyncio.sleep(0.3)  # not a synchronisation: the test outlives its hold_timeout before the call
        await s.call_tool("echo", {"text": "held"})  # no client bound: only the fake's ends this
"""


def test_a_request_a_fault_begins_to_hold_after_hold_timeout_is_reset_at_once(pytester: pytest.Pytester) -> None:
    # On a loaded machine the held request can arrive after the bound's timer fired: it must not hang.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_inner=LATE_INNER)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--durations=1")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_hung_call_sent_after_the_bound*",
            "E   pytest_fake_mcp.VerificationError: The fake still held 1 request(s) at hold_timeout=0.1s*",
            "*client ── tools/call echo [[]*] ─*▶ server   connection reset*← held until hold_timeout=0.1s",
        ]
    )


def test_hold_timeout_must_be_positive_or_none(fake_mcp_server_factory: Any) -> None:
    from pytest_fake_mcp import FakeMCPOptions, ScriptError

    with pytest.raises(ScriptError, match=r"hold_timeout=0 must be > 0 \(seconds\), or None for no bound"):
        FakeMCPOptions(hold_timeout=0)
    assert FakeMCPOptions(hold_timeout=None).hold_timeout is None
