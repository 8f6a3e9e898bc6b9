"""How-to: race testing (docs/races.md). Each region is shown verbatim in that page, complete: imports included.

The regions import what they use (so a reader copies a sample that runs), hence the imports between definitions.
"""
# ruff: noqa: E402, F811, I001

from __future__ import annotations

# --8<-- [start:suite]
import pytest
from pytest_fake_mcp.client import ReusingSessionClient as OurClient  # your client here
from pytest_fake_mcp.races import RaceSuite


class TestOurClientRaces(RaceSuite):
    max_examples = 20  # per scenario (default: the Hypothesis profile's, 100 unless it says otherwise)

    @pytest.fixture
    def make_client(self):
        return lambda url: OurClient(url)


# --8<-- [end:suite]


# --8<-- [start:race-test]
import asyncio

from pytest_fake_mcp.client import ReusingSessionClient as OurClient  # your client here
from pytest_fake_mcp.races import Race, race_test


@race_test(max_examples=20)  # or bare, @race_test: the Hypothesis profile's max_examples (100 by default)
async def test_two_callers_share_one_session(race: Race) -> None:
    client = OurClient(race.url)  # any httpx/httpx2 client reaches the in-process fake at race.url
    await asyncio.gather(
        client.call_tool("echo", {"text": "a"}),
        client.call_tool("echo", {"text": "b"}),
    )
    await client.aclose()
    await race.quiet()  # every other task is blocked or done
    race.server.assert_initialize_count(1)
    race.server.assert_all_sessions_closed()


# --8<-- [end:race-test]


# --8<-- [start:explore]
import asyncio

import pytest
from pytest_fake_mcp.client import ReusingSessionClient as OurClient  # your client here
from pytest_fake_mcp.races import Race, RaceFailure, explore


class LazyCache:
    """A cache with a check-then-act across its client's opening."""

    def __init__(self) -> None:
        self.client: OurClient | None = None
        self.made: list[OurClient] = []

    async def get(self, url: str) -> OurClient:
        if self.client is None:
            client = OurClient(url)
            self.made.append(client)
            await client.connect()
            self.client = client
        return self.client

    async def aclose(self) -> None:
        for client in self.made:
            await client.aclose()


async def two_getters(race: Race) -> None:
    cache = LazyCache()
    first = race.spawn(cache.get(race.url), "getter-1")  # named tasks read well in a failure
    for _ in range(3):
        await asyncio.sleep(0)  # the second getter comes a little later
    second = race.spawn(cache.get(race.url), "getter-2")
    await asyncio.gather(first, second)
    await cache.aclose()
    await race.quiet()
    race.server.assert_initialize_count(1)


def test_the_lazy_cache_opens_two_sessions() -> None:
    with pytest.raises(RaceFailure, match="initialize"):
        explore(two_getters, max_examples=200)


# --8<-- [end:explore]


# --8<-- [start:at-some-point]
import asyncio

import pytest
from pytest_fake_mcp.client import ReusingSessionClient as OurClient  # your client here
from pytest_fake_mcp.races import Race, RaceFailure, explore


class ForgetfulCache:
    """Drops the client it was opening when its caller is cancelled: that session stays open."""

    def __init__(self) -> None:
        self.client: OurClient | None = None

    async def get(self, url: str) -> OurClient:
        if self.client is None:
            client = OurClient(url)
            await client.connect()  # cancelled here: `client` is never closed
            self.client = client
        return self.client

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


async def cancelled_getter(race: Race) -> None:
    cache = ForgetfulCache()
    getter = race.spawn(cache.get(race.url), "getter")

    async def cancel_it() -> None:
        if await race.at_some_point(getter, "cancel the getter"):  # Hypothesis picks the point
            getter.cancel()

    await asyncio.wait([getter, race.spawn(cancel_it(), "canceller")])
    await cache.aclose()
    await race.quiet()
    race.server.assert_all_sessions_closed()


def test_the_forgetful_cache_leaks_the_session_of_a_cancelled_getter() -> None:
    with pytest.raises(RaceFailure, match="cancel the getter"):
        explore(cancelled_getter, max_examples=200)


# --8<-- [end:at-some-point]


# --8<-- [start:cache-machine]
from typing import Any

from pytest_fake_mcp.client import SessionCache
from pytest_fake_mcp.races import explore_session_cache


class OurCacheAdapter:
    """Our session cache behind the three methods the machine calls."""

    def __init__(self) -> None:
        self.cache = SessionCache(read_timeout=3.0)

    async def get(self, url: str, run_id: str) -> Any:
        return await self.cache.get_or_create((url, run_id))  # a client with call_tool(name, arguments)

    async def cleanup(self, run_id: str) -> None:
        await self.cache.close_run(run_id)

    async def aclose(self) -> None:
        await self.cache.aclose()


def test_our_cache_survives_every_program_the_machine_writes() -> None:
    explore_session_cache(OurCacheAdapter, max_examples=20)


# --8<-- [end:cache-machine]


# --8<-- [start:eras]
import importlib.metadata

import pytest
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.races import RaceSuite

MCP_1 = importlib.metadata.version("mcp").startswith("1.")


class TestOurClientRacesInBothEras(RaceSuite):
    eras = ("handshake", "modern")  # each scenario runs once per era
    max_examples = 10

    @pytest.fixture
    def make_client(self, race_era):
        if race_era == "modern" and MCP_1:
            pytest.skip("mcp 1.x's client speaks only the handshake era")
        return lambda url: ReusingSessionClient(url, mode="auto")  # probes, then either era


# --8<-- [end:eras]


# --8<-- [start:nightly-profile]
from hypothesis import settings

# In conftest.py: `pytest --hypothesis-profile=nightly` runs every race test, explore() and RaceSuite scenario
# without its own max_examples 2,000 times.
settings.register_profile("nightly", max_examples=2000)
# --8<-- [end:nightly-profile]


def test_the_nightly_profile_sets_the_examples_of_a_race_test_without_its_own() -> None:
    from pytest_fake_mcp.races import race_settings

    settings.register_profile("before-nightly", parent=settings.default)  # to restore whatever was loaded
    settings.load_profile("nightly")
    try:
        assert race_settings().max_examples == 2000
        assert race_settings(20).max_examples == 20  # an explicit count wins
    finally:
        settings.load_profile("before-nightly")
