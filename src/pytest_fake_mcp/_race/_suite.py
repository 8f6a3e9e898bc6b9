"""RaceSuite: every race scenario on a user's MCP client, as a pytest class to subclass with ``make_client`` or
``open_client``.

Its scenarios' coroutines are code under test of the race (`_fifo_groups.CODE_UNDER_TEST` names this
module): their tasks are explored freely, unlike the fake's.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

import pytest
from hypothesis import note
from hypothesis import strategies as st

from .._client._suite_forms import ClientForms
from .._client._under_test import Opened, Subject, WorksInThreads
from .._wire._options import FakeMCPOptions
from ._explore import Advice, advised_as, explore, race_settings
from ._loop import NondeterminismError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Mapping

    from .._client._under_test import ContractClient
    from ._example import Race
    from ._server_choices import ServerChoices

__all__ = ["RaceSuite"]

CANNOT_EXPLORE: Final = (
    "RaceSuite explores one event loop's interleavings: a client that works in threads cannot be explored ({what}); "
    "SessionReuseSuite runs it with its calls bounded in worker threads (docs/races.md#what-racesuite-cannot-explore)"
)
"""The skip of every scenario given a client that works in threads, ``what`` saying how it does."""
_STEP_BOUND: Final = 60.0
"""`Subject`'s bound on a sync step: never used here (a client with sync steps is refused), virtual time besides."""


