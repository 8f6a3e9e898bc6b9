"""A race failure reads like any other: its diagram once, its rows in order under virtual time, the true hint.

The hint comes from what happened (which requests overlapped, in the journal's order), never from clock readings,
so a bug gets the same hint over a real socket (``fake_mcp_server``) and under `explore` (virtual time, where the
fake answers at once and every clock read is equal).
"""

from __future__ import annotations

import asyncio
import importlib
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase

from contract_clients import NoSingleFlightFirstCallClient, ReinitPerCallerClient
from pytest_fake_mcp import EndReason, Exchange, FakeMCPServer, SessionRecord
from pytest_fake_mcp._client._reusing import _sdk
from pytest_fake_mcp._race import PriorityChooser, run_controlled
from pytest_fake_mcp._race._lanes import Deviation, Lane, describe_deviations
from pytest_fake_mcp._record._analysis import stale_uses
from pytest_fake_mcp.races import Race, RaceFailure, RaceSuite, explore, race_settings

TESTS_DIR = Path(__file__).parent
FIND: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}
R08 = (
    "let the first caller that sees the 404 open the new session and the others wait for it "
    "(single-flight, keyed by the lost session: docs/failure-modes.md#r08)"
)
"""The contract suite's hint for concurrent calls that each reopened a lost session (its concurrent-404 scenario)."""
CLIENT_INFO = {"name": "raw", "version": "0"}


def _hint(error: BaseException) -> str:
    return next(line for line in str(error).splitlines() if line.startswith("Hint: "))


async def _two_first_calls(url: str) -> None:
    client = NoSingleFlightFirstCallClient(url)
    try:
        await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
    finally:
        await client.aclose()


def _race_failure_of_two_first_calls() -> RaceFailure:
    async def scenario(race: Race) -> None:
        await _two_first_calls(race.url)
        await race.quiet()
        race.server.assert_initialize_count(1)

    with pytest.raises(RaceFailure) as info:
        explore(scenario, max_examples=5, settings=race_settings(5, **FIND))
    return info.value


