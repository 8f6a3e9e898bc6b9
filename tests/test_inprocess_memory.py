"""The in-process fake keeps nothing of a run once the run is over: no fake, server, loop or client stays reachable.

What a fake keeps is held by the fake: nothing module-level refers to it once its route is removed, even when its
app reaches the clients that called it (a race's app does: its draws reach the code under test). Each entry point
of the race engine is run for a few examples and every object it built is then checked to be gone, by weak
reference after a collection (not by a memory size: bench/ is the place for figures).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.util
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase

from _log_capture import no_log_capture
from contract_clients import ReferenceClient
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._host._server import FakeMCPServer
from pytest_fake_mcp.races import Race, RaceSuite, explore, explore_session_cache, race_settings
from race_clients import ReferenceCache

EXAMPLES = 8
QUICK: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}
HTTP_LIBRARIES = [name for name in ("httpx", "httpx2") if importlib.util.find_spec(name) is not None]
KINDS: tuple[type, ...] = (InProcessFake, FakeMCPServer, asyncio.AbstractEventLoop)
"""What one run builds and must not outlive it: the fakes, their servers, the loops."""


def _live(kinds: tuple[type, ...]) -> list[Any]:
    gc.collect()
    return [obj for obj in gc.get_objects() if isinstance(obj, kinds)]


def _left_alive(action: Callable[[], None]) -> list[str]:
    """The kinds of `KINDS` objects built by ``action`` (not alive before it) still reachable after a collection."""
    with no_log_capture():  # pytest's log capture would keep the runs' tracebacks, and their loops, until the test ends
        before = weakref.WeakSet(_live(KINDS))
        action()
        left = [obj for obj in _live(KINDS) if obj not in before]
    return sorted(type(obj).__name__ for obj in left)


@pytest.fixture(autouse=True, scope="module")
def _warmed_up() -> None:
    """One example of each entry point first: a module imported during a run may keep a reference of its own."""
    _explore_cache(_cache_factory([]), 1)
    _explore_two_calls(1)


def _cache_factory(made: list[weakref.ref[Any]]) -> Callable[[], Any]:
    def make_cache() -> Any:
        cache = ReferenceCache()
        made.append(weakref.ref(cache))
        return cache

    return make_cache


def _explore_cache(make_cache: Callable[[], Any], examples: int) -> None:
    explore_session_cache(make_cache, max_examples=examples, settings=race_settings(examples, **QUICK))


def _explore_two_calls(examples: int) -> None:
    async def two_calls(race: Race) -> None:
        client = ReferenceClient(race.url)
        try:
            await asyncio.gather(client.call_tool("echo", {"text": "a"}), client.call_tool("echo", {"text": "b"}))
        finally:
            await client.aclose()

    explore(two_calls, max_examples=examples, settings=race_settings(examples, **QUICK))


def test_explore_session_cache_keeps_no_examples_fake_loop_or_cache() -> None:
    made: list[weakref.ref[Any]] = []
    left = _left_alive(lambda: _explore_cache(_cache_factory(made), EXAMPLES))
    assert len(made) >= EXAMPLES
    assert left == []
    assert [ref for ref in made if ref() is not None] == []  # nor the caches (and their clients) under test


def test_explore_keeps_no_examples_fake_or_loop() -> None:
    assert _left_alive(lambda: _explore_two_calls(EXAMPLES)) == []


def test_race_suite_keeps_no_examples_fake_or_loop() -> None:
    class Suite(RaceSuite):
        max_examples = EXAMPLES
        hypothesis_settings = QUICK

    def scenario() -> None:
        Suite().test_stateful_mixture_of_calls_losses_cancellation_and_close(ReferenceClient)

    assert _left_alive(scenario) == []


def _run_a_fake_whose_app_reaches_its_client(library: str) -> tuple[weakref.ref[Any], weakref.ref[Any]]:
    """A fake whose app wrapper holds the client that called it; weak references to both, once it is closed."""
    http = importlib.import_module(library)
    clients: list[Any] = []

    def wrap(app: Any) -> Any:
        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)

        asgi.clients = clients  # type: ignore[attr-defined]
        return asgi

    async def call(url: str) -> int:
        async with http.AsyncClient() as client:
            clients.append(client)  # kept past the run, and with it its network transport
            response = await client.get(url)
            return int(response.status_code)

    with InProcessFake(wrap=wrap) as fake:
        assert asyncio.run(call(fake.url)) >= 400  # a GET with no session: refused, but answered by the fake
        assert len(fake.transports) == 1
    return weakref.ref(fake), weakref.ref(clients[0])


@pytest.mark.parametrize("library", HTTP_LIBRARIES)
def test_a_fake_whose_app_reaches_its_clients_is_freed_once_closed(library: str) -> None:
    # As a race's app reaches the code under test: the fake's stand-in for the client's network transport then
    # reaches that network transport again, which a table keyed weakly by network transports would keep forever.
    fake, client = _run_a_fake_whose_app_reaches_its_client(library)
    gc.collect()
    assert fake() is None
    assert client() is None


def test_a_renewed_fake_stands_in_afresh_for_a_client_kept_from_the_last_run() -> None:
    # `renew` readies the fake for a new run: a client kept from the previous run gets a new stand-in transport,
    # counted among this run's (its open exchanges are this run's), not the previous run's forgotten one.
    http = importlib.import_module(HTTP_LIBRARIES[-1])

    async def get(client: Any, url: str) -> None:
        await client.get(url)

    with InProcessFake() as fake:
        client = http.AsyncClient()
        asyncio.run(get(client, fake.url))
        first = list(fake.transports)
        fake.renew()
        assert fake.transports == []
        asyncio.run(get(client, fake.url))
        assert len(fake.transports) == 1
        assert fake.transports[0] is not first[0]
        asyncio.run(client.aclose())
