"""RaceSuite: every race scenario on a user's MCP client, as a pytest class to subclass with ``make_client``.

Its scenarios' coroutines are code under test of the race (`_fifo_groups.CODE_UNDER_TEST` names this
module): their tasks are explored freely, unlike the fake's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from hypothesis import note
from hypothesis import strategies as st

from .._wire._options import FakeMCPOptions
from ._explore import Advice, advised_as, explore, race_settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from .._client._under_test import ContractClient
    from ._example import Race
    from ._server_choices import ServerChoices

__all__ = ["RaceSuite"]


def _outcome(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception()


async def _closed(client: ContractClient, race: Race) -> None:
    await client.aclose()
    await race.quiet()


class RaceSuite:
    """Subclass it with a ``make_client`` fixture to explore every race scenario on your MCP client.

    ``make_client`` returns a callable taking the fake's URL and returning your client, which offers
    ``await client.call_tool(name, arguments)`` and ``await client.aclose()`` (the same interface as
    `SessionReuseSuite`). Each scenario runs ``max_examples`` explored schedules on a clean in-process
    fake (by default the loaded Hypothesis profile's, as for any Hypothesis test); knobs are class attributes,
    and so are the values a failure says to add to replay it (``reproduce``, ``seed``). Example::

        import pytest
        from pytest_fake_mcp.races import RaceSuite

        class TestOurClientRaces(RaceSuite):
            @pytest.fixture
            def make_client(self):
                return lambda url: OurClient(url)

    Scenario oracles are checked once the run is quiet: an exception left unretrieved, a task left
    running, an HTTP client left open or a session left open on the fake fails the example.

    Set ``eras = ("handshake", "modern")`` to run each scenario once per era the fake serves: the oracles
    are era-neutral ("one ``initialize``" becomes "one ``server/discover`` and no session id" once the
    client went modern), and a scenario about sessions is skipped in the modern era, which has none.
    ``make_client`` may take the ``race_era`` fixture (e.g. to skip the modern era under mcp 1.x, whose
    client speaks only the handshake).
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

    @pytest.fixture
    def make_client(self) -> Callable[[str], ContractClient]:
        raise NotImplementedError(
            f"{type(self).__name__} must define a `make_client` fixture returning a callable that takes the "
            "fake's URL and returns your client, e.g.\n\n    @pytest.fixture\n    def make_client(self):\n"
            "        return lambda url: OurClient(url)"
        )

    def _explore(
        self,
        name: str,
        scenario: Callable[[Race], Awaitable[Any]],
        choices: ServerChoices | None = None,
    ) -> None:
        __tracebackhide__ = True
        cls = type(self)
        era = getattr(self, "_era", None)
        test = getattr(self, "_test_name", name)  # the scenario's test, as pytest names it (run outside pytest: name)
        with advised_as(_ClassAttributes(cls.__qualname__, test)):
            explore(
                scenario,
                max_examples=self.max_examples,
                options=self._options(),
                choices=choices,
                database_key=f"{cls.__module__}.{cls.__qualname__}.{name}" + (f"[{era}]" if era else ""),
                settings=race_settings(self.max_examples, **self.hypothesis_settings),
                seed=self.seed,
                reproduce=self.reproduce.get(test),
            )

    # --- scenarios ---------------------------------------------------------------------------------

    def test_concurrent_first_calls_open_one_session_and_one_http_client(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """K first calls at once: one ``initialize``, one HTTP client, every call answered."""
        __tracebackhide__ = True
        k = self.concurrency

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            callers = await _staggered(race, client, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(client, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed: {failed}"
            _assert_set_up_once(race)
            _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("concurrent_first_calls", scenario)

    def test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """After one call, the session is lost before some request; K calls at once: one re-initialize per loss."""
        __tracebackhide__ = True
        self._skip_in_modern_era("a session loss needs a session")
        k = self.concurrency

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            await client.call_tool("echo", {"text": "first"})
            race.server.drop_session()
            callers = await _staggered(race, client, k, self.stagger)
            await asyncio.wait(callers)
            await _closed(client, race)
            failed = [(c.get_name(), e) for c in callers if (e := _outcome(c)) is not None]
            assert not failed, f"calls failed across one session loss: {failed}"
            race.server.assert_initialize_count(2)
            race.server.assert_no_stale_session_ids()
            _assert_one_http_client(race)
            _assert_nothing_open(race)

        self._explore("calls_across_session_loss", scenario)

    def test_aclose_racing_the_first_call_leaves_nothing_open(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """``aclose`` while the first call is opening the session: no session, task or HTTP client left."""
        __tracebackhide__ = True

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller-1")
            closer = race.spawn(client.aclose(), "closer")
            await asyncio.wait([caller, closer])
            error = _outcome(closer)
            assert error is None, f"aclose() raised {error!r} while the first call was in flight"
            _outcome(caller)  # retrieved, not judged: a call cut short by aclose() may raise
            await race.quiet()
            _assert_nothing_open(race)

        self._explore("aclose_racing_first_call", scenario)

    def test_caller_cancelled_while_its_session_opens_leaks_no_session(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """The first caller is cancelled at an explored point; a later call works; after aclose nothing is open."""
        __tracebackhide__ = True

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            caller = race.spawn(client.call_tool("echo", {"text": "x"}), "caller-1")

            async def cancel() -> None:
                if await race.at_some_point(caller, "cancel caller-1"):
                    caller.cancel()

            canceller = race.spawn(cancel(), "canceller")
            await asyncio.wait([caller, canceller])
            if not caller.cancelled():
                caller.exception()
            await client.call_tool("echo", {"text": "after"})
            await _closed(client, race)
            _assert_nothing_open(race)

        self._explore("caller_cancelled_while_opening", scenario)

    def test_stateful_mixture_of_calls_losses_cancellation_and_close(
        self, make_client: Callable[[str], ContractClient]
    ) -> None:
        """Hypothesis picks the operations (calls, session loss, restart, cancellation, close) and their order."""
        __tracebackhide__ = True
        operations = st.lists(st.sampled_from(("call", "call", "drop", "restart", "cancel", "close")), max_size=6)

        async def scenario(race: Race) -> None:
            client = make_client(race.url)
            program = race.draw(operations, "operations")
            note(f"operations: {program}")
            callers: list[asyncio.Task[Any]] = []
            others: list[asyncio.Task[Any]] = []
            for i, op in enumerate(program):
                if op == "call":
                    callers.append(race.spawn(client.call_tool("echo", {"text": str(i)}), f"caller-{len(callers) + 1}"))
                elif op == "drop":
                    race.server.drop_session()
                elif op == "restart":
                    race.server.restart()
                elif op == "cancel" and callers:
                    callers[-1].cancel()
                elif op == "close":
                    others.append(race.spawn(client.aclose(), f"closer-{len(others) + 1}"))
                await asyncio.sleep(0)
            if callers or others:
                await asyncio.wait([*callers, *others])
            for task in others:
                error = _outcome(task)
                assert error is None, f"{task.get_name()}: aclose() raised {error!r}"
            for task in callers:
                if not task.cancelled():
                    task.exception()  # any outcome is allowed: a call may meet a loss, a restart or a close
            await _closed(client, race)
            _assert_nothing_open(race)

        self._explore("stateful_mixture", scenario)


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


async def _staggered(race: Race, client: ContractClient, k: int, stagger: int) -> list[asyncio.Task[Any]]:
    callers = []
    for i in range(k):
        if i:
            for _ in range(stagger):
                await asyncio.sleep(0)
        callers.append(race.spawn(client.call_tool("echo", {"text": f"c{i}"}), f"caller-{i + 1}"))
    return callers


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


def _assert_nothing_open(race: Race) -> None:
    """No session live on the fake, no HTTP client left open, no exchange still running."""
    __tracebackhide__ = True
    live = race.server.live_sessions
    assert not live, f"sessions left open on the server after aclose(): {[s.id[:8] for s in live]}"
    race.http_clients.assert_all_closed()
