"""RaceSuite takes the clients frameworks have (issue 22), says what it cannot explore, and closes twice at once
(issue 23): ``open_client`` (an async context manager entered and left on the scenario's task), ``session_policy``,
``known_failures``, a client that works in threads refused per scenario with the fix, the two close scenarios.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import socket
import statistics
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase

from contract_clients import ReferenceClient
from pytest_fake_mcp._race import NondeterminismError
from pytest_fake_mcp.races import Race, RaceFailure, RaceSuite, explore, race_settings
from race_clients import UnsharedCloseClient

TESTS_DIR = Path(__file__).parent
CANNOT_EXPLORE = "RaceSuite explores one event loop's interleavings: a client that works in threads cannot be explored"
FIX = "SessionReuseSuite runs it with its calls bounded in worker threads"

PYPROJECT = """
[tool.pytest.ini_options]
asyncio_default_fixture_loop_scope = "function"
filterwarnings = [
    "error::ResourceWarning",
    "error::pytest.PytestUnraisableExceptionWarning",
    "error::pytest.PytestUnhandledThreadExceptionWarning",
]
"""

HEADER = """
import asyncio
import contextlib

import anyio
import pytest

import contract_clients
import race_clients
from pytest_fake_mcp.races import RaceSuite


ScopedClient = contract_clients.ScopedClient

class SdkSessionClient:
    \"\"\"As FastMCP's Client does: `async with` enters the SDK's transport and ClientSession on the entering task and
    initializes; calls go straight to the session (which does not reopen a session the server lost).\"\"\"

    def __init__(self, url):
        self.url = url

    async def __aenter__(self):
        sdk = contract_clients._sdk()
        self._stack = contextlib.AsyncExitStack()
        http = contract_clients.new_http_client()
        await self._stack.enter_async_context(http)
        streams = await self._stack.enter_async_context(sdk.streamable_http_client(self.url, http_client=http))
        self._session = await self._stack.enter_async_context(sdk.client_session(streams[0], streams[1]))
        await self._session.initialize()
        return self

    async def __aexit__(self, *exc):
        return await self._stack.__aexit__(*exc)

    async def call_tool(self, name, arguments):
        return await self._session.call_tool(name, arguments)


class SyncContext:
    \"\"\"A client that runs in threads (as strands-agents' MCPClient does): a `with`, a sync call_tool. Never
    entered here: the race suite refuses it first.\"\"\"

    def __init__(self, url):
        self.url = url

    def __enter__(self):
        raise AssertionError("entered: the race suite must refuse a sync context manager before entering it")

    def __exit__(self, *exc):
        return None

    def call_tool(self, name, arguments):
        raise AssertionError("called in a thread")


class SyncCaller:
    \"\"\"An async context that yields an object whose call_tool is sync.\"\"\"

    def __init__(self, url):
        self.url = url
        self.left = False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.left = True

    def call_tool(self, name, arguments):
        raise AssertionError("called in a thread")


class SyncCallClient:
    \"\"\"make_client's form with a sync call_tool.\"\"\"

    def __init__(self, url):
        self.url = url

    def call_tool(self, name, arguments):
        raise AssertionError("called in a thread")

    async def aclose(self):
        pass


class ResolvingClient(contract_clients.ReferenceClient):
    \"\"\"Async, but resolves a host name first: the loop runs that lookup in a worker thread.\"\"\"

    async def call_tool(self, name, arguments=None):
        await asyncio.get_running_loop().getaddrinfo("localhost", 80)
        return await super().call_tool(name, arguments)
"""


def run_suite(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.syspathinsert(TESTS_DIR)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(test_inner=HEADER + body)
    return pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rsx", *args)


# --- client forms -------------------------------------------------------------------------------------------


def test_an_async_context_manager_client_runs_every_race_scenario_entered_and_left_on_one_task(
    pytester: pytest.Pytester,
) -> None:
    """open_client: every scenario passes (no "cancel scope in a different task"), but the double close, which is
    not a thing for a context, skips saying so. Before: RaceSuite had no open_client (NotImplementedError)."""
    result = run_suite(
        pytester,
        """