@pytest.mark.asyncio
async def test_a_double_open_gets_the_same_single_flight_hint_on_a_socket_and_under_explore(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("initialize").barrier(2)  # both handshakes in flight together, for certain
    async with asyncio.timeout(10):
        await _two_first_calls(fake_mcp_server.url)
    with pytest.raises(AssertionError) as on_socket:
        fake_mcp_server.assert_initialize_count(1)
    socket_hint = _hint(on_socket.value)
    assert "make opening single-flight" in socket_hint

    raced = await asyncio.to_thread(_race_failure_of_two_first_calls)  # explore runs its own loop
    cause = raced.__cause__
    assert isinstance(cause, AssertionError)
    assert "assert_initialize_count(1): 2 initialize requests arrived" in str(cause)
    assert _hint(cause) == socket_hint


def test_concurrent_reopens_after_a_loss_get_the_contract_suites_hint_under_explore() -> None:
    suite = type("Races", (RaceSuite,), {"max_examples": 10, "hypothesis_settings": FIND, "__module__": __name__})()
    with pytest.raises(RaceFailure) as info:
        suite.test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss(ReinitPerCallerClient)
    cause = info.value.__cause__
    assert cause is not None
    assert "assert_initialize_count(2)" in str(cause)
    assert R08 in _hint(cause)


def test_a_diagram_under_virtual_time_numbers_its_rows_in_arrival_order() -> None:
    cause = str(_race_failure_of_two_first_calls().__cause__)
    assert "Exchanges (#n: arrival order" in cause  # the legend says what the column is
    rows = [line.strip() for line in cause.splitlines() if "client ──" in line]
    assert rows, cause
    assert [row.split()[0] for row in rows] == [f"#{n}" for n in range(1, len(rows) + 1)], cause
    assert "0.0ms" not in cause


def test_a_diagram_on_a_real_clock_keeps_its_times(fake_mcp_server: FakeMCPServer) -> None:
    asyncio.run(_two_first_calls(fake_mcp_server.url))
    with pytest.raises(AssertionError) as info:
        fake_mcp_server.assert_initialize_count(1)
    rows = [line.strip() for line in str(info.value).splitlines() if "client ──" in line]
    assert rows
    assert all(row.split()[0].endswith("ms") for row in rows), str(info.value)
    assert "Exchanges (arrival order, each answer" in str(info.value)


def test_a_race_failure_draws_its_diagram_once_in_pytests_output(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_double_open=textwrap.dedent(
            f"""
            import asyncio
            import sys

            sys.path.insert(0, {str(TESTS_DIR)!r})

            from hypothesis import Phase
            from contract_clients import NoSingleFlightFirstCallClient
            from pytest_fake_mcp.races import explore, race_settings


            def test_two_first_calls():
                async def scenario(race):
                    client = NoSingleFlightFirstCallClient(race.url)
                    try:
                        await asyncio.gather(client.call_tool("echo", {{}}), client.call_tool("echo", {{}}))
                    finally:
                        await client.aclose()
                    await race.quiet()
                    race.server.assert_initialize_count(1)

                settings = race_settings(5, database=None, phases=(Phase.generate,), derandomize=True)
                explore(scenario, max_examples=5, settings=settings)
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert output.count("client ── initialize ─") == 2, output  # two initialize rows: one diagram
    result.stdout.fnmatch_lines(
        [
            "*RaceFailure: The race scenario failed under this schedule (AssertionError).",
            "*Raised: AssertionError: assert_initialize_count(1): 2 initialize requests arrived, expected 1. …",
            "*The failing run on the wire: drawn in the AssertionError above.",
        ]
    )
    assert "\\n" not in output  # no message escaped in a repr


def test_a_race_failures_repr_is_its_class_and_headline() -> None:
    error = _race_failure_of_two_first_calls()
    assert repr(error) == "RaceFailure('The race scenario failed under this schedule (AssertionError).')"


# --- stale session ids when the clock reads alike ----------------------------------------------------------


def _exchange(
    seq: int, method: str, status: int, orders: tuple[int, int], sid: str | None = "s1", rpc_id: int | None = None
) -> Exchange:
    return Exchange(
        seq=seq, http_method="POST", path="/mcp", rpc_method=method, rpc_id=rpc_id, session_id=sid, status=status,
        started=0.0, ended=0.0, started_order=orders[0], ended_order=orders[1],
    )  # fmt: skip


def test_a_request_retried_with_its_dead_id_under_one_clock_reading_is_stale_by_the_journals_order() -> None:
    exchanges = [
        _exchange(1, "initialize", 200, (1, 2), sid=None, rpc_id=0),
        _exchange(2, "notifications/initialized", 202, (3, 4)),
        _exchange(3, "tools/call", 404, (5, 7), rpc_id=1),  # the session was lost: 404
        _exchange(4, "tools/call", 404, (6, 8), rpc_id=1),  # the same request, but sent before that 404 was complete
        _exchange(5, "tools/call", 404, (9, 10), rpc_id=1),  # the same request again, after the 404: stale
    ]
    assert stale_uses(exchanges) == {5: "stale: s1 already ended (404 at #3)"}


def test_another_callers_request_after_a_404_under_one_clock_reading_is_not_stale() -> None:
    """Under virtual time the fake may finish a 404 before a request another caller had already prepared arrives:
    only the clock or the request a 404 answered, sent again, can say the client knew (a false alarm otherwise)."""
    lost = SessionRecord(
        id="s1", created=0.0, created_by=1, protocol_version=None, initialize_count=1, ended=0.0,
        end_reason=EndReason.DROPPED, requests=(1, 2, 3, 4, 5),
    )  # fmt: skip
    exchanges = [
        _exchange(1, "initialize", 200, (1, 2), sid=None, rpc_id=0),
        _exchange(2, "notifications/initialized", 202, (3, 4)),
        _exchange(3, "tools/call", 200, (5, 6), rpc_id=1),  # met the loss at the same reading: may have begun before
        _exchange(4, "tools/call", 404, (7, 8), rpc_id=2),
        _exchange(5, "tools/call", 404, (9, 10), rpc_id=3),  # caller 3's request, arriving after #4's 404
    ]
    assert stale_uses(exchanges, [lost]) == {}


def test_a_retry_with_a_dead_id_is_stale_under_explore_as_on_a_socket() -> None:
    http = importlib.import_module(_sdk().http_module)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def rpc(method: str, rpc_id: int | None = None, **params: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if rpc_id is not None:
            body["id"] = rpc_id
        return body

    async def scenario(race: Race) -> None:
        async with http.AsyncClient() as client:
            hello = rpc("initialize", 1, protocolVersion="2025-06-18", capabilities={}, clientInfo=CLIENT_INFO)
            opened = await client.post(race.url, json=hello, headers=headers)
            session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
            await client.post(race.url, json=rpc("notifications/initialized"), headers=session)
            race.server.drop_session()
            call = rpc("tools/call", 2, name="echo", arguments={"text": "x"})
            told = await client.post(race.url, json=call, headers=session)
            assert told.status_code == 404
            await client.post(race.url, json=call, headers=session)  # the bug: the same dead id again
        await race.quiet()
        assert {e.ended for e in race.server.journal.exchanges} == {0.0}  # one clock reading: only order tells
        race.server.assert_no_stale_session_ids()

    with pytest.raises(RaceFailure) as info:
        explore(scenario, max_examples=1, settings=race_settings(1, **FIND))
    cause = str(info.value.__cause__)
    assert "assert_no_stale_session_ids" in cause, cause
    assert "already ended (404 at #3)" in cause, cause


def test_out_of_order_steps_between_callers_are_told_apart_from_a_callers_own() -> None:
    # Task 0 is the scenario; caller-1 and caller-2 are its callers; one-a and one-b are tasks of caller-1. Every
    # out-of-order step is flagged by whose tasks it reordered: two callers' (between) or one caller's own.
    async def work() -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    async def caller_one() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.gather(loop.create_task(work(), name="one-a"), loop.create_task(work(), name="one-b"))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.gather(loop.create_task(caller_one(), name="caller-1"), loop.create_task(work(), name="caller-2"))

    family = {"caller-1": "caller-1", "one-a": "caller-1", "one-b": "caller-1", "caller-2": "caller-2"}
    result = run_controlled(main, PriorityChooser(priorities=(0, 0, 2, 0, 1)))
    assert result.deviations
    for deviation in result.deviations:
        callers = {family.get(lane.name) for lane in deviation.ahead_of if lane.seq > 0}
        assert deviation.between_callers == bool(callers - {family[deviation.ran.name]}), deviation
    assert any(not d.between_callers and d.ran.name == "one-b" for d in result.deviations), result.deviations


def test_a_report_lists_the_steps_between_callers_first() -> None:
    def step(number: int, ran: str, ahead_of: str, between: bool) -> Deviation:
        return Deviation(
            step=number, ran=Lane(seq=2, name=ran), ahead_of=(Lane(seq=1, name=ahead_of),), between_callers=between
        )

    within = step(4, "main", "caller-1", between=False)
    crossing = step(6, "caller-2", "caller-1", between=True)
    lines = describe_deviations([within, crossing], 131, 279)
    assert lines == [
        "  131 step(s) of 279 ran out of FIFO order. Where one caller's task ran ahead of another caller's (the steps "
        "that can change an outcome; the first is where the run first left stock order between callers):",
        "    step 6: caller-2 ran ahead of caller-1",
        "  and the others:",
        "    step 4: main ran ahead of caller-1",
    ]
    assert describe_deviations([within], 1, 9) == [
        "  1 step(s) of 9 ran out of FIFO order; the first ones (task, where it stood):",
        "    step 4: main ran ahead of caller-1",
    ]
    assert describe_deviations([], 0, 7) == ["  every one of 7 steps ran in FIFO order"]
