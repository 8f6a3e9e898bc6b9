"""explore: a Hypothesis search over a race scenario's examples, with its settings, database keys and seeds.

`explore` runs `run_example` under ``@given``; `race_test` turns ``async def test_x(race)`` into a plain test
that explores it; `race_settings`, `keyed_settings` and `seed_for` are the settings every search (the
session-cache machine's too) runs under.
"""

from __future__ import annotations

import functools
import gc
import sys
from typing import TYPE_CHECKING, Any, Final

from hypothesis import HealthCheck, given, reproduce_failure, settings
from hypothesis import seed as pin_seed
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase

from .._host._inprocess import InProcessFake
from .._record._counters import http_client_hooks_kept
from .._wire._options import FakeMCPOptions
from ._example_run import run_example

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable, Iterable

    from ._example import Race
    from ._schedule import Schedule
    from ._server_choices import ServerChoices

__all__ = ["explore", "keyed_settings", "race_settings", "race_test", "seed_for"]


def race_settings(max_examples: int = 100, **kwargs: Any) -> settings:
    """The Hypothesis settings race tests use: no deadline (virtual time), the blob printed, no too_slow check."""
    kwargs.setdefault("deadline", None)
    kwargs.setdefault("print_blob", True)
    kwargs.setdefault("suppress_health_check", [HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    return settings(max_examples=max_examples, **kwargs)


def explore(
    scenario: Callable[[Race], Awaitable[Any]],
    *,
    max_examples: int = 100,
    options: FakeMCPOptions | None = None,
    choices: ServerChoices | None = None,
    schedule_strategy: st.SearchStrategy[Schedule] | None = None,
    allow_leftover_tasks: bool = False,
    allow_loop_errors: bool = False,
    database_key: str | None = None,
    settings: settings | None = None,
    seed: int | None = None,
    reproduce: tuple[str, bytes] | None = None,
) -> None:
    """Run ``scenario(race)`` under up to ``max_examples`` explored schedules; raise on the minimal failure.

    Call it from a plain (sync) test. ``database_key`` names the saved failures (default: the scenario's
    qualified name), so a rerun replays the last failure first. ``seed`` pins generation (as
    ``@hypothesis.seed``; under ``derandomize``, the key is the seed); ``settings`` replaces `race_settings`.
    ``reproduce=(version, blob)`` runs exactly the example a failure printed (as ``@reproduce_failure``): a
    regression test.

    Raises:
        RaceFailure: the shrunk failing example, with the schedule in words and the sequence diagram.
        NondeterminismError: the scenario used a real socket, a thread or an executor.

    Example::

        def test_two_callers_share_one_session():
            async def scenario(race):
                client = MyClient(race.url)
                await asyncio.gather(client.call_tool("echo", {}), client.call_tool("echo", {}))
                await client.aclose()
                race.server.assert_initialize_count(1)

            explore(scenario, max_examples=50)
    """
    __tracebackhide__ = True
    fake = InProcessFake(options or FakeMCPOptions())

    def example(data: Any) -> None:
        run_example(
            data,
            scenario,
            options=options,
            choices=choices,
            schedule_strategy=schedule_strategy,
            allow_leftover_tasks=allow_leftover_tasks,
            allow_loop_errors=allow_loop_errors,
            fake=fake,
        )

    key = database_key or f"{getattr(scenario, '__module__', '')}.{getattr(scenario, '__qualname__', scenario)}"
    example.__name__ = "race_" + "".join(c if c.isalnum() else "_" for c in key.rsplit(".", 1)[-1])
    example.__qualname__ = example.__name__
    test = given(data=st.data())(example)
    configured = settings if settings is not None else race_settings(max_examples)
    pinned = seed_for(seed, configured, key)
    if pinned is not None:
        test = pin_seed(pinned)(test)  # under the settings: they keep their database
    runner = keyed_settings(configured, key)(test)
    if reproduce is not None:
        runner = reproduce_failure(*reproduce)(runner)
    # One fake for every example, renewed before each (building and routing one costs more than a reset),
    # and the HTTP-client counting hooks kept installed between examples (installing them patches classes).
    # GC is off during each run; what was alive before the test is frozen meanwhile, so the collections
    # between examples walk only what the examples left, not every module the process has loaded.
    frozen = not _frozen_by_others()
    with http_client_hooks_kept(), fake:
        if frozen:
            gc.freeze()
        try:
            runner()
        finally:
            # Collect what the runs left here, not in whichever test runs next.
            gc.collect()
            if frozen:
                gc.unfreeze()


def _frozen_by_others() -> bool:
    """Has someone else frozen objects (``gc.freeze``)? Then `explore` leaves the collector's freeze alone."""
    return gc.get_freeze_count() > _frozen_by_python()


@functools.cache
def _frozen_by_python() -> int:
    """The most objects CPython itself keeps in the permanent generation (``gc.get_freeze_count()``).

    0, except on 3.12: its collector moves every immortal object it meets there (gcmodule.c ``update_refs``),
    that is the tuples of the static builtin types' bases and MROs (375 on 3.12.1, from interpreter start); 3.13
    untracks them instead. Counted once: static builtin types are all made at interpreter start.
    """
    if sys.version_info[:2] != (3, 12):
        return 0
    immortal = sys.getrefcount(None)  # None is immortal from 3.12: the immortal reference count
    seen: set[int] = set()
    types: list[type] = [object]
    found: set[type] = set()
    while types:
        cls = types.pop()
        if cls in found:
            continue
        found.add(cls)
        types.extend(type.__subclasses__(cls))
        if not cls.__flags__ & _HEAP_TYPE:
            for tup in (cls.__bases__, cls.__mro__):
                if gc.is_tracked(tup) and sys.getrefcount(tup) >= immortal:
                    seen.add(id(tup))
    return len(seen)


_HEAP_TYPE: Final = 1 << 9
"""``Py_TPFLAGS_HEAPTYPE``: a class made at run time (static builtin types lack it)."""


class _KeyedDatabase(ExampleDatabase):
    """``database`` with each key under ``prefix``: Hypothesis keys a test by its source, alike for every race."""

    def __init__(self, database: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self.database = database
        self.prefix = prefix

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.database.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self.prefix + src, self.prefix + dest, value)

    def __repr__(self) -> str:
        return f"_KeyedDatabase({self.database!r}, prefix={self.prefix!r})"


def seed_for(seed: int | None, configured: settings, key: str) -> Hashable | None:
    """``seed``; else, under ``derandomize``, ``key``: each search its own fixed seed.

    Hypothesis derandomises a test with a seed from its source, alike for every search `explore` runs.
    """
    if seed is not None:
        return seed
    return key if configured.derandomize else None


def keyed_settings(configured: settings, key: str) -> settings:
    """``configured`` with its database (if any) keeping the failures saved under ``key`` apart from others'."""
    database = configured.database
    if database is None:
        return configured
    return settings(configured, database=_KeyedDatabase(database, key.encode() + b"/"))


def race_test(
    max_examples: int = 100, **explore_options: Any
) -> Callable[[Callable[[Race], Awaitable[Any]]], Callable[[], None]]:
    """Turn ``async def test_x(race)`` into a plain test that explores it (see `explore` for the options).

    Example::

        @race_test(max_examples=100)
        async def test_cache_creates_one_session(race):
            ...
    """

    def decorate(fn: Callable[[Race], Awaitable[Any]]) -> Callable[[], None]:
        @functools.wraps(fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def test() -> None:
            __tracebackhide__ = True
            explore(fn, max_examples=max_examples, **explore_options)

        del test.__wrapped__  # pytest must not see the `race` argument
        return test

    return decorate