def _outcome(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception()


async def _as_is(step: Awaitable[Any], what: str) -> Any:
    """`Subject.open`'s bound: none (virtual time; a step that never ends is a deadlock the run reports)."""
    return await step


async def _open(race: Race, make_client: Callable[[str], ContractClient]) -> Subject:
    """The client under test, opened on this task (``open_client``'s context entered here, as ``async with`` does).

    A client that works in threads is refused before any of its sync steps runs: the scenario skips, saying so.
    """
    if isinstance(make_client, Opened):
        opener = make_client.opener

        def async_only(url: str) -> Any:
            context = opener(url)
            if not hasattr(context, "__aenter__") and hasattr(context, "__enter__"):
                raise WorksInThreads("open_client returned a sync context manager, entered and left in a thread")
            return context

        subject = Subject(opener=async_only, timeout=_STEP_BOUND)
        try:
            await subject.open(race.url, _as_is)
        except WorksInThreads as refused:
            pytest.skip(CANNOT_EXPLORE.format(what=refused.what))
        if subject.threaded:
            await subject.aclose()  # leave the async context, on this task, before skipping
            pytest.skip(CANNOT_EXPLORE.format(what="the call_tool its context yields is sync, run in a thread"))
        return subject
    subject = Subject(client=make_client(race.url), timeout=_STEP_BOUND)
    if subject.threaded:
        pytest.skip(CANNOT_EXPLORE.format(what="make_client's client has a sync call_tool, run in a thread"))
    return subject


def _opened(
    make_client: Callable[[str], ContractClient], scenario: Callable[[Race, Subject], Awaitable[None]]
) -> Callable[[Race], Awaitable[None]]:
    """``scenario`` on the client under test, opened first (`_open`); an ``open_client`` context the scenario
    left open when it failed is left on its task, as ``async with`` would leave it, its own error suppressed."""

    async def run(race: Race) -> None:
        subject = await _open(race, make_client)
        try:
            await scenario(race, subject)
        except BaseException:
            if subject.in_context and not subject.closed:
                with contextlib.suppress(Exception):  # the scenario's failure is the one to report
                    await subject.aclose()
            raise

    return run


def _call(subject: Subject, name: str, arguments: dict[str, Any]) -> Coroutine[Any, Any, Any]:
    """The client's own ``call_tool`` coroutine, to spawn as a task (async: a sync one was refused at opening)."""
    return subject.client.call_tool(name, arguments)  # type: ignore[no-any-return]


def _aclose(subject: Subject) -> Coroutine[Any, Any, None]:
    """``make_client``'s client's own ``aclose()`` coroutine, to spawn as a task (from any task, as it allows)."""
    subject.closed = True
    return subject.client.aclose()  # type: ignore[no-any-return]


async def _closed(subject: Subject, race: Race) -> None:
    await subject.aclose()
    await race.quiet()


class RaceSuite(ClientForms):
    """Subclass it with a ``make_client`` or an ``open_client`` fixture to explore every race scenario on your client.

    The two forms of `SessionReuseSuite` (docs/contract.md#client-forms), with the same fixture names:
    ``make_client`` returns a callable taking the fake's URL and returning your client, which offers
    ``await client.call_tool(name, arguments)`` and ``await client.aclose()``; ``open_client`` returns a callable
    taking the URL and returning an async context manager that yields an object with ``await call_tool(name,
    arguments)``, entered and left on the scenario's own task exactly as ``async with`` does (calls come from
    other tasks where the scenario needs concurrency). Each scenario runs ``max_examples`` explored schedules on
    a clean in-process fake (by default the loaded Hypothesis profile's, as for any Hypothesis test); knobs are
    class attributes, and so are the values a failure says to add to replay it (``reproduce``, ``seed``).
    Example::

        import pytest
        from pytest_fake_mcp.races import RaceSuite

        class TestOurClientRaces(RaceSuite):
            @pytest.fixture
            def make_client(self):
                return lambda url: OurClient(url)

    Scenario oracles are checked once the run is quiet: an exception left unretrieved, a task left
    running, an HTTP client left open or a session left open on the fake fails the example.

    The suite explores one event loop: a client that works in threads (a sync context manager, a sync
    ``call_tool``) is refused, each scenario skipping with the reason; so is one that starts a thread, runs an
    executor or looks up a host name during a run. `SessionReuseSuite` runs such a client, its calls bounded in
    worker threads.

    ``session_policy = "per_call"`` declares a client that opens a session per call by design: the scenario
    that needs a session to outlive a call skips, saying why, and the others expect no more sessions than calls,
    each closed. ``known_failures = {"test_x": "why"}`` runs the scenarios named as strict xfails.

    Set ``eras = ("handshake", "modern")`` to run each scenario once per era the fake serves: the oracles
    are era-neutral ("one ``initialize``" becomes "one ``server/discover`` and no session id" once the
    client went modern), and a scenario about sessions is skipped in the modern era, which has none.
    ``make_client`` may take the ``race_era`` fixture (e.g. to skip the modern era under mcp 1.x, whose
    client speaks only the handshake).

    ``auth = True`` runs the authorization scenario (concurrent calls meeting an expired token) on a fake with
    ``auth=True``, for a client that logs in (docs/races.md#authorization); otherwise it skips, naming the switch.
    """

    max_examples: ClassVar[int | None] = None
    """Examples per scenario; None: the loaded Hypothesis profile's (``--hypothesis-profile``; 100 unless it says
    otherwise). A count set here wins over the profile."""
    concurrency: ClassVar[int] = 3
    """Concurrent callers in the concurrency scenarios."""
    stagger: ClassVar[int] = 3
    """Loop turns between starting one caller and the next: under stock asyncio order the first caller is
    then a little ahead, as in real traffic; exploration finds the orders in which it is not."""
    options: ClassVar[FakeMCPOptions | None] = None
    hypothesis_settings: ClassVar[dict[str, Any]] = {}
    """Extra Hypothesis settings for every scenario, e.g. ``{"database": None}`` or ``{"phases": ...}``."""
    eras: ClassVar[tuple[str, ...]] = ()
    """Eras the fake serves, one run of each scenario per era (e.g. ``("handshake", "modern")``); empty: each
    scenario runs once, with the era of ``options`` (docs/eras.md)."""
    reproduce: ClassVar[Mapping[str, tuple[str, bytes]]] = {}
    """Scenario test name (as pytest names it, e.g. ``test_x[era-modern]``) -> the ``(version, blob)`` of the one
    example to run, as a failure prints it (Hypothesis's ``@reproduce_failure``, for a scenario)."""
    seed: ClassVar[int | None] = None
    """Pins the generation of every scenario (as ``@hypothesis.seed``; ``--hypothesis-seed`` does the same)."""
    shrink_seconds: ClassVar[float | None] = None
    """Wall-clock seconds a scenario may shrink once it has failed (None: 20, or pytest's ``--race-shrink-seconds``)."""
    shrink_again: ClassVar[bool | None] = None
    """Shrink a failure replayed from the database further (None: only under pytest's ``--race-shrink-again``)."""
    auth: ClassVar[bool] = False
    """Run the authorization scenario (docs/races.md#authorization): its fake gets ``auth=True``, and
    ``make_client``/``open_client`` must give a client whose HTTP client logs in to it (e.g. with
    ``HeadlessOAuth().provider(url)`` as its ``auth=``). Off: it skips, naming this switch."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each scenario once per era of :attr:`eras`."""
        if self.eras and "race_era" in metafunc.fixturenames:
            metafunc.parametrize("race_era", list(self.eras), ids=[f"era-{era}" for era in self.eras])

    @pytest.fixture
    def race_era(self) -> str | None:
        """The era the fake serves in this scenario run (None: the era of ``options``)."""
        return None

    @pytest.fixture(autouse=True)
    def _race_era_in_use(self, race_era: str | None, request: pytest.FixtureRequest) -> None:
        self._era = race_era
        self._test_name = request.node.name

    def _options(self) -> FakeMCPOptions | None:
        era = getattr(self, "_era", None)
        if era is None:
            return self.options
        return (self.options or FakeMCPOptions()).merged(era=era)

    def _skip_in_modern_era(self, why: str) -> None:
        if getattr(self, "_era", None) == "modern":
            pytest.skip(f"{why}: the 2026-07-28 era has no sessions")

    def _explore(
        self,
        name: str,
        scenario: Callable[[Race], Awaitable[Any]],
        choices: ServerChoices | None = None,
        *,
        auth: bool = False,
    ) -> None:
        __tracebackhide__ = True
        cls = type(self)
        options = self._options()
        if auth:
            options = (options or FakeMCPOptions()).merged(auth=True)
        era = getattr(self, "_era", None)
        test = getattr(self, "_test_name", name)  # the scenario's test, as pytest names it (run outside pytest: name)
        try:
            with advised_as(_ClassAttributes(cls.__qualname__, test)):
                explore(
                    scenario,
                    max_examples=self.max_examples,
                    options=options,
                    choices=choices,
                    database_key=f"{cls.__module__}.{cls.__qualname__}.{name}" + (f"[{era}]" if era else ""),
                    settings=race_settings(self.max_examples, **self.hypothesis_settings),
                    seed=self.seed,
                    reproduce=self.reproduce.get(test),
                    shrink_seconds=self.shrink_seconds,
                    shrink_again=self.shrink_again,
                )
        except NondeterminismError as error:
            if not error.thread:
                raise
            pytest.skip(CANNOT_EXPLORE.format(what=f"it used {error.source}"))

    # --- scenarios ---------------------------------------------------------------------------------

    def test_concurrent_first_calls_open_one_session_and_one_http_client(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """K first calls at once: one ``initialize``, one HTTP client, every call answered (``per_call``: no more
        sessions than calls, each closed)."""
        __tracebackhide__ = True
        k = self.concurrency
        per_call = self._per_call()

        async def scenario(race: Race, subject: Subject) -> None:
            callers = await _staggered(race, subject, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(subject, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed: {failed}"
            if per_call:
                _assert_no_more_sessions_than_calls(race, k)
            else:
                _assert_set_up_once(race)
                _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("concurrent_first_calls", _opened(make_client, scenario))

    def test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """After one call, the session is lost before some request; K calls at once: one re-initialize per loss."""
        __tracebackhide__ = True
        self._skip_in_modern_era("a session loss needs a session")
        self._skip_if_per_call("no session outlives a call, so there is none for the server to lose between calls")
        k = self.concurrency

        async def scenario(race: Race, subject: Subject) -> None:
            await subject.call("echo", {"text": "first"})
            race.server.drop_session()
            callers = await _staggered(race, subject, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(subject, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed across one session loss: {failed}"
            race.server.assert_initialize_count(2)
            race.server.assert_no_stale_session_ids()
            _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("calls_across_session_loss", _opened(make_client, scenario))

    def test_aclose_racing_the_first_call_leaves_nothing_open(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """``aclose`` while the first call is opening the session: no session, task or HTTP client left
        (``open_client``: its context left, on the scenario's task, at an explored point of the call)."""
        __tracebackhide__ = True

        async def scenario(race: Race, subject: Subject) -> None:
            caller = race.spawn(_call(subject, "echo", {"text": "x"}), "caller-1")
            if subject.in_context:
                error = await _close_during(race, subject, caller)
            else:
                closer = race.spawn(_aclose(subject), "closer")
                await asyncio.wait([caller, closer])
                error = _outcome(closer)
            assert error is None, f"aclose() raised {error!r} while the first call was in flight"
            _outcome(caller)  # retrieved, not judged: a call cut short by aclose() may raise
            await race.quiet()
            _assert_nothing_open(race)

        self._explore("aclose_racing_first_call", _opened(make_client, scenario))

    def test_caller_cancelled_while_its_session_opens_leaks_no_session(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """The first caller is cancelled at an explored point; a later call works; after aclose nothing is open."""
        __tracebackhide__ = True

        async def scenario(race: Race, subject: Subject) -> None:
            caller = race.spawn(_call(subject, "echo", {"text": "x"}), "caller-1")

            async def cancel() -> None:
                if await race.at_some_point(caller, "cancel caller-1"):
                    caller.cancel()

            canceller = race.spawn(cancel(), "canceller")
            await asyncio.wait([caller, canceller])
            if not caller.cancelled():
                caller.exception()
            await subject.call("echo", {"text": "after"})
            await _closed(subject, race)
            _assert_nothing_open(race)

        self._explore("caller_cancelled_while_opening", _opened(make_client, scenario))

    def test_stateful_mixture_of_calls_losses_cancellation_and_close(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Hypothesis picks the operations (calls, session loss, restart, cancellation, close) and their order
        (``open_client``: close leaves the context on the scenario's task, and no call starts after it)."""
        __tracebackhide__ = True
        operations = st.lists(st.sampled_from(("call", "call", "drop", "restart", "cancel", "close")), max_size=6)

        async def scenario(race: Race, subject: Subject) -> None:
            program = race.draw(operations, "operations")
            note(f"operations: {program}")
            callers: list[asyncio.Task[Any]] = []
            others: list[asyncio.Task[Any]] = []
            for i, op in enumerate(program):
                if op == "call" and not (subject.in_context and subject.closed):
                    callers.append(race.spawn(_call(subject, "echo", {"text": str(i)}), f"caller-{len(callers) + 1}"))
                elif op == "drop":
                    race.server.drop_session()
                elif op == "restart":
                    race.server.restart()
                elif op == "cancel" and callers:
                    callers[-1].cancel()
                elif op == "close" and subject.in_context:
                    await subject.aclose()  # leaving the context: once, on the task that entered it
                elif op == "close":
                    others.append(race.spawn(_aclose(subject), f"closer-{len(others) + 1}"))
                await asyncio.sleep(0)
            if callers or others:
                await asyncio.wait([*callers, *others])
            for task in others:
                error = _outcome(task)
                assert error is None, f"{task.get_name()}: aclose() raised {error!r}"
            for task in callers:
                if not task.cancelled():
                    task.exception()  # any outcome is allowed: a call may meet a loss, a restart or a close
            await _closed(subject, race)
            _assert_nothing_open(race)

        self._explore("stateful_mixture", _opened(make_client, scenario))

    def test_two_concurrent_acloses_on_an_open_session_leave_nothing_open(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Once a call opened the session, two tasks call ``aclose()`` at once: neither raises, and the session is
        deleted and the HTTP client closed, the second close waiting for the first (issue 23: a second ``aclose``
        that closes the HTTP client under the first one's DELETE leaves the session open on the server)."""
        __tracebackhide__ = True
        if isinstance(make_client, Opened):
            pytest.skip(
                "open_client's context is left once, on the task that entered it, as `async with` does: two "
                "concurrent closes are not a thing for it"
            )

        async def scenario(race: Race, subject: Subject) -> None:
            await subject.call("echo", {"text": "first"})  # a session to delete: the closes race its DELETE
            closers = [race.spawn(_aclose(subject), "closer-1"), race.spawn(_aclose(subject), "closer-2")]
            await asyncio.wait(closers)
            for task in closers:
                error = _outcome(task)
                assert error is None, f"{task.get_name()}: aclose() raised {error!r} while another aclose() ran"
            await race.quiet()
            _assert_nothing_open(race)

        self._explore("concurrent_double_aclose", _opened(make_client, scenario))

    def test_aclose_racing_a_call_on_an_open_session_leaves_nothing_open(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Once a call opened the session, a second call is in flight when the client is closed, at an explored
        point of that call (``open_client``: its context left on the scenario's task): the close does not raise,
        the call ends (any outcome) and no session, task or HTTP client is left."""
        __tracebackhide__ = True

        async def scenario(race: Race, subject: Subject) -> None:
            await subject.call("echo", {"text": "first"})
            caller = race.spawn(_call(subject, "echo", {"text": "in flight"}), "caller-1")
            error = await _close_during(race, subject, caller)
            assert error is None, f"aclose() raised {error!r} while a call was in flight on the open session"
            _outcome(caller)  # retrieved, not judged: a call cut short by aclose() may raise
            await race.quiet()
            _assert_nothing_open(race)

        self._explore("aclose_racing_a_call", _opened(make_client, scenario))

    def test_concurrent_calls_meeting_an_expired_token_renew_it_once(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Opt-in (``auth = True``): after one call (the client logs in) every token expires; K calls at once meet
        the 401: one token grant for the expiry (single flight), no refused token sent again, no second
        registration, the session kept, every call answered."""
        __tracebackhide__ = True
        if not self.auth:
            pytest.skip(
                f"the authorization scenario is off: set auth = True on {type(self).__name__} and give it a client "
                "that logs in (e.g. its HTTP client's auth=HeadlessOAuth().provider(url)) to run it "
                "(docs/races.md#authorization)"
            )
        k = self.concurrency

        async def scenario(race: Race, subject: Subject) -> None:
            await subject.call("echo", {"text": "first"})
            race.server.expire_tokens()
            callers = await _staggered(race, subject, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(subject, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            race.server.assert_single_flight_refresh()
            race.server.assert_no_refused_token_reused()
            race.server.assert_no_reregistration()
            race.server.assert_session_kept_across_auth()
            assert not failed, f"calls failed after the token expired: {failed}"
            _assert_nothing_open(race)

        self._explore("calls_meeting_expired_token", _opened(make_client, scenario), auth=True)


class _ClassAttributes(Advice):
    """A failure's advice worded for a `RaceSuite` subclass: the class attributes that take Hypothesis's values."""

    def __init__(self, suite: str, test: str) -> None:
        super().__init__(suite)
        self.test = test

    def reproduce(self, version: str, blob: bytes) -> str:
        return (
            f"\nYou can run exactly this example by temporarily adding this class attribute to {self.call}: "
            f"reproduce = {{{self.test!r}: ({version!r}, {blob!r})}}"
        )

    def seed(self, seed: str) -> str:
        return f"setting the class attribute seed = {seed} on {self.call}"

    def setting(self, name: str, value: str) -> str:
        return f"the class attribute {name} = {value} on {self.call}"


async def _staggered(race: Race, subject: Subject, k: int, stagger: int) -> list[asyncio.Task[Any]]:
    callers = []
    for i in range(k):
        if i:
            for _ in range(stagger):
                await asyncio.sleep(0)
        callers.append(race.spawn(_call(subject, "echo", {"text": f"c{i}"}), f"caller-{i + 1}"))
    return callers


async def _close_during(race: Race, subject: Subject, caller: asyncio.Task[Any]) -> BaseException | None:
    """Close ``subject`` at an explored point of ``caller``, then wait for ``caller``; what the close raised.

    ``make_client``: ``aclose()`` from a task of its own; ``open_client``: its context left on this task, the one
    that entered it, as ``async with`` does.
    """

    async def close() -> None:
        await race.at_some_point(caller, "close")
        await subject.aclose()

    if not subject.in_context:
        closer = race.spawn(close(), "closer")
        await asyncio.wait([caller, closer])
        return _outcome(closer)
    error: BaseException | None = None
    try:
        await close()
    except Exception as exc:
        error = exc
    await asyncio.wait([caller])
    return error


def _assert_set_up_once(race: Race) -> None:
    """One ``initialize`` (handshake era); one ``server/discover`` per client and no session id (modern era).

    The exchanges are read once for both questions (did the client go modern, how many ``initialize``); the
    server's assertion, whose snapshot of every figure costs more than the count, builds the message of a
    failure only.
    """
    __tracebackhide__ = True
    exchanges = race.server.journal.exchanges
    if any(e.era == "modern" for e in exchanges):  # the client spoke the 2026-07-28 era: no sessions
        race.server.assert_discover_once()
        race.server.assert_no_session_ids()
    elif sum(e.rpc_method == "initialize" for e in exchanges) != 1:
        race.server.assert_initialize_count(1)


def _assert_one_http_client(race: Race) -> None:
    __tracebackhide__ = True
    race.http_clients.assert_created(1, talked_to=race.url)


def _assert_no_more_sessions_than_calls(race: Race, calls: int) -> None:
    """``session_policy = "per_call"``: at most one ``initialize`` per call (concurrent calls may share one)."""
    __tracebackhide__ = True
    opened = sum(e.rpc_method == "initialize" for e in race.server.journal.exchanges)
    if opened > calls:
        race.server.assert_initialize_count(calls)  # its message, with the diagram


def _assert_nothing_open(race: Race) -> None:
    """No session live on the fake, no HTTP client left open, no exchange still running."""
    __tracebackhide__ = True
    live = race.server.live_sessions
    assert not live, f"sessions left open on the server after aclose(): {[s.id[:8] for s in live]}"
    race.http_clients.assert_all_closed()
