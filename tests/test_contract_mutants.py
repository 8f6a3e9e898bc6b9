"""Each deliberately broken client fails exactly the contract scenario about its bug, with the diagram.

Every case runs the whole ``SessionReuseSuite`` (in-process, through ``pytester``) against one client
from ``tests/contract_clients.py`` and checks which tests failed: exactly the scenario named (all of its
parametrizations), every other scenario passed or was skipped. The failure text must carry the
expected headline and diagram lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import contract_clients
from _sdk import INNER_PYPROJECT
from pytest_fake_mcp import FakeMCPServerFactory
from pytest_fake_mcp._client import _reusing as _client
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.contract import SessionReuseSuite

TESTS_DIR = Path(__file__).parent
MCP1 = importlib.metadata.version("mcp").startswith("1.")
_WARM_MODULES = ("hypothesis", "pytest_asyncio", "pytest_fake_mcp.contract", "pygments", "pygments.lexers.python")


@pytest.fixture(scope="module", autouse=True)
def _import_what_the_inner_runs_use() -> None:
    """Import here everything an inner run uses: pytester drops what a run imported when it ends, so each
    run would import (and assertion-rewrite) hypothesis, uvicorn and the SDK again, seconds per run."""
    for name in _WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    sdk = _client._SDK
    if sdk is not None and sdk.client_session is not getattr(sys.modules.get("mcp"), "ClientSession", None):
        # Cached during an earlier in-process pytester run whose imports are gone: the HTTP-client
        # counters would patch the new httpx classes while the cache still builds the old ones.
        _client._SDK = None
    factory = FakeMCPServerFactory()
    try:
        with factory.lease() as server:

            async def one_call() -> None:
                async with contract_clients.BroadSessionLossClient(server.url) as client:
                    await client.call_tool("echo", {"text": "warm-up"})
                async with ReusingSessionClient(server.url) as client:
                    await client.call_tool("echo", {"text": "warm-up"})

            asyncio.run(one_call())
    finally:
        factory.close()


SEQUENTIAL = "test_sequential_calls_reuse_one_session_and_one_http_client"
LOST = "test_lost_session_is_reopened_once_and_the_call_retried"
PERSISTENT = "test_persistent_session_loss_fails_clearly_within_a_bound"
FIRST_CALLS = "test_concurrent_first_calls_share_one_initialize"
CONCURRENT_404 = "test_concurrent_calls_meeting_a_404_reopen_one_session"
RPC_ERROR = "test_tool_jsonrpc_error_is_not_session_loss"
IS_ERROR = "test_tool_is_error_result_is_not_session_loss"
SERVER_ERROR = "test_server_error_5xx_is_surfaced_without_reinitializing"
SSE_CUT = "test_sse_cut_after_the_tool_ran_is_not_silently_rerun"
OVERLAP = "test_concurrent_calls_overlap_on_the_server"
ACLOSE = "test_aclose_deletes_every_session_closes_every_http_client_and_leaves_no_task"
ACLOSE_IN_INIT = "test_aclose_during_the_first_initialize_leaves_no_session_open"
STRICT = "test_strict_non_404_session_loss_reopens_the_session"
CONTROL_400 = "test_invalid_request_400_is_not_session_loss"
SLOW_CALL = "test_a_call_slower_than_the_clients_own_timeout_leaves_it_usable"
CANCELLED = "test_a_caller_cancelled_mid_call_leaves_the_client_usable"

PYPROJECT = INNER_PYPROJECT

SUITE = """
import pytest
import pytest_asyncio

import contract_clients
from pytest_fake_mcp.contract import SessionReuseSuite


@pytest_asyncio.fixture(autouse=True)
async def _close_what_the_mutant_leaked():
    yield
    await contract_clients.close_leaked()


class TestMutant(SessionReuseSuite):
    call_timeout = 10.0
    overlap_timeout = 2.5  # three concurrent calls reach the fake within it even under load 17 (a soak run)
{knobs}
    @pytest.fixture
    def make_client(self):
        return contract_clients.{client}
