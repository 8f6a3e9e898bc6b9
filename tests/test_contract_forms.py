"""The contract suite takes the clients frameworks have (issue 22): ``open_client`` (an async context manager
entered and exited on the scenario's task, or a sync one whose calls run in bounded worker threads), a declared
``session_policy``, and scenarios that prove their setup before judging the client. Through ``pytester``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _sdk import INNER_PYPROJECT

TESTS_DIR = Path(__file__).parent

PYPROJECT = INNER_PYPROJECT

HEADER = """
import asyncio
import contextlib
import threading

import anyio
import pytest
import pytest_asyncio

import contract_clients
from pytest_fake_mcp.contract import SessionReuseSuite

READ_TIMEOUT = contract_clients.READ_TIMEOUT


ScopedClient = contract_clients.ScopedClient

class ThreadedClient:
    \"\"\"A client that runs its own event loop in a thread (as strands-agents' MCPClient does): a sync context
    manager with a sync call_tool.\"\"\"

    def __init__(self, url, *, block=None):
        self._url = url
        self._block = block
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._inner = None

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def __enter__(self):
        self._thread.start()

        async def build():
            return contract_clients.ReferenceClient(self._url)

        self._inner = self._run(build())
        return self

    def __exit__(self, *exc):
        self._run(self._inner.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def call_tool(self, name, arguments):
        if self._block is not None:
            self._block.wait(timeout=60)  # blocks the worker thread: the suite's bound must end the step
            if self._loop.is_closed():
                return None  # released after the scenario ended
        return self._run(self._inner.call_tool(name, arguments))
"""


def run_suite(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.syspathinsert(TESTS_DIR)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(test_inner=HEADER + body)
    return pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rs", *args)


def test_an_async_context_manager_client_runs_the_whole_suite_on_one_task(pytester: pytest.Pytester) -> None:
    """A client that must be exited on the task that entered it: no "cancel scope in a different task", every
    scenario passes or skips saying why (issue 22's proof)."""
    result = run_suite(
        pytester,
        """
class TestScoped(SessionReuseSuite):
    call_timeout = 10.0
    client_timeout = READ_TIMEOUT

    @pytest.fixture
    def open_client(self):
        return ScopedClient
""",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes["passed"] >= 20
    assert "different task" not in result.stdout.str()


def test_the_same_client_through_make_client_fails_as_the_issue_reported(pytester: pytest.Pytester) -> None:
    """The control: handed over by make_client (entered lazily on a call's task, closed by aclose() from another),
    the scoped client breaks as framework adapters did; the suite reports the crossed tasks."""
    result = run_suite(
        pytester,
        """
class Lazy:
    def __init__(self, url):
        self._client = ScopedClient(url)
        self._entered = None

    async def call_tool(self, name, arguments):
        if self._entered is None:
            self._entered = asyncio.ensure_future(self._client.__aenter__())
        await self._entered
        return await self._client.call_tool(name, arguments)

    async def aclose(self):
        if self._entered is not None:
            await self._client.__aexit__(None, None, None)


class TestLazy(SessionReuseSuite):
    @pytest.fixture
    def make_client(self):
        return Lazy
""",
        "-k",
        "sequential",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cancel scope*different task*"])


def test_a_threaded_client_runs_the_suite_with_its_calls_in_worker_threads(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
class TestThreaded(SessionReuseSuite):
    @pytest.fixture
    def open_client(self):
        return ThreadedClient
""",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["SKIPPED*the scenario could not be set up: the client's call_tool is sync: a call running in a thread*"]
    )


def test_a_blocked_client_thread_fails_its_scenario_saying_where_and_pytest_goes_on(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
BLOCK = threading.Event()


@pytest.fixture(autouse=True)
def _let_the_thread_go():
    yield
    BLOCK.set()


class TestBlocked(SessionReuseSuite):
    call_timeout = 1.0

    @pytest.fixture
    def open_client(self):
        return lambda url: ThreadedClient(url, block=BLOCK)
""",
        "-k",
        "sequential",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TestBlocked: Call 1 of 3 did not finish within call_timeout=1s*",
            "*the client's worker thread \"fake-mcp client: call_tool('echo')\" was still blocked:",
            "*at */test_inner.py:* in ThreadedClient.call_tool",
        ]
    )


def test_a_per_call_client_that_declares_it_passes_and_the_loss_scenarios_say_why_they_skip(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(
        pytester,
        """
class TestPerCall(SessionReuseSuite):
    session_policy = "per_call"

    @pytest.fixture
    def make_client(self):
        return contract_clients.SessionPerCallClient
""",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            'SKIPPED*TestPerCall.session_policy = "per_call": no session outlives a call, so there is none for the '
            "server to lose between calls*",
        ]
    )


def test_a_scripted_loss_that_dropped_nothing_is_not_a_statement_about_the_client(pytester: pytest.Pytester) -> None:
    """Issue 22's false statement: a session-per-call client met no 404 (drop_session dropped nothing), and the
    concurrent-404 scenario said "3 initialize requests after 3 concurrent calls met the 404": now a skip."""
    result = run_suite(
        pytester,
        """
class TestUndeclared(SessionReuseSuite):
    concurrency = 3

    @pytest.fixture
    def make_client(self):
        return contract_clients.SessionPerCallClient
""",
        "-k",
        "meeting_a_404",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*the scenario could not be set up: after the first call the client held no live session to "
            "drop, so no call met a 404 (a client that opens a session per call by design declares "
            'session_policy = "per_call")*'
        ]
    )
    assert "initialize requests (new sessions)" not in result.stdout.str()


def test_concurrent_calls_serialised_by_an_adapter_prove_nothing_and_say_so(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
class TestSerialised(SessionReuseSuite):
    concurrency = 3
    overlap_timeout = 1.0

    @pytest.fixture
    def make_client(self):
        return contract_clients.SerialisingClient
""",
        "-k",
        "first_calls",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*the scenario could not be set up: only 1 of 3 concurrent first calls were at the fake together*"]
    )


def test_a_client_that_never_reaches_the_fake_is_told_so(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
class TestElsewhere(SessionReuseSuite):
    @pytest.fixture
    def make_client(self):
        return lambda url: contract_clients.ReferenceClient("http://127.0.0.1:9/mcp")
""",
        "-k",
        "sequential",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the scenario could not be set up: the client never reached the fake at http*"])


def test_an_unknown_session_policy_is_refused_naming_both(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
class TestTypo(SessionReuseSuite):
    session_policy = "per-call"

    @pytest.fixture
    def make_client(self):
        return contract_clients.ReferenceClient
""",
        "-k",
        "sequential",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*session_policy = 'per-call': use 'reuse'*or 'per_call'*"])


def test_known_failures_run_as_strict_xfails_and_a_typo_is_refused(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
class TestKnown(SessionReuseSuite):
    known_failures = {
        "test_lost_session_is_reopened_once_and_the_call_retried": "never retries a call that met a 404",
        "test_sequential_calls_reuse_one_session_and_one_http_client": "fixed since: an XPASS fails",
    }

    @pytest.fixture
    def make_client(self):
        return contract_clients.NoRetryOn404Client


class TestTypo(SessionReuseSuite):
    known_failures = {"test_lost_sesion": "a typo"}

    @pytest.fixture
    def make_client(self):
        return contract_clients.ReferenceClient
""",
        "-k",
        "lost_session_is_reopened and (drop_session or restart) or sequential",
    )
    outcomes = result.parseoutcomes()
    assert outcomes["xfailed"] == 2, result.stdout.str()
    assert outcomes["failed"] == 1  # TestKnown's XPASS(strict)
    assert outcomes["errors"] == 3  # TestTypo's, at setup
    result.stdout.fnmatch_lines(["*TestTypo.known_failures names no scenario of the suite: 'test_lost_sesion'*"])
    result.stdout.fnmatch_lines(["*XPASS(strict)*fixed since: an XPASS fails*"])


def test_a_leak_in_a_suite_scenario_is_placed_at_the_users_subclass(pytester: pytest.Pytester) -> None:
    """The scenario's code is the plugin's: the warning names the subclass's line (issue 25 trial)."""
    result = run_suite(
        pytester,
        """
@pytest_asyncio.fixture(autouse=True)
async def _close_what_leaked():
    yield
    await contract_clients.close_leaked()


class TestLeaky(SessionReuseSuite):
    @pytest.fixture
    def make_client(self):
        return contract_clients.LeakedHTTPClientClient
""",
        "-k",
        "sequential",
        "-W",
        "default::pytest_fake_mcp.plugin.FakeMCPLeakWarning",
    )
    source = (pytester.path / "test_inner.py").read_text().splitlines()
    class_line = next(n for n, text in enumerate(source, 1) if text.startswith("class TestLeaky"))
    result.stdout.fnmatch_lines([f"*test_inner.py:{class_line}: FakeMCPLeakWarning*"])
    assert "contract.py:" not in result.stdout.str().split("warnings summary")[1]