class TestScoped(RaceSuite):
    max_examples = 8
    hypothesis_settings = {"database": None}

    @pytest.fixture
    def open_client(self):
        return ScopedClient
""",
    )
    result.assert_outcomes(passed=6, skipped=2)  # and the authorization scenario, off (auth = False)
    result.stdout.fnmatch_lines(
        ["SKIPPED*open_client's context is left once, on the task that entered it, as `async with` does*"]
    )
    assert "different task" not in result.stdout.str()


def test_the_sdks_own_session_opened_by_async_with_meets_only_its_real_bug(pytester: pytest.Pytester) -> None:
    """Issue 22's proof for the race suite: a framework-style client on the real SDK, entered and left on one task,
    runs every scenario with no adapter error; what it fails is its own, declared: no recovery from a 404, and under
    mcp 1.x a call left waiting for ever once the context is left (found by both close scenarios as a deadlock)."""
    mcp_1 = importlib.metadata.version("mcp").startswith("1.")
    # On mcp 1.x the mixture's search meets that same hang in some environments and not in others (CI's lowest
    # versions, derandomized, do not): a strict xfail would flip, so there it is left out; the two close scenarios
    # state the hang.
    only = ("-k", "not stateful_mixture") if mcp_1 else ()
    result = run_suite(
        pytester,
        """
import importlib.metadata

MCP_1 = importlib.metadata.version("mcp").startswith("1.")
HANGS = "mcp 1.x: a call in flight when the session's context is left waits for ever"


class TestSdkSession(RaceSuite):
    max_examples = 10
    hypothesis_settings = {"database": None, "derandomize": True}  # the same search here and under CI's profile
    known_failures = {
        "test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss": "does not reopen a lost session",
        **(
            {
                "test_aclose_racing_the_first_call_leaves_nothing_open": HANGS,
                "test_aclose_racing_a_call_on_an_open_session_leaves_nothing_open": HANGS,
            }
            if MCP_1
            else {}
        ),
    }

    @pytest.fixture
    def open_client(self):
        return SdkSessionClient
""",
        *only,
    )
    # skipped: the double close (not a thing for a context) and the authorization scenario, off (auth = False)
    result.assert_outcomes(passed=2 if mcp_1 else 5, skipped=2, xfailed=3 if mcp_1 else 1)
    assert "different task" not in result.stdout.str()


def test_a_client_that_works_in_threads_is_refused_by_every_scenario_naming_the_fix(
    pytester: pytest.Pytester,
) -> None:
    """A sync context manager, a sync call_tool in an async context, a sync call_tool from make_client: each
    scenario skips with the reason and the fix, before any sync step runs. Before: RaceFailure ("a coroutine was
    expected") or NondeterminismError ("a thread started during the run")."""
    result = run_suite(
        pytester,
        """
class TestSyncContext(RaceSuite):
    max_examples = 3

    @pytest.fixture
    def open_client(self):
        return SyncContext


class TestSyncCaller(RaceSuite):
    max_examples = 3

    @pytest.fixture
    def open_client(self):
        return SyncCaller


class TestSyncCall(RaceSuite):
    max_examples = 3

    @pytest.fixture
    def make_client(self):
        return SyncCallClient
""",
    )
    result.assert_outcomes(skipped=24)
    # -rs groups the skips by reason: 6 + 6 + 7 refused (an open_client has no double close, which skips anyway),
    # and each class's authorization scenario, off (auth = False), before its client is opened
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED [[]6[]]*{CANNOT_EXPLORE} (open_client returned a sync context manager, entered and left in a "
            f"thread); {FIX}*",
            f"SKIPPED [[]6[]]*{CANNOT_EXPLORE} (the call_tool its context yields is sync, run in a thread); {FIX}*",
            f"SKIPPED [[]7[]]*{CANNOT_EXPLORE} (make_client's client has a sync call_tool, run in a thread); {FIX}*",
        ],
        consecutive=False,
    )


