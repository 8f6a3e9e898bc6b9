"""Auth under the race engine: concurrent calls meeting an expired token, with no hand-placed barrier."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import aclosing

import httpx
import pytest

from _auth_clients import OAuthState, Refresher, call_echo, login, open_session
from pytest_fake_mcp import FakeMCPOptions
from pytest_fake_mcp.races import Race, RaceFailure, explore

OPTIONS = FakeMCPOptions(auth=True, json_response=True)


def _scenario(*, single_flight: bool) -> Callable[[Race], Awaitable[None]]:
    async def two_calls_meet_one_expiry(race: Race) -> None:
        race.server.on("tools/call").expire_tokens()  # the first call to arrive meets the 401; the other may too
        state = OAuthState(origin=race.url.rsplit("/", 1)[0], resource=race.url)
        async with httpx.AsyncClient() as http:
            await login(http, state)
        auth = Refresher(state, single_flight=single_flight)
        async with aclosing(httpx.AsyncClient(auth=auth)) as http:
            session = await open_session(http, race.url)
            answers = await asyncio.gather(*(call_echo(http, race.url, session, t) for t in "ab"))
        assert [a.status_code for a in answers] == [200, 200]
        await race.quiet()
        race.server.assert_single_flight_refresh()

    return two_calls_meet_one_expiry


def test_the_race_engine_finds_the_refresher_without_single_flight() -> None:
    with pytest.raises(RaceFailure, match=r"redundant token grant"):
        explore(_scenario(single_flight=False), max_examples=30, options=OPTIONS)


def test_the_race_engine_passes_the_single_flight_refresher() -> None:
    explore(_scenario(single_flight=True), max_examples=30, options=OPTIONS)
