"""The contract suite: a test class any project subclasses to run the session-reuse battery on its own MCP client.

Each scenario is one test method named for the behaviour it checks, run against the ``fake_mcp_server``
and ``mcp_http_clients`` fixtures of this plugin. A failure says what was expected and what the fake
saw (the sequence diagram), then gives one hint. Every wait is bounded, so a client that hangs fails fast.

Only ``pytest`` and the standard library are imported here (and ``_shapes``, which is pure); the server
and the SDK are loaded by the fixtures when a scenario runs.

Over the 400-line soft cap on purpose: the scenarios must be methods of the one class users subclass
(knobs and fixtures are per subclass), and the helpers they share only make sense beside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from ._client._suite_forms import ClientForms, hidden_unless_skipped
from ._client._under_test import ClientOpener, ContractCaller, ContractClient, Opened, Subject, ThreadBlocked
from ._fake._shapes import SessionLossShape
from ._oracles._reuse import REOPEN_ONCE_HINT
from ._record._analysis import CROSSED_TASKS_HINT, crossed_tasks

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

    from ._fake._gate import Gate
    from ._faults import ScriptedFault
    from ._host._server import FakeMCPServer
    from ._record._counters import HTTPClientCounter
    from ._wire._options import FakeMCPOptions

__all__ = [
    "IS_ERROR_TOOL",
    "LOSS_404_SHAPES",
    "RPC_ERROR_TOOL",
    "STRICT_LOSS_SHAPES",
    "ClientOpener",
    "ContractCaller",
    "ContractClient",
    "SessionReuseSuite",
]


LOSS_404_SHAPES: tuple[SessionLossShape, ...] = tuple(
    s for s in SessionLossShape if s.session_unknown and s.status == 404
)
"""Every way real servers announce session loss with a 404 (docs/faults.md): handled like a plain drop."""
STRICT_LOSS_SHAPES: tuple[SessionLossShape, ...] = tuple(
    s for s in SessionLossShape if s.session_unknown and s.status != 404
)
"""Session loss announced without a 404 (400, 401, 410, 503, an SSE error): opt-in (``strict_session_loss``)."""
_LOSS_TRIGGERS: tuple[str | SessionLossShape, ...] = ("drop_session", "restart", *LOSS_404_SHAPES)

RPC_ERROR_TOOL = "contract_rpc_error"
"""A tool the suite serves that answers a JSON-RPC error (-32002 "Resource not found: contract://missing")."""
IS_ERROR_TOOL = "contract_is_error"
"""A tool the suite serves that answers a result marked ``isError: true``."""
_RPC_ERROR = (-32002, "Resource not found: contract://missing")
_POLL = 0.01


def _auth_scenario(scenario: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Mark an authorization scenario: its fake gets ``auth=True`` when the suite opts in (``auth = True``)."""
    scenario._contract_auth = True  # type: ignore[attr-defined]
    return scenario


def _trigger_id(trigger: str | SessionLossShape) -> str:
    return trigger if isinstance(trigger, str) else f"{trigger.status}-{trigger.name.lower()}"


def _describe_trigger(trigger: str | SessionLossShape) -> str:
    if isinstance(trigger, SessionLossShape):
        return f"the session was dropped and answered {trigger}"
    return f"{trigger}()"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    """How one call ended: a value, or the exception it raised."""

    value: Any = None
    error: BaseException | None = None

    @property
    def raised(self) -> bool:
        return self.error is not None

    def __str__(self) -> str:
        return f"raised {self.error!r}" if self.error is not None else f"returned {self.value!r:.160}"


class _Findings:
    """Failed checks of one scenario, in the order run (most serious first); raised as one failure."""

    def __init__(self) -> None:
        self.failures: list[AssertionError] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except AssertionError as failure:
            self.failures.append(failure)

    def raise_first(self) -> None:
        """Raise the first failure (its diagram and hint), naming the others after it."""
        __tracebackhide__ = True
        if not self.failures:
            return
        first, *others = self.failures
        if others:
            also = "\n".join(f"  - {str(other).splitlines()[0]}" for other in others)
            first.args = (f"{first}\nAlso failing (less serious, same exchanges):\n{also}",)
        raise first


class _ClientHangs(AssertionError):
    """A step of the client did not finish within ``call_timeout``."""


class _NotSetUp(AssertionError):
    """The scenario could not be set up, so it says nothing about the client (a skip, unless it is the client's
    fault: it never reached the fake)."""