def test_an_async_client_that_starts_a_worker_thread_is_skipped_saying_what_it_used(
    pytester: pytest.Pytester,
) -> None:
    """A DNS lookup (run by the loop in a thread): the scenario skips, naming the lookup and the fix, rather than
    failing a client for something its author would not call wrong. Before: it failed with NondeterminismError."""
    result = run_suite(
        pytester,
        """
class TestResolving(RaceSuite):
    max_examples = 3

    @pytest.fixture
    def make_client(self):
        return ResolvingClient
""",
        "-k",
        "first_calls",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*{CANNOT_EXPLORE} (it used a DNS lookup of 'localhost' (runs in a thread)); {FIX}*"])


def test_a_thread_the_engine_refuses_names_the_same_fix() -> None:
    """explore() keeps failing for a thread (the code is the test's own), and says where a threaded client goes."""

    async def scenario(race: Race) -> None:
        await asyncio.to_thread(socket.gethostname)

    with pytest.raises(NondeterminismError, match=FIX) as raised:
        explore(scenario, max_examples=2, settings=race_settings(2, database=None, phases=(Phase.generate,)))
    assert raised.value.thread

    async def starts_a_thread(race: Race) -> None:
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()

    with pytest.raises(NondeterminismError, match=f"a thread started during the run.*{FIX}") as raised:
        explore(starts_a_thread, max_examples=2, settings=race_settings(2, database=None, phases=(Phase.generate,)))
    assert raised.value.thread


# --- session policy and known failures ----------------------------------------------------------------------


def test_a_per_call_client_that_declares_it_passes_and_the_loss_scenario_says_why_it_skips(
    pytester: pytest.Pytester,
) -> None:
    """Before: session_policy was not read, and the loss scenario failed the per-call client by design."""
    result = run_suite(
        pytester,
        """
class TestPerCall(RaceSuite):
    max_examples = 8
    hypothesis_settings = {"database": None}
    session_policy = "per_call"

    @pytest.fixture
    def make_client(self):
        return contract_clients.SessionPerCallClient


class TestTypo(RaceSuite):
    session_policy = "per-call"

    @pytest.fixture
    def make_client(self):
        return contract_clients.SessionPerCallClient
""",
        "-k",
        "first_calls or session_loss",
    )
    result.assert_outcomes(passed=1, skipped=1, failed=2)  # TestTypo's two refuse the policy
    result.stdout.fnmatch_lines(
        [
            'SKIPPED*TestPerCall.session_policy = "per_call": no session outlives a call, so there is none for the '
            "server to lose between calls*",
        ]
    )
    result.stdout.fnmatch_lines(["*session_policy = 'per-call': use 'reuse'*or 'per_call'*"])


def test_known_failures_run_as_strict_xfails_and_a_typo_is_refused(pytester: pytest.Pytester) -> None:
    """The contract suite's semantics, from the same helper. Before: known_failures was not read (a failure)."""
    result = run_suite(
        pytester,
        """
class TestKnown(RaceSuite):
    max_examples = 30
    hypothesis_settings = {"database": None}
    known_failures = {
        "test_concurrent_first_calls_open_one_session_and_one_http_client": "builds its HTTP client lazily",
    }

    @pytest.fixture
    def make_client(self):
        return race_clients.LazyHTTPClientClient


class TestFixed(RaceSuite):
    max_examples = 10
    hypothesis_settings = {"database": None}
    known_failures = {"test_aclose_racing_the_first_call_leaves_nothing_open": "fixed since: an XPASS fails"}

    @pytest.fixture
    def make_client(self):
        return contract_clients.ReferenceClient


class TestTypo(RaceSuite):
    known_failures = {"test_concurent_first_calls": "a typo"}

    @pytest.fixture
    def make_client(self):
        return contract_clients.ReferenceClient
""",
        "-k",
        "TestKnown and first_calls or TestFixed and racing_the_first_call or TestTypo and first_calls",
    )
    outcomes = result.parseoutcomes()
    assert outcomes["xfailed"] == 1, result.stdout.str()
    assert outcomes["failed"] == 1  # TestFixed's XPASS(strict)
    assert outcomes["errors"] == 1  # TestTypo's, at setup
    result.stdout.fnmatch_lines(["*XFAIL*builds its HTTP client lazily*"])
    result.stdout.fnmatch_lines(["*XPASS(strict)*fixed since: an XPASS fails*"])
    result.stdout.fnmatch_lines(
        ["*TestTypo.known_failures names no scenario of the suite: 'test_concurent_first_calls'*"]
    )


# --- the two close scenarios (issue 23 item 2) --------------------------------------------------------------

DOUBLE_CLOSE = "test_two_concurrent_acloses_on_an_open_session_leave_nothing_open"
CLOSE_DURING_CALL = "test_aclose_racing_a_call_on_an_open_session_leaves_nothing_open"
SEARCHES = 5
FIND_ONLY: dict[str, Any] = {
    "database": None,
    "phases": (Phase.generate,),
    "derandomize": True,  # each search its own fixed seed (its key): no flakes
    "report_multiple_bugs": False,
}


def _examples_to_find(client_cls: type[Any], test: str, search: int) -> int | None:
    """Examples run up to the first failing one, at the default budget (None: not found)."""
    made: list[str] = []

    def make_client(url: str) -> Any:
        made.append(url)
        return client_cls(url)

    suite = type(f"Races{client_cls.__name__}Search{search}", (RaceSuite,), {"hypothesis_settings": FIND_ONLY})()
    try:
        getattr(suite, test)(make_client)
    except RaceFailure:
        return len(made) - 1  # Hypothesis runs the failing example once more to report it
    return None


def test_a_second_concurrent_aclose_closing_the_http_client_under_the_first_ones_delete_is_found() -> None:
    """Issue 23's planted bug, at the default budget (the loaded profile's 100 examples), over five seeds: found in
    the first example of each (both closes start at once, so stock order already meets it). Before: no scenario
    closed twice at once (the mixture found it in 1 search of 5)."""
    counts = [_examples_to_find(UnsharedCloseClient, DOUBLE_CLOSE, search) for search in range(SEARCHES)]
    assert None not in counts, counts
    assert statistics.median(c for c in counts if c is not None) <= 2, counts


def test_the_double_close_failure_says_the_session_was_left_open() -> None:
    suite = type("RacesDoubleClose", (RaceSuite,), {"max_examples": 20, "hypothesis_settings": FIND_ONLY})()
    with pytest.raises(RaceFailure) as failure:
        getattr(suite, DOUBLE_CLOSE)(UnsharedCloseClient)
    assert "sessions left open on the server after aclose()" in str(failure.value)


@pytest.mark.parametrize("test", [DOUBLE_CLOSE, CLOSE_DURING_CALL])
def test_the_reference_client_passes_both_close_scenarios(test: str) -> None:
    suite = type("RacesReference", (RaceSuite,), {"max_examples": 100, "hypothesis_settings": {"database": None}})()
    getattr(suite, test)(ReferenceClient)


def test_closing_during_a_call_is_no_double_close_bug() -> None:
    """The mutant closes correctly once: the in-flight-call scenario passes it (each scenario fails its own bug)."""
    suite = type("RacesUnshared", (RaceSuite,), {"max_examples": 50, "hypothesis_settings": {"database": None}})()
    getattr(suite, CLOSE_DURING_CALL)(UnsharedCloseClient)
