"""Race testing: run async code against the in-process fake under schedules Hypothesis explores.

Every example builds a fresh controlled event loop and gets a clean in-process fake (one per test,
renewed before each example), then runs your coroutine on it. Which task runs at each step is a
Hypothesis choice (task priorities plus a few "change points", so a found race shrinks to one or two
numbers), and so are the server-side choices (how long each request is held, which session is lost
before which request). Time is virtual: sleeps and timeouts cost nothing. A failure shows the minimal
schedule in words, the choices, and the sequence diagram of the failing run; the Hypothesis database
replays it first on the next run.

Two entry points:

* `RaceSuite`: subclass it with a ``make_client`` or an ``open_client`` fixture (the `SessionReuseSuite`
  client forms) to run every race scenario on your client.
* `explore` / `race_test`: run your own coroutine, e.g. a session cache with its own API::

      from pytest_fake_mcp.races import race_test

      @race_test(max_examples=100)
      async def test_cache_creates_one_session(race):
          cache = MyCache()
          await asyncio.gather(cache.get(race.url), cache.get(race.url))
          await race.quiet()
          race.server.assert_initialize_count(1)

Race tests are plain (sync) test functions that build their own loop for each example: a loop shared
with pytest-asyncio or anyio would carry tasks and state from one example into the next, and their
loops cannot be told which callback to run. See ``docs/races.md``.

This module is the public face: the engine lives in ``_race`` (its ``__init__`` lists its modules). Hypothesis
is imported by the engine's exploration, which this module imports (the session-cache machine only when a cache
is explored); the checks of its private names in ``_compat`` import it only when they run.
"""

from __future__ import annotations

from ._race import (
    Deadlock,
    Livelock,
    NondeterminismError,
    Race,
    RaceFailure,
    RaceSuite,
    Schedule,
    ServerChoices,
    SessionCacheUnderTest,
    explore,
    explore_session_cache,
    race_settings,
    race_test,
    schedules,
)

__all__ = [
    "Deadlock",
    "Livelock",
    "NondeterminismError",
    "Race",
    "RaceFailure",
    "RaceSuite",
    "Schedule",
    "ServerChoices",
    "SessionCacheUnderTest",
    "explore",
    "explore_session_cache",
    "race_settings",
    "race_test",
    "schedules",
]

for _value in (Race, RaceFailure, RaceSuite, Schedule, ServerChoices, SessionCacheUnderTest):
    _value.__module__ = __name__  # tracebacks and reprs show the name users import (the classes live in ``_race``)