class _SubjectScope:
    """``async with``: yields the subject, closes it, and turns what the client raised into the suite's report.

    A class rather than a generator so that no frame of the plugin shows in the failure's traceback.
    """

    def __init__(self, suite: SessionReuseSuite, subject: Subject, server: FakeMCPServer) -> None:
        self.suite, self.subject, self.server = suite, subject, server

    async def __aenter__(self) -> Subject:
        __tracebackhide__ = True
        suite, server = self.suite, self.server
        try:
            await self.subject.open(server.url, lambda step, what: suite._bounded(step, server, what))
        except (AssertionError, TypeError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:
            raise suite._client_raised(server, error) from None
        self.subject.opened_at_seq = _last_seq(server)
        return self.subject

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        __tracebackhide__ = True
        suite, subject, server = self.suite, self.subject, self.server
        if exc is None and not subject.closed:
            try:
                await suite._aclose(subject, server, "aclose() at the end of the scenario")
            except (AssertionError, KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:
                raise suite._client_raised(server, error) from None
            return False
        if exc is not None and not subject.closed:
            with contextlib.suppress(Exception):  # the scenario's failure is the one to report
                await suite._aclose(subject, server, "aclose() after the scenario failed")
        if exc is None or isinstance(
            exc, AssertionError | KeyboardInterrupt | SystemExit | GeneratorExit | pytest.skip.Exception
        ):
            return False
        raise suite._client_raised(server, exc) from None


@pytest.mark.asyncio
class SessionReuseSuite(ClientForms):
    """Subclass it to run the session-reuse contract on your MCP client; define ``make_client`` or ``open_client``.

    ``make_client`` returns a callable taking the fake's URL and returning your client, which must
    offer ``await client.call_tool(name, arguments)`` and ``await client.aclose()``. Each scenario
    makes its own client, drives it against a fresh ``fake_mcp_server`` and closes it (bounded).
    A framework's client that is opened and closed by ``async with`` (or ``with``, for one that runs in threads)
    is handed over by ``open_client`` instead: the suite enters and exits it on the scenario's own task
    (docs/contract.md#client-forms). Example::

        import pytest
        from pytest_fake_mcp.contract import SessionReuseSuite

        class TestOurClient(SessionReuseSuite):
            concurrency = 3              # knobs are class attributes
            call_timeout = 5.0

            @pytest.fixture
            def make_client(self):
                return lambda url: OurClient(url)

    The scenarios call the fake's ``echo`` tool (``tool_name``, ``tool_arguments``) and serve two
    tools of their own: ``contract_rpc_error`` (a JSON-RPC error) and ``contract_is_error`` (an
    ``isError`` result). Options of the fake apply as usual, e.g.
    ``@pytest.mark.fake_mcp_server(flavour="mcp1")`` on the subclass. Needs pytest-asyncio.

    Session loss announced otherwise than by a 404 is opt-in: set ``strict_session_loss = True``. A client that
    opens a session per call by design declares it, ``session_policy = "per_call"``: the scenarios that need a
    session to outlive a call then skip, saying why, and the others expect one session per call.

    A scenario that could not be set up (the loss it scripted dropped no session, its concurrent calls never
    overlapped at the fake) skips with the reason instead of judging the client.

    The session scenarios run against a fake serving the handshake era (unless a marker sets ``era``), so a
    client that negotiates the era (mcp 2.x ``Client()``) meets sessions. Set ``eras = ("handshake", "modern")``
    to run the era-neutral scenarios (reuse, errors that are not loss, overlap) once per era as well
    (docs/eras.md).

    The authorization scenarios (an expired token met by concurrent calls, a 404 with auth on, a 403 step-up) are
    opt-in: set ``auth = True`` and give a client that logs in (docs/contract.md#authorization); otherwise they skip,
    naming the switch.
    """

    tool_name: ClassVar[str] = "echo"
    """The tool every scenario calls; the fake serves ``echo(text)`` unless ``echo_tool=False``."""
    tool_arguments: ClassVar[Mapping[str, Any]] = {"text": "contract"}
    sequential_calls: ClassVar[int] = 3
    """Calls made one after another in the reuse scenario."""
    concurrency: ClassVar[int] = 5
    """Calls made at once in the concurrency scenarios."""
    call_timeout: ClassVar[float] = 10.0
    """Seconds any one awaited step may take (a call, ``aclose()``, a batch of concurrent calls)."""
    overlap_timeout: ClassVar[float] = 5.0
    """Seconds to wait for ``concurrency`` calls to be at the fake together before letting them go."""
    max_reinitializes: ClassVar[int] = 3
    """New sessions a client may open for one call while every session is answered 404."""
    strict_session_loss: ClassVar[bool] = False
    """Also require a new session when loss is announced by a 400 ``-32000``, 401, 410, 503 or an SSE
    error event. The spec announces session loss with 404, so these are off by default."""
    strict_stale_delete: ClassVar[bool] = False
    """Also fail the one DELETE the SDK's default transport (``terminate_on_close=True``) sends for a session
    that already answered 404. The spec allows it and it harms nothing, so it is off by default; turn it
    on if nothing at all may reach a dead session (docs/failure-modes.md#harmless-delete)."""

    client_timeout: ClassVar[float | None] = None
    """The client's own bound on one call, in seconds, if it has one below ``call_timeout``: runs the scenario of a
    tool slower than that bound (None: it skips)."""

    auth: ClassVar[bool] = False
    """Run the authorization scenarios (docs/contract.md#authorization): each gets a fake with ``auth=True``, and
    ``make_client``/``open_client`` must give a client whose HTTP client logs in to it (e.g. with
    ``HeadlessOAuth().provider(url)`` as its ``auth=``). Off: those scenarios skip, naming this switch; the others
    always run without auth."""

    _current: Subject | None = None  # the scenario's client under test, for the report of a step past its bound

    eras: ClassVar[tuple[str, ...]] = ()
    """Eras the fake serves in the era-neutral scenarios, one run each (e.g. ``("handshake", "modern")``); empty:
    those scenarios run once, like the others."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each era-neutral scenario (those taking ``contract_era``) once per era of :attr:`eras`."""
        # The scenario's own parameters, not fixtures it reaches (a make_client may ask for the era too); by its
        # signature, so a subclass's wrapper (functools.wraps) keeps them.
        own = inspect.signature(metafunc.function).parameters
        if "contract_era" in own and self.eras:
            metafunc.parametrize("contract_era", list(self.eras), ids=[f"era-{era}" for era in self.eras])

    @pytest.fixture
    def contract_era(self) -> str | None:
        """The era an era-neutral scenario runs in (None: the fake's ``era`` option, else the handshake)."""
        return None

    @pytest.fixture
    def fake_mcp_options(self, fake_mcp_options: FakeMCPOptions, request: pytest.FixtureRequest) -> FakeMCPOptions:
        """The fake's options with the scenario's era: its ``contract_era``, a marker's ``era``, else the handshake."""
        if self.auth and getattr(request.function, "_contract_auth", False):
            fake_mcp_options = fake_mcp_options.merged(auth=True)  # an auth scenario, opted in: docs/authorization.md
        era = request.getfixturevalue("contract_era") if "contract_era" in request.fixturenames else None
        if era is None and any("era" in m.kwargs for m in request.node.iter_markers("fake_mcp_server")):
            return fake_mcp_options
        return fake_mcp_options.merged(era=era or "handshake")

    # --- reuse --------------------------------------------------------------------------------------

    async def test_sequential_calls_reuse_one_session_and_one_http_client(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
        contract_era: str | None,
    ) -> None:
        """Calls one after another share one session and one HTTP client (docs/failure-modes.md#c01, #h01);
        in the 2026-07-28 era, one HTTP client, one ``server/discover`` and no session id (docs/eras.md)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            for i in range(self.sequential_calls):
                await self._call_ok(subject, server, f"call {i + 1} of {self.sequential_calls}")
            if self._per_call() and not _went_modern(server):
                # By design a session per call: exactly one each, and each closed before the next.
                self._assert_set_up_once(server, subject, calls=self.sequential_calls)
                server.assert_tool_ran(self.tool_name, times=self.sequential_calls)
                return
            mcp_http_clients.assert_created(1, talked_to=server.url)
            self._assert_set_up_once(server, subject)
            if not _went_modern(server):
                server.assert_session_reused()
            server.assert_tool_ran(self.tool_name, times=self.sequential_calls)

    # --- session loss -------------------------------------------------------------------------------

    @pytest.mark.parametrize("trigger", _LOSS_TRIGGERS, ids=_trigger_id)
    async def test_lost_session_is_reopened_once_and_the_call_retried(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
        trigger: str | SessionLossShape,
    ) -> None:
        """A session the server lost (``drop_session()``, ``restart()``, or a drop answered with any 404
        real servers send) is replaced by one new session on the same HTTP client and the call that met
        the loss is retried once; the new ``initialize`` carries no session id and the old id is never
        sent again (docs/failure-modes.md#r01 to #r03). If the call that met the loss raised, the next call is made
        too, and the failure says whether it recovered."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_if_per_call("no session outlives a call, so there is none for the server to lose between calls")
        await self._check_loss_recovered(make_client, fake_mcp_server, mcp_http_clients, trigger)

    @pytest.mark.parametrize("shape", STRICT_LOSS_SHAPES, ids=_trigger_id)
    async def test_strict_non_404_session_loss_reopens_the_session(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
        shape: SessionLossShape,
    ) -> None:
        """Opt-in (``strict_session_loss = True``): session loss announced by a 400 ``-32000``, 401, 410,
        503 or an SSE error event is handled like a 404 (docs/failure-modes.md#r10)."""
        __tracebackhide__ = hidden_unless_skipped
        if not self.strict_session_loss:
            pytest.skip(
                f"strict session-loss shapes are off (the spec announces session loss with 404): set "
                f"strict_session_loss = True on {type(self).__name__} to require recovery from {shape}"
            )
        self._skip_if_per_call("no session outlives a call, so there is none for the server to lose between calls")
        await self._check_loss_recovered(make_client, fake_mcp_server, mcp_http_clients, shape)

    async def test_persistent_session_loss_fails_clearly_within_a_bound(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """When every session is answered 404, the call raises within ``call_timeout`` after at most
        ``max_reinitializes`` new sessions, rather than looping or hanging (docs/failure-modes.md#r04, #r05). A client
        that never reopens a session skips: its bound was not exercised."""
        __tracebackhide__ = hidden_unless_skipped
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            mark = _last_seq(server)
            # Hold the first initialize past the bound: a client that loops is caught at once.
            gate = server.gate("past max_reinitializes")
            beyond = (
                server.on("initialize", has_session=False)
                .after(self.max_reinitializes)
                .delay(until=gate)
                .always()
                .optional()
            )
            try:
                with server.sessions_expired():
                    outcome = await self._call_unless(
                        subject, server, "a call while every session answers 404", lambda: beyond.fired > 0
                    )
            finally:
                gate.open()
            opened = _new_sessions_since(server, mark)
            if outcome.raised and not opened:
                self._not_set_up(
                    server,
                    "the client opened no new session while every session answered 404 (it raised at once), so its "
                    "bound on reopening was never exercised: a pass would prove only that it raised "
                    "(test_lost_session_is_reopened_once_and_the_call_retried reports the missing recovery)",
                )
            if len(opened) > self.max_reinitializes:
                self._fail(
                    server,
                    f"{len(opened)} initialize requests (new sessions) while every session answered 404, "
                    f"expected at most {self.max_reinitializes}.",
                    f"bound the retries: give up after {self.max_reinitializes} lost sessions in one call "
                    "(docs/failure-modes.md#r04)",
                    marks=dict.fromkeys(opened, "new session during the outage"),
                )
            if not outcome.raised:
                self._fail(
                    server,
                    f"A call while every session answered 404 {outcome}; expected it to raise.",
                    "surface a persistent session loss to the caller as an error (docs/failure-modes.md#r05)",
                )

    # --- concurrency --------------------------------------------------------------------------------

    async def test_concurrent_first_calls_share_one_initialize(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """``concurrency`` calls made at once on a new client open one session between them: the first
        ``initialize`` is held until every call has started, so the overlap is certain (docs/failure-modes.md#c02).
        Their ``tools/call`` requests are held until all are at the fake, too: if they never are (the client or its
        adapter serialises calls), one ``initialize`` proves nothing and the scenario skips, saying so."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_if_per_call("each call opens its own session by design, so concurrent first calls open one each")
        server = fake_mcp_server
        what = f"{self.concurrency} concurrent first calls"
        async with self._subject(make_client, server) as subject:
            if self._opened_on_entry(subject, server):
                self._not_set_up(
                    server,
                    "entering open_client's context opened the session before any call, so concurrent first calls "
                    "cannot race its opening",
                )
            gate = server.gate("first initialize")
            held = server.on("initialize").delay(until=gate)
            calls_gate = server.gate("first calls")
            calls_held = server.on("tools/call", tool=self.tool_name).delay(until=calls_gate).always().optional()
            calls = [asyncio.ensure_future(self._call_raw(subject)) for _ in range(self.concurrency)]
            try:
                await self._bounded(held.wait_fired(timeout=self.call_timeout), server, "the first initialize")
            finally:
                gate.open()
            together = await self._release_when_overlapping(calls_held, calls_gate)
            self._expect_no_errors(server, await self._gather(calls, server, what), what)
            if together < self.concurrency and server.figures.initialize_count == 1:
                self._not_set_up(
                    server,
                    f"only {together} of {what} were at the fake together: the calls were serialised (by the "
                    "client or its adapter), so one initialize proves nothing about concurrent first calls "
                    "(test_concurrent_calls_overlap_on_the_server reports the serialisation)",
                )
            server.assert_initialize_count(1)
            server.assert_tool_ran(self.tool_name, times=self.concurrency)

    async def test_concurrent_calls_meeting_a_404_reopen_one_session(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """``concurrency`` calls that all meet the 404 of a dropped session open one new session between
        them, not one each: they are held until all are at the fake, then all meet the 404 (docs/failure-modes.md#r08).
        Whether each call is retried is the loss scenario's business; here they may raise."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_if_per_call("no session outlives a call, so concurrent calls never share a lost one")
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            gate = server.gate("concurrent calls")
            held = server.on("tools/call", tool=self.tool_name).delay(until=gate).always().optional()
            if not server.drop_session():
                gate.open()
                self._not_set_up(
                    server,
                    "after the first call the client held no live session to drop, so no call met a 404 (a client "
                    'that opens a session per call by design declares session_policy = "per_call")',
                )
            mark = _last_seq(server)
            calls = [asyncio.ensure_future(self._call_raw(subject)) for _ in range(self.concurrency)]
            together = await self._release_when_overlapping(held, gate)
            await self._gather(calls, server, f"{self.concurrency} concurrent calls after the drop")
            opened = _new_sessions_since(server, mark)
            if len(opened) > 1:
                self._fail(
                    server,
                    f"{len(opened)} initialize requests (new sessions) after {self.concurrency} concurrent calls "
                    "met the 404 of one lost session, expected 1.",
                    REOPEN_ONCE_HINT,
                    marks=dict.fromkeys(opened, "new session"),
                )
            if together < self.concurrency:
                self._not_set_up(
                    server,
                    f"only {together} of {self.concurrency} calls were at the fake together when the session was "
                    "gone: the calls were serialised (by the client or its adapter), so they never met the 404 "
                    "together (test_concurrent_calls_overlap_on_the_server reports the serialisation)",
                )
            if not opened:
                self._not_set_up(
                    server,
                    f"none of the {self.concurrency} calls that met the 404 opened a new session, so there was no "
                    "opening to share: a pass would prove nothing (test_lost_session_is_reopened_once_and_the_call_"
                    "retried reports the recovery)",
                )

    async def test_concurrent_calls_overlap_on_the_server(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        contract_era: str | None,
    ) -> None:
        """``concurrency`` calls made at once are in flight at the fake together: nothing serialises them,
        such as a lock held across the call (docs/failure-modes.md#c03)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        what = f"{self.concurrency} concurrent calls"
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            gate = server.gate("concurrent calls")
            held = server.on("tools/call", tool=self.tool_name).delay(until=gate).always().optional()
            calls = [asyncio.ensure_future(self._call_raw(subject)) for _ in range(self.concurrency)]
            await self._release_when_overlapping(held, gate)
            outcomes = await self._gather(calls, server, what)
            server.assert_concurrent(min_in_flight=self.concurrency)  # serialised calls first: they explain the rest
            self._expect_no_errors(server, outcomes, what)

    # --- errors that are not session loss -------------------------------------------------------------

    async def test_tool_jsonrpc_error_is_not_session_loss(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        contract_era: str | None,
    ) -> None:
        """A tool answering a JSON-RPC error (-32002 "Resource not found") is the tool's answer: no new
        session, no retry, the tool ran once (docs/failure-modes.md#r09)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        server.add_tool(RPC_ERROR_TOOL, _raise_rpc_error)
        async with self._subject(make_client, server) as subject:
            await self._call(subject, server, f"a call of {RPC_ERROR_TOOL}", tool=RPC_ERROR_TOOL, arguments={})
            self._assert_set_up_once(server, subject)
            server.assert_tool_ran(RPC_ERROR_TOOL, times=1)

    async def test_tool_is_error_result_is_not_session_loss(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        contract_era: str | None,
    ) -> None:
        """A tool result marked ``isError`` is the tool's answer: no new session, no retry, the tool ran once."""
        __tracebackhide__ = True
        server = fake_mcp_server
        server.add_tool(IS_ERROR_TOOL, _raise_tool_error)
        async with self._subject(make_client, server) as subject:
            await self._call(subject, server, f"a call of {IS_ERROR_TOOL}", tool=IS_ERROR_TOOL, arguments={})
            self._assert_set_up_once(server, subject)
            server.assert_tool_ran(IS_ERROR_TOOL, times=1)

    async def test_server_error_5xx_is_surfaced_without_reinitializing(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        contract_era: str | None,
    ) -> None:
        """A 500 answering ``tools/call`` reaches the caller as an error: not retried, no new session
        (docs/failure-modes.md#r10, #r12, #h03)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        server.on("tools/call", tool=self.tool_name).respond(500)
        async with self._subject(make_client, server) as subject:
            outcome = await self._call(subject, server, "a call answered 500")
            if not outcome.raised:
                self._fail(
                    server,
                    f"A call answered 500 {outcome}; expected it to raise.",
                    "a 5xx is not a session loss: surface it to the caller; a retry may run the tool twice "
                    "(docs/failure-modes.md#r12)",
                )
            self._assert_set_up_once(server, subject)

    async def test_sse_cut_after_the_tool_ran_is_not_silently_rerun(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """An SSE response cut (clean EOF) after the tool ran, so the client never hears the result, ends
        the call within ``call_timeout`` without running the tool again; raising is fine. An mcp 1.x client
        waits for ever here unless it sets a read timeout (docs/failure-modes.md#r12, #h03)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        server.on("tools/call", tool=self.tool_name).cut_stream(after_call=True)
        async with self._subject(make_client, server) as subject:
            await self._call(subject, server, "a call whose SSE stream is cut after the tool ran")
            server.assert_tool_ran(self.tool_name, times=1)

    async def test_invalid_request_400_is_not_session_loss(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        contract_era: str | None,
    ) -> None:
        """The control: a 400 ``-32600 "Invalid Request"`` (a bad request, not a lost session) never makes
        a new session (docs/failure-modes.md#r09, #r10)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        server.on("tools/call", tool=self.tool_name).respond(SessionLossShape.INVALID_REQUEST)
        async with self._subject(make_client, server) as subject:
            await self._call(subject, server, "a call answered 400 -32600 Invalid Request")
            self._assert_set_up_once(server, subject)

    # --- closing ------------------------------------------------------------------------------------

    async def test_aclose_deletes_every_session_closes_every_http_client_and_leaves_no_task(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
    ) -> None:
        """``aclose()`` sends DELETE for its session, closes the HTTP clients it made and leaves no task
        running (docs/failure-modes.md#t08, #c09, #h04)."""
        __tracebackhide__ = True
        server = fake_mcp_server
        before = _other_tasks()
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            await self._call_ok(subject, server, "the second call")
            await self._aclose(subject, server, "aclose()")
            server.assert_all_sessions_closed()
            mcp_http_clients.assert_all_closed()
            left = _other_tasks() - before
            if left:
                self._fail(
                    server,
                    f"{len(left)} task(s) still running after aclose() returned.",
                    "cancel and await every task the client started (GET listeners, keep-alives, retries) "
                    "before aclose() returns",
                    facts=[f"{task.get_name()}: {task.get_coro()!r:.120}" for task in left],
                )

    async def test_aclose_during_the_first_initialize_leaves_no_session_open(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """``aclose()`` called while the first ``initialize`` is in flight leaves no session open on the
        server: the handshake is let finish (bounded) and the session DELETEd, not abandoned
        (docs/failure-modes.md#t06). A client whose context opened its session on entry skips: no call is in its
        first ``initialize`` when it is closed."""
        __tracebackhide__ = hidden_unless_skipped
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            if self._opened_on_entry(subject, server):
                self._not_set_up(
                    server,
                    "entering open_client's context opened the session before any call, so no call's first "
                    "initialize is in flight when the client is closed",
                )
            gate = server.gate("first initialize")
            held = server.on("initialize").delay(until=gate)
            call = asyncio.ensure_future(self._call_raw(subject))
            try:
                await self._bounded(held.wait_fired(timeout=self.call_timeout), server, "the first initialize")
            except BaseException:
                gate.open()
                await self._gather([call], server, "the first call")
                raise
            what = "aclose() while the first initialize was in flight"
            if subject.in_context:
                # Left on this task, the one that entered it; the gate opens once the exit has begun.
                asyncio.get_running_loop().call_soon(gate.open)
                await self._aclose(subject, server, what)
            else:
                closing = asyncio.ensure_future(self._aclose(subject, server, what))
                await asyncio.sleep(0)  # one loop turn: aclose() has begun before the initialize is answered
                gate.open()
                await closing
            await self._gather([call], server, "the call whose initialize was in flight at aclose()")
            await self._settle(server)
            try:
                server.assert_all_sessions_closed()
            except AssertionError as failure:
                # The oracle's hint is about closing in general (T08); this one is the handshake in flight (T06).
                from ._record._report import mark_shown

                text = str(failure).rsplit("\nHint: ", 1)[0]
                t06 = AssertionError(
                    f"{text}\nHint: closing while the first initialize is in flight must let that handshake finish "
                    "(bounded) and DELETE the session it opens, not abandon it (docs/failure-modes.md#t06)"
                )
                raise mark_shown(t06, server.url) from None

    # --- a slow tool and a cancelled caller -------------------------------------------------------------

    async def test_a_call_slower_than_the_clients_own_timeout_leaves_it_usable(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
    ) -> None:
        """A tool slower than the client's own bound (``client_timeout``): that call raises by the client's bound,
        the next call works, the session is still live or was cleanly replaced (no dead id sent), and the slow call
        left no second session or HTTP client open beside the one in use. The slow answer is held until the call
        gave up, so the scenario waits on events, not on the clock."""
        __tracebackhide__ = hidden_unless_skipped
        if self.client_timeout is None:
            pytest.skip(
                f"set client_timeout on {type(self).__name__} to the client's own bound on a call (seconds, below "
                f"call_timeout={self.call_timeout:g}) to run it"
            )
        if self.client_timeout >= self.call_timeout:
            raise ValueError(
                f"{type(self).__name__}.client_timeout={self.client_timeout:g} must be below "
                f"call_timeout={self.call_timeout:g}: the suite's bound must outlast the client's own"
            )
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            before = _open_clients(mcp_http_clients, server)
            gate = server.gate("the slow tool")
            held = server.on("tools/call", tool=self.tool_name).delay(until=gate)
            try:
                outcome = await self._call(
                    subject, server, f"a call slower than client_timeout={self.client_timeout:g}s"
                )
            finally:
                gate.open()  # the late answer goes to a call the client gave up on
            if held.fired and not outcome.raised:
                self._fail(
                    server,
                    f"A call held past client_timeout={self.client_timeout:g}s {outcome}; expected the client's own "
                    "bound to end it.",
                    "set client_timeout to the bound the client really applies to one call",
                )
            await self._call_ok(subject, server, "the next call")
            await self._settle(server)
            server.assert_no_stale_session_ids(strict=self.strict_stale_delete)
            self._assert_nothing_left_beside(server, mcp_http_clients, before, "the slow call")

    async def test_a_caller_cancelled_mid_call_leaves_the_client_usable(
        self,
        make_client: Callable[[str], ContractClient],
        fake_mcp_server: FakeMCPServer,
        mcp_http_clients: HTTPClientCounter,
    ) -> None:
        """A caller cancelled while its call is at the fake (``asyncio.wait_for``, a task group's cancel): the next
        call works, no dead session id is sent, and the cancelled call left no second session or HTTP client open
        beside the one in use (docs/failure-modes.md#t06); whether it kept its session is the reuse scenario's to
        say, and closing is the closing scenarios'."""
        __tracebackhide__ = hidden_unless_skipped
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            before = _open_clients(mcp_http_clients, server)
            if subject.threaded:
                self._not_set_up(
                    server, "the client's call_tool is sync: a call running in a thread cannot be cancelled"
                )
            gate = server.gate("the call to cancel")
            held = server.on("tools/call", tool=self.tool_name).delay(until=gate)
            call = asyncio.ensure_future(self._call_raw(subject))
            try:
                await self._bounded(held.wait_fired(timeout=self.call_timeout), server, "the call to cancel")
                call.cancel()
                await self._gather([call], server, "the cancelled call")
            finally:
                gate.open()
            await self._call_ok(subject, server, "the call after the cancelled one")
            await self._settle(server)
            server.assert_no_stale_session_ids(strict=self.strict_stale_delete)
            self._assert_nothing_left_beside(server, mcp_http_clients, before, "the cancelled call")

    # --- authorization (opt-in: auth = True) ---------------------------------------------------------------

    @_auth_scenario
    async def test_concurrent_calls_meeting_an_expired_token_renew_it_once(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """Once the client logged in, every token expires; ``concurrency`` calls at once meet the 401: the token is
        renewed once (single flight), no refused token is sent again, the client does not register again, the
        session is kept (a 401 is not session loss), and every call is answered (docs/authorization.md)."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_unless_auth()
        server = fake_mcp_server
        what = f"{self.concurrency} concurrent calls meeting the expired token"
        async with self._subject(make_client, server) as subject:
            await self._first_call_logged_in(subject, server)
            server.expire_tokens()
            mark = _last_seq(server)
            calls = [asyncio.ensure_future(self._call_raw(subject)) for _ in range(self.concurrency)]
            outcomes = await self._gather(calls, server, what)
            await self._settle(server)
            if not any(e.seq > mark and e.status == 401 for e in server.journal.exchanges):
                self._not_set_up(server, "no request met the 401 of the expired token, so there was nothing to renew")
            findings = _Findings()
            for check in (
                server.assert_single_flight_refresh,
                server.assert_no_refused_token_reused,
                server.assert_no_reregistration,
                server.assert_session_kept_across_auth,
            ):
                with findings.check():
                    check()
            with findings.check():
                self._expect_no_errors(server, outcomes, what)
            findings.raise_first()

    @_auth_scenario
    async def test_session_loss_with_auth_on_opens_a_session_and_renews_no_token(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """Once the client logged in, its session is dropped: the call meets a 404, which is about the session, not
        the token: no request to ``/register``, ``/authorize`` or ``/token`` before the new session. A client that
        opens no new session at all skips (test_lost_session_is_reopened_once_and_the_call_retried reports that)."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_unless_auth()
        self._skip_if_per_call("no session outlives a call, so there is none for the server to lose between calls")
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._first_call_logged_in(subject, server)
            if not server.drop_session():
                self._not_set_up(server, "after the first call the client held no live session to drop")
            mark = _last_seq(server)
            outcome = await self._call(subject, server, "the call after the session was dropped")
            if outcome.raised:
                await self._call(subject, server, "the next call")
            await self._settle(server)
            server.assert_session_kept_across_auth()
            if not _new_sessions_since(server, mark):
                self._not_set_up(
                    server,
                    "the client opened no new session after the 404, so there was no reopening to judge "
                    "(test_lost_session_is_reopened_once_and_the_call_retried reports the missing recovery)",
                )

    @_auth_scenario
    async def test_insufficient_scope_403_steps_up_in_the_same_session(
        self, make_client: Callable[[str], ContractClient], fake_mcp_server: FakeMCPServer
    ) -> None:
        """Once the client logged in, a call is answered 403 ``insufficient_scope`` (scope ``admin`` required from
        then on): a client that steps up (a new authorization asking for it) keeps its session, registers no second
        time and its retried call is answered. A client that does not step up skips: stepping up is what the spec
        advises, not what it requires."""
        __tracebackhide__ = hidden_unless_skipped
        self._skip_unless_auth()
        server = fake_mcp_server
        async with self._subject(make_client, server) as subject:
            await self._first_call_logged_in(subject, server)
            server.on("tools/call", tool=self.tool_name).insufficient_scope("admin")
            mark = _last_seq(server)
            outcome = await self._call(subject, server, "a call answered 403 insufficient_scope")
            await self._settle(server)
            stepped_up = any(e.seq > mark and e.path == "/authorize" for e in server.journal.exchanges)
            findings = _Findings()
            with findings.check():
                server.assert_session_kept_across_auth()
            with findings.check():
                server.assert_no_reregistration()
            if stepped_up and outcome.raised:
                with findings.check():
                    self._fail(
                        server,
                        f"The call answered 403 insufficient_scope {outcome} after the client stepped up; expected "
                        "it to be retried and answered.",
                        "after the new authorization, send the call again with the new token (docs/authorization.md)",
                    )
            findings.raise_first()
            if not stepped_up:
                self._not_set_up(
                    server,
                    f"the client did not step up after the 403 insufficient_scope (no new authorization; the call "
                    f"{outcome}), so there was no step-up to judge",
                )

    async def _first_call_logged_in(self, subject: Subject, server: FakeMCPServer) -> None:
        """The first call, answered; a client that never asked for a token fails saying how to give it one."""
        __tracebackhide__ = True
        outcome = await self._call(subject, server, "the first call (the client logs in)")
        if not outcome.raised:
            return
        if not any(e.path == "/token" for e in server.journal.exchanges):
            self._fail(
                server,
                f"The first call {outcome}: the client never asked the fake's authorization server for a token "
                f"(auth = True on {type(self).__name__}).",
                "make_client/open_client must give a client whose HTTP client logs in, e.g. "
                "httpx.AsyncClient(auth=HeadlessOAuth().provider(url)) (httpx2 under mcp 2.x) "
                "(docs/contract.md#authorization)",
            )
        self._fail(
            server,
            f"The first call (the client logs in) {outcome}; expected a result.",
            "the client asked for a token but the call still failed; see the exchanges above",
        )

    def _skip_unless_auth(self) -> None:
        __tracebackhide__ = hidden_unless_skipped
        if not self.auth:
            pytest.skip(
                f"authorization scenarios are off: set auth = True on {type(self).__name__} and give it a client "
                "that logs in (e.g. its HTTP client's auth=HeadlessOAuth().provider(url)) to run them "
                "(docs/contract.md#authorization)"
            )

    # --- the checks two scenarios share -----------------------------------------------------------------

    async def _check_loss_recovered(
        self,
        make_client: Callable[[str], ContractClient],
        server: FakeMCPServer,
        http_clients: HTTPClientCounter,
        trigger: str | SessionLossShape,
    ) -> None:
        __tracebackhide__ = True
        async with self._subject(make_client, server) as subject:
            await self._call_ok(subject, server, "the first call")
            after_first = http_clients.count
            await self._call_ok(subject, server, "the second call")
            after_second = http_clients.count
            initializes = len(server.get_requests(method="initialize"))
            live = server.figures.live_sessions
            if isinstance(trigger, SessionLossShape):
                lost = len(server.drop_session(shape=trigger))
            elif trigger == "restart":
                server.restart()
                lost = live
            else:
                lost = len(server.drop_session())
            if not lost:
                self._not_set_up(
                    server,
                    f"after two calls the client held no live session for {_describe_trigger(trigger)} to end, so "
                    "nothing was lost (a client that opens a session per call by design declares "
                    'session_policy = "per_call")',
                )
            outcome = await self._call(subject, server, f"the call after {_describe_trigger(trigger)}")
            if outcome.raised:
                mark = _last_seq(server)
                following = await self._call(subject, server, "the next call")
                reopened = bool(_new_sessions_since(server, mark))
                if following.raised:
                    verdict = f"the next call also {following}: the client did not recover"
                    hint = (
                        "on a lost session open a new one (new transport, no session id) and retry the call once "
                        "(docs/failure-modes.md#r01; the SDK clients never do this by themselves)"
                    )
                else:
                    verdict = "the next call succeeded" + (" on a new session" if reopened else "")
                    hint = (
                        "the client recovers, but only for the next call: retry the call that met the loss once, on "
                        "the new session (docs/failure-modes.md#r01)"
                    )
                self._fail(
                    server,
                    f"The call after {_describe_trigger(trigger)} {outcome}; expected it to succeed on a new session. "
                    f"Then {verdict}.",
                    hint,
                )
            # The most telling finding first: counts of sessions and HTTP clients before hygiene, so a
            # lesser finding never hides a real bug; every finding is reported.
            findings = _Findings()
            with findings.check():
                server.assert_initialize_count(initializes + 1)
            # Compared with a healthy call, so a client that builds an HTTP client per call fails only
            # the reuse scenario, and one that rebuilds it for a new session fails here.
            healthy, recovering = after_second - after_first, http_clients.count - after_second
            if recovering > healthy:
                with findings.check():
                    self._fail(
                        server,
                        f"{recovering} HTTP client(s) built while recovering from the lost session (a healthy "
                        f"call built {healthy}): the HTTP client was rebuilt for the new session.",
                        "keep the HTTP client and pass it to the new transport "
                        "(streamable_http_client(url, http_client=...)); docs/failure-modes.md#h01",
                        facts=[str(record) for record in http_clients.created],
                    )
            with findings.check():
                server.assert_tool_ran(self.tool_name, times=3)
            with findings.check():
                server.assert_no_stale_session_ids(strict=self.strict_stale_delete)
            findings.raise_first()

    # --- helpers --------------------------------------------------------------------------------------

    def _assert_nothing_left_beside(
        self, server: FakeMCPServer, http_clients: HTTPClientCounter, before: int, what: str
    ) -> None:
        """After ``what``, at most one live session (the one in use), and no more open HTTP clients than before."""
        __tracebackhide__ = True
        figures = server.figures
        if not _went_modern(server) and figures.live_sessions > 1:
            self._fail(
                server,
                f"{figures.live_sessions} sessions live after {what} and the call that followed: the client opened "
                "a new session and left the old one open.",
                "when the client replaces its session, DELETE the old one (or keep using it: a call that timed out or "
                "was cancelled does not end a session)",
            )
        now = _open_clients(http_clients, server)
        if now > before:
            self._fail(
                server,
                f"{now} HTTP clients open after {what} and the call that followed, {before} before: {what} left one "
                "open.",
                "close the HTTP client of a transport the client gave up on, or keep using the one it has",
                facts=[str(record) for record in http_clients.created],
            )

    def _assert_set_up_once(self, server: FakeMCPServer, subject: Subject, *, calls: int = 1) -> None:
        """One ``initialize`` (handshake era), or one ``server/discover`` and no session id (modern era); with
        ``session_policy = "per_call"``, one new session per call since the client was opened, each closed."""
        __tracebackhide__ = True
        if self._per_call() and not _went_modern(server):
            opened = _new_sessions_since(server, subject.opened_at_seq)
            if len(opened) != calls:
                self._fail(
                    server,
                    f"{len(opened)} sessions opened for {calls} call(s) once the client was open, expected {calls} "
                    '(session_policy = "per_call": one per call).',
                    "a per-call client opens exactly one session for each call (a retry opens another: is the call "
                    "retried?)",
                    marks=dict.fromkeys(opened, "new session"),
                )
            server.assert_all_sessions_closed()
            return
        if _went_modern(server):
            server.assert_discover_once()
            server.assert_no_session_ids()
        else:
            server.assert_initialize_count(1)

    def _subject(self, make_client: Callable[[str], ContractClient], server: FakeMCPServer) -> _SubjectScope:
        """The client under test, closed (bounded) at the end unless the scenario closed it.

        Whatever the client raises out of the scenario (a cancellation, a cancel scope exited in another
        task) becomes the scenario's own failure, with the diagram, the client's exception summarised in it.
        """
        if isinstance(make_client, Opened):
            self._current = Subject(opener=make_client.opener, timeout=self.call_timeout)
            return _SubjectScope(self, self._current, server)
        client = make_client(server.url)
        missing = [name for name in ("call_tool", "aclose") if not callable(getattr(client, name, None))]
        if missing:
            raise TypeError(
                f"make_client returned {client!r}, which has no {' and no '.join(f'{m}()' for m in missing)}: the "
                "suite calls `await client.call_tool(name, arguments)` and `await client.aclose()`. Give your client "
                "those two methods, or return a small adapter from make_client (e.g. one whose aclose() calls your "
                "client's close()); a client opened and closed by `async with` goes to open_client instead "
                "(docs/contract.md#client-forms)."
            )
        self._current = Subject(client=client, timeout=self.call_timeout)
        return _SubjectScope(self, self._current, server)

    def _not_set_up(self, server: FakeMCPServer, why: str) -> None:
        """The scenario could not be set up: skip with what happened, never a verdict on the client."""
        __tracebackhide__ = hidden_unless_skipped
        pytest.skip(f"the scenario could not be set up: {why} (the exchanges: {len(server.journal.exchanges)})")

    def _opened_on_entry(self, subject: Subject, server: FakeMCPServer) -> bool:
        """Whether entering ``open_client``'s context already opened the session (or probed the era)."""
        return subject.in_context and any(
            e.rpc_method in ("initialize", "server/discover") for e in server.journal.exchanges
        )

    def _client_raised(self, server: FakeMCPServer, exc: BaseException) -> AssertionError:
        """The scenario's failure for an exception the client let escape; the exception is kept on it."""
        task = asyncio.current_task()
        while task is not None and task.cancelling():
            task.uncancel()  # a stray cancellation must not also cancel the report
        leaves = _leaves(exc)
        if crossed_tasks(exc):
            hint = CROSSED_TASKS_HINT
        elif isinstance(exc, asyncio.CancelledError) or any(
            isinstance(leaf, asyncio.CancelledError) for leaf in leaves
        ):
            hint = (
                "the call was cancelled inside the client, not by the suite: a task group of the client (its "
                "transport's) was cancelled, typically by an error in one of its background tasks; surface that error "
                f"to the caller instead (if the client is exited from another task: {CROSSED_TASKS_HINT})"
            )
        else:
            hint = "the client raised out of the scenario; its exception is summarised above"
        failure = self._failure(
            server,
            f"The client raised {type(exc).__name__} out of the scenario: {_one_line(exc)}",
            hint,
            facts=[line for leaf in leaves for line in _summary(leaf)],
        )
        failure.client_error = exc  # type: ignore[attr-defined]
        return failure

    async def _aclose(self, subject: Subject, server: FakeMCPServer, what: str) -> None:
        __tracebackhide__ = True
        await self._bounded(subject.aclose(), server, what)

    async def _call_raw(
        self, subject: Subject, tool: str | None = None, arguments: Mapping[str, Any] | None = None
    ) -> Any:
        name = self.tool_name if tool is None else tool
        return await subject.call(name, dict(self.tool_arguments if arguments is None else arguments))

    async def _call(
        self,
        subject: Subject,
        server: FakeMCPServer,
        what: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> _Outcome:
        """One bounded call: raising is an outcome, hanging a failure."""
        __tracebackhide__ = True
        try:
            value = await self._bounded(self._call_raw(subject, tool, arguments), server, what)
        except _ClientHangs:
            raise
        except Exception as exc:
            return _Outcome(error=exc)
        return _Outcome(value=value)

    async def _call_ok(self, subject: Subject, server: FakeMCPServer, what: str) -> Any:
        __tracebackhide__ = True
        outcome = await self._call(subject, server, what)
        if outcome.raised:
            self._fail(
                server,
                f"{what[:1].upper()}{what[1:]} {outcome}; expected a result.",
                "a healthy server answered this call; see the exchanges above",
            )
        return outcome.value

    async def _call_unless(
        self, subject: Subject, server: FakeMCPServer, what: str, stop: Callable[[], bool]
    ) -> _Outcome:
        """A bounded call, abandoned (cancelled) as soon as ``stop()`` holds, which is polled every 10 ms."""
        __tracebackhide__ = True
        task = asyncio.ensure_future(self._call_raw(subject))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout
        try:
            while not task.done() and not stop():
                if loop.time() >= deadline:
                    raise self._hang(server, what)
                await asyncio.wait({task}, timeout=_POLL)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=self.call_timeout)
        return _outcome_of(task)

    async def _bounded(self, awaitable: Awaitable[Any], server: FakeMCPServer, what: str) -> Any:
        """Await within ``call_timeout``; a hang fails with the diagram."""
        __tracebackhide__ = True
        timeout = asyncio.timeout(self.call_timeout)
        try:
            async with timeout:
                return await awaitable
        except TimeoutError:
            if not timeout.expired():
                raise  # the client's own TimeoutError: an outcome, not a hang
            subject = self._current
            raise self._hang(server, what, subject.blocked(what) if subject is not None else None) from None
        except ThreadBlocked as blocked:
            raise self._hang(server, what, blocked) from None

    async def _gather(self, tasks: Sequence[asyncio.Future[Any]], server: FakeMCPServer, what: str) -> list[_Outcome]:
        """Wait (bounded) for every task; cancel what is left if the bound is hit."""
        __tracebackhide__ = True
        try:
            await self._bounded(asyncio.wait(tasks), server, what)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=self.call_timeout)
        return [_outcome_of(task) for task in tasks]

    async def _release_when_overlapping(self, held: ScriptedFault, gate: Gate) -> int:
        """Open ``gate`` once ``concurrency`` calls are held at the fake, or after ``overlap_timeout`` (capped at
        half of ``client_timeout``, so no call is held past the client's own bound); return how many were held
        together when it opened.

        A client that serialises its calls never gets there; the scenario's own check then says so.
        """
        bound = self.overlap_timeout
        if self.client_timeout is not None:
            bound = min(bound, self.client_timeout / 2)
        try:
            await held.wait_fired(self.concurrency, timeout=bound)
        except AssertionError:
            pass
        finally:
            together = held.fired
            gate.open()
        return together

    async def _settle(self, server: FakeMCPServer) -> None:
        """Wait (bounded) until the fake has finished every request but open GET streams.

        A request whose client went away has no completion event to wait on, so this polls the journal
        every 10 ms: it waits for a state, it does not order events.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout
        while loop.time() < deadline:
            if all(e.ended is not None or e.http_method == "GET" for e in server.journal.exchanges):
                return
            await asyncio.sleep(_POLL)

    def _expect_no_errors(self, server: FakeMCPServer, outcomes: Sequence[_Outcome], what: str) -> None:
        __tracebackhide__ = True
        errors = [outcome for outcome in outcomes if outcome.raised]
        if errors:
            self._fail(
                server,
                f"{len(errors)} of {what} raised; expected every one to succeed.",
                "a healthy server answered them; see the exchanges above",
                facts=[str(outcome) for outcome in errors],
            )

    def _hang(self, server: FakeMCPServer, what: str, blocked: ThreadBlocked | None = None) -> AssertionError:
        return self._failure(
            server,
            # What was measured, not a verdict: the suite cannot see the client's own bound (issue 25).
            f"{what[:1].upper()}{what[1:]} did not finish within call_timeout={self.call_timeout:g}s "
            "(the suite's bound on each step of the client).",
            f"if the client bounds this wait itself by more than {self.call_timeout:g}s (the mcp SDK's read "
            "timeout defaults to 300 s), raise call_timeout on the suite class above that bound, or configure the "
            "client's read timeout below call_timeout; if nothing bounds it, the client hangs: bound every wait "
            "(an mcp 1.x client waits for ever on an SSE stream cut before its response and on a request left "
            "when its session ended, docs/failure-modes.md#h03)",
            facts=[] if blocked is None else _blocked_facts(blocked),
            kind=_ClientHangs,
        )

    def _failure(
        self,
        server: FakeMCPServer,
        headline: str,
        hint: str,
        *,
        facts: Sequence[str] = (),
        marks: Mapping[int, str] | None = None,
        kind: type[AssertionError] = AssertionError,
    ) -> AssertionError:
        from ._record._report import mark_shown, render_failure

        figures = server.figures
        if not figures.exchanges and kind is AssertionError:
            headline = (
                f"the scenario could not be set up: the client never reached the fake at {server.url} (does "
                f"make_client/open_client use the URL it is given?). {headline}"
            )
        text = render_failure(
            f"{type(self).__name__}: {headline}",
            list(facts),
            figures.exchanges,
            figures.events,
            figures.sessions,
            marks=marks,
            hint=hint,
        )
        failure = kind(text)
        mark_shown(failure, figures.url)
        return failure

    def _fail(
        self,
        server: FakeMCPServer,
        headline: str,
        hint: str,
        *,
        facts: Sequence[str] = (),
        marks: Mapping[int, str] | None = None,
    ) -> None:
        __tracebackhide__ = True
        raise self._failure(server, headline, hint, facts=facts, marks=marks)


def _blocked_facts(blocked: ThreadBlocked) -> list[str]:
    where = [f"  at {line}" for line in blocked.where] or ["  (where it stands cannot be read on this Python)"]
    return [f"the client's worker thread {blocked.thread_name!r} was still blocked:", *where]


def _open_clients(http_clients: HTTPClientCounter, server: FakeMCPServer) -> int:
    return sum(1 for record in http_clients.created if not record.closed and record.talked_to(server.url))


def _went_modern(server: FakeMCPServer) -> bool:
    """The client spoke the 2026-07-28 era with the fake (so there are no sessions to check)."""
    return any(e.era == "modern" for e in server.journal)


def _raise_rpc_error() -> str:
    from ._wire._errors import JSONRPCError

    raise JSONRPCError(*_RPC_ERROR)


def _raise_tool_error() -> str:
    from ._wire._errors import ToolError

    raise ToolError("contract: the tool failed")


def _last_seq(server: FakeMCPServer) -> int:
    return max((e.seq for e in server.journal.exchanges), default=0)


def _new_sessions_since(server: FakeMCPServer, seq: int) -> list[int]:
    """The ``seq`` of each ``initialize`` without a session id (a new session) after exchange ``seq``."""
    return [
        e.seq for e in server.journal.exchanges if e.seq > seq and e.rpc_method == "initialize" and e.session_id is None
    ]


def _outcome_of(task: asyncio.Future[Any]) -> _Outcome:
    if not task.done() or task.cancelled():
        return _Outcome(error=asyncio.CancelledError())
    error = task.exception()
    return _Outcome(error=error) if error is not None else _Outcome(value=task.result())


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else repr(exc))[:200]


def _summary(exc: BaseException) -> list[str]:
    """The client's exception in two lines: what, and the innermost frame that raised it."""
    import traceback

    lines = [f"client exception: {type(exc).__name__}: {_one_line(exc)}"]
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        lines.append(f"  at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}")
    return lines


def _other_tasks() -> set[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current and not task.done()}