"""


@dataclass(frozen=True)
class Case:
    client: str
    """A class in tests/contract_clients.py."""
    fails: tuple[str, ...]
    """The scenarios (test methods) that must fail, every parametrization of each; all others pass or skip."""
    lines: tuple[str, ...]
    """fnmatch patterns that must appear, in order, in the failure output."""
    knobs: str = ""


CASES = [
    Case(
        "AbandonsSessionOnInterruptClient",
        (SLOW_CALL, CANCELLED),
        (
            "*TestMutant: 2 sessions live after the slow call and the call that followed: the client opened a new "
            "session and left the old one open.",
            "*TestMutant: 2 sessions live after the cancelled call and the call that followed*",
        ),
        knobs="    client_timeout = 5.0  # contract_clients.READ_TIMEOUT\n",
    ),
    Case(
        "SessionPerCallClient",
        (SEQUENTIAL,),
        (
            "*assert_initialize_count(1): 3 initialize requests arrived, expected 1.",
            "*client ── initialize ──*▶ server   200 sid=*",
            "*client ── DELETE [[]*] ─*▶ server   200",
            "*client ── initialize ──*▶ server   200 sid=*",
            "*Hint: one initialize per tools/call*",
        ),
    ),
    Case(
        "HTTPClientPerCallClient",
        (SEQUENTIAL,),
        ("*assert_created(1*3*", "*fake MCP server exchanges*", "*client ── initialize ──*"),
    ),
    Case(
        "NoRetryOn404Client",
        (LOST,),
        (
            "*TestMutant: The call after drop_session() raised SessionLostError*expected it to succeed on a new*"
            "Then the next call succeeded on a new session.",
            "*client ── tools/call echo [[]*] ─*▶ server   404",
            "*Hint: the client recovers, but only for the next call: retry the call that met the loss once*",
        ),
    ),
    Case(
        # The re-initialize on the dead id is itself an extra initialize: the count says so first.
        "StaleIdReinitClient",
        (LOST,),
        (
            "*assert_initialize_count(2): 3 initialize requests arrived, expected 2.",
            "*client ── tools/call echo [[]*] ─*▶ server   404",
            "*client ── initialize [[]*] ─*▶ server   404*",
            "*client ── initialize ──*▶ server   200 sid=*",
            "*Hint: an initialize carried a session id*",
            "*Also failing (less serious, same exchanges):",
            "*  - assert_no_stale_session_ids(): 1 exchange carried a session id it should not have.",
        ),
    ),
    Case(
        # The reference client sends nothing to a dead session: it passes strict_stale_delete too.
        "ReferenceClient",
        (),
        (),
        knobs="    strict_stale_delete = True\n",
    ),
    Case(
        # Correct: the SDK's default transport DELETEs the session that met the 404 as it is closed.
        "DefaultTransportClient",
        (),
        (),
    ),
    Case(
        # The same client under strict_stale_delete: that one DELETE is now a finding, in every loss scenario.
        "DefaultTransportClient",
        (LOST,),
        (
            "*assert_no_stale_session_ids(strict=True): 1 exchange carried a session id it should not have.",
            "*client ── DELETE [[]*!] ─*▶ server   404*← stale: * already ended (404 at #*)",
        ),
        knobs="    strict_stale_delete = True\n",
    ),
    Case(
        # The harmless DELETE never hides the real bug: the rebuilt HTTP client is reported.
        "DefaultTransportHTTPClientPerSessionClient",
        (LOST,),
        ("*TestMutant: 1 HTTP client(s) built while recovering from the lost session (a healthy call built 0)*",),
    ),
    Case(
        # Strict on top: still the HTTP client first, the DELETE after it, both reported.
        "DefaultTransportHTTPClientPerSessionClient",
        (LOST,),
        (
            "*TestMutant: 1 HTTP client(s) built while recovering from the lost session (a healthy call built 0)*",
            "*Hint: keep the HTTP client*",
            "*Also failing (less serious, same exchanges):",
            "*  - assert_no_stale_session_ids(strict=True): 1 exchange carried a session id it should not have.",
        ),
        knobs="    strict_stale_delete = True\n",
    ),
    Case(
        # Contexts entered in a caller's task and exited in aclose's: the suite's own report, not a raw
        # RuntimeError or CancelledError. It also never recovers from a lost session.
        "CrossTaskCloseClient",
        # mcp 1.x also tears the transport down on any non-404 error status, which this client never survives.
        (LOST, FIRST_CALLS, ACLOSE_IN_INIT, *((SERVER_ERROR, CONTROL_400, SSE_CUT) if MCP1 else ())),
        (
            "*TestMutant: The client raised RuntimeError out of the scenario: Attempted to exit cancel scope in a "
            "different task than it was entered in",
            "*client exception: RuntimeError: Attempted to exit cancel scope in a different task*",
            "*Hint: enter and exit the SDK's contexts (streamable_http_client, ClientSession) in one task*",
        ),
    ),
    Case(
        "HTTPClientPerSessionClient",
        (LOST,),
        (
            "*TestMutant: 1 HTTP client(s) built while recovering from the lost session (a healthy call built 0)*",
            "*#2*",
            "*client ── tools/call echo [[]*] ─*▶ server   404",
            "*client ── initialize ──*▶ server   200 sid=*",
        ),
    ),
    Case(
        "UnboundedRetryClient",
        (PERSISTENT,),
        (
            "*TestMutant: 4 initialize requests (new sessions) while every session answered 404, expected at most 3.",
            "*client ── initialize ──*new session during the outage*",
            "*Hint: bound the retries*",
        ),
    ),
    Case(
        "NoSingleFlightFirstCallClient",
        (FIRST_CALLS,),
        (
            "*assert_initialize_count(1): 5 initialize requests arrived, expected 1.",
            "*client ── initialize ──*",
            "*client ── initialize ──*initialize 5 of 5*",
        ),
    ),
    Case(
        "ReinitPerCallerClient",
        (CONCURRENT_404,),
        (
            "*TestMutant: 5 initialize requests (new sessions) after 5 concurrent calls met the 404*expected 1.",
            "*client ── tools/call echo [[]*] ─*▶ server   404",
            "*client ── initialize ──*new session*",
            "*Hint: let the first caller that sees the 404 open the new session*",
        ),
    ),
    Case(
        "LossOnNotFoundMessageClient",
        (RPC_ERROR,),
        (
            "*assert_initialize_count(1): 3 initialize requests arrived, expected 1.",
            "*client ── tools/call contract_rpc_error [[]*] ─*▶ server   200 error -32002",
            "*client ── initialize ──*initialize 2 of 3*",
        ),
    ),
    Case(
        "LossOnIsErrorClient",
        (IS_ERROR,),
        (
            "*assert_initialize_count(1): 2 initialize requests arrived, expected 1.",
            "*client ── tools/call contract_is_error [[]*] ─*▶ server   200*",
            "*client ── initialize ──*initialize 2 of 2*",
        ),
    ),
    Case(
        "RetryOn5xxClient",
        (SERVER_ERROR,),
        (
            "*TestMutant: A call answered 500 returned*expected it to raise.",
            "*client ── tools/call echo [[]*] ─*▶ server   500",
            "*client ── initialize ──*",
            "*Hint: a 5xx is not a session loss*",
        ),
    ),
    Case(
        "InvalidRequestAsLossClient",
        (CONTROL_400,),
        (
            "*assert_initialize_count(1): 2 initialize requests arrived, expected 1.",
            "*client ── tools/call echo [[]*] ─*▶ server   400",
            "*client ── initialize ──*initialize 2 of 2*",
            "*Hint: the client opened a new session after a 400 answer to #*, which did not end the session*",
        ),
    ),
    Case(
        "BlindRetryAfterCutClient",
        (SSE_CUT,),
        (
            "*assert_tool_ran('echo', times=1): the handler ran 2 times, expected 1 time.",
            "*Hint: the tool ran more often than expected*",
        ),
    ),
    Case(
        "SerialisingClient",
        (OVERLAP,),
        (
            "*assert_concurrent(min_in_flight=5): at most 1 JSON-RPC request in flight at once, expected at least 5.",
            "*client ── tools/call echo [[]*] ──*",
            "*Hint: the client awaited each call before sending the next*",
        ),
    ),
    Case(
        # No DELETE at all also leaves open the session of the interrupted handshake: both scenarios see it.
        "NoDeleteClient",
        (ACLOSE, ACLOSE_IN_INIT),
        (
            "*assert_all_sessions_closed(): 1 of 1 session the client opened got no DELETE.",
            "*session * (opened by #1): still live, no DELETE",
            "*client ── initialize ──*opened *, never DELETEd*",
        ),
    ),
    Case(
        "LeakedHTTPClientClient",
        (ACLOSE,),
        ("*assert_all_closed(): 1 of 1 HTTP client was not closed.", "*OPEN*", "*fake MCP server exchanges*"),
    ),
    Case(
        "LeftoverTaskClient",
        (ACLOSE,),
        (
            "*TestMutant: 1 task(s) still running after aclose() returned.",
            "*Event.wait*",
            "*client ── DELETE [[]*] ─*▶ server   200",
            "*Hint: cancel and await every task the client started*",
        ),
    ),
    Case(
        "CancelOpeningOnCloseClient",
        (ACLOSE_IN_INIT,),
        (
            "*assert_all_sessions_closed(): 1 of 1 session the client opened got no DELETE.",
            "*client ── initialize ──*opened *, never DELETEd*",
            "*Hint: closing while the first initialize is in flight must let that handshake finish*#t06)",
        ),
    ),
    Case(
        # The reference client reads only a 404 as session loss: with the strict shapes on, each fails.
        "ReferenceClient",
        (STRICT,),
        (
            "*TestMutant: The call after the session was dropped and answered 400 with JSON-RPC -32000*",
            "*Hint: on a lost session open a new one*",
        ),
        knobs="    strict_session_loss = True\n",
    ),
    Case(
        # Not broken: it passes the strict scenarios too, so they can be passed.
        "BroadSessionLossClient",
        (),
        (),
        knobs="    strict_session_loss = True\n",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.client + ("-strict" if case.knobs else ""))
def test_broken_client_fails_exactly_its_scenario(pytester: pytest.Pytester, case: Case) -> None:
    pytester.syspathinsert(TESTS_DIR)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(test_mutant=SUITE.format(client=case.client, knobs=case.knobs))
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")

    reports = result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
    ran = {r.nodeid.split("::")[-1] for r in reports if r.when == "setup"}
    failed = {r.nodeid.split("::")[-1] for r in reports if r.failed}
    expected = {name for name in ran if name.split("[")[0] in case.fails}
    assert not result.reprec.getfailedcollections(), result.stdout.str()  # type: ignore[attr-defined]
    assert len(ran) > 20, f"the suite did not run: {sorted(ran)}"
    assert failed == expected, (
        f"{case.client}: expected exactly {sorted(expected)} to fail; unexpected failures "
        f"{sorted(failed - expected)}, unexpected passes {sorted(expected - failed)}\n{result.stdout.str()}"
    )
    if case.lines:
        result.stdout.fnmatch_lines(list(case.lines))


def test_every_scenario_has_a_broken_client_and_every_client_a_case() -> None:
    # The authorization scenarios (auth = True) are failed by the broken refreshers of test_contract_auth.py.
    scenarios = {
        name
        for name in dir(SessionReuseSuite)
        if name.startswith("test_") and not getattr(getattr(SessionReuseSuite, name), "_contract_auth", False)
    }
    caught = {name for case in CASES for name in case.fails}
    assert scenarios - caught == set(), "scenarios no broken client fails"
    assert caught <= scenarios, f"cases name scenarios that do not exist: {sorted(caught - scenarios)}"
    assert {case.client for case in CASES} == set(contract_clients.CLIENTS)


def _run_inner(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.syspathinsert(TESTS_DIR)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(test_inner=source)
    return pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def test_strict_scenarios_are_skipped_by_default_saying_how_to_enable_them(pytester: pytest.Pytester) -> None:
    source = SUITE.format(client="ReferenceClient", knobs="")
    result = _run_inner(pytester, source, "-k", "strict", "-rs")
    result.assert_outcomes(skipped=7)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] *pytest_fake_mcp/contract.py:*: strict session-loss shapes are off*set "
            "strict_session_loss = True on TestMutant to require recovery*"
        ]
    )
    # The skip is placed at the scenario's line, not at the innermost frame left shown (asyncio's loop).
    assert "base_events.py" not in result.stdout.str()


def test_a_hanging_client_fails_fast_with_the_diagram(pytester: pytest.Pytester) -> None:
    source = """
import asyncio
import pytest
from pytest_fake_mcp.contract import SessionReuseSuite


class Hangs:
    async def call_tool(self, name, arguments):
        await asyncio.Event().wait()

    async def aclose(self):
        pass


class TestHangs(SessionReuseSuite):
    call_timeout = 0.3

    @pytest.fixture
    def make_client(self):
        return lambda url: Hangs()
"""
    result = _run_inner(pytester, source, "-k", "sequential")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TestHangs: Call 1 of 3 did not finish within call_timeout=0.3s (the suite's bound on each step of "
            "the client).",
            "*Hint: if the client bounds this wait itself by more than 0.3s (the mcp SDK's read timeout defaults "
            "to 300 s), raise call_timeout on the suite class above that bound, or configure the client's read "
            "timeout below call_timeout; if nothing bounds it, the client hangs: bound every wait*",
        ]
    )
    # What was measured, not a verdict: the suite cannot see the client's own bound.
    assert "the client hangs." not in result.stdout.str()


def test_a_subclass_without_make_client_errors_saying_how_to_define_it(pytester: pytest.Pytester) -> None:
    source = """
from pytest_fake_mcp.contract import SessionReuseSuite


class TestNoFactory(SessionReuseSuite):
    pass
"""
    result = _run_inner(pytester, source, "-k", "sequential")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*TestNoFactory must define a make_client fixture*", "*return lambda url: OurClient(url)*"]
    )


def test_a_client_without_aclose_is_told_what_the_suite_needs(pytester: pytest.Pytester) -> None:
    source = """
import pytest
from pytest_fake_mcp.contract import SessionReuseSuite


class OnlyClose:
    async def call_tool(self, name, arguments):
        return None

    async def close(self):
        pass


class TestOnlyClose(SessionReuseSuite):
    @pytest.fixture
    def make_client(self):
        return lambda url: OnlyClose()
"""
    result = _run_inner(pytester, source, "-k", "sequential")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TypeError: make_client returned <*OnlyClose object at *>, which has no aclose()*"])
