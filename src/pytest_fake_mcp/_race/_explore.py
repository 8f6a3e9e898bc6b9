"""explore: a Hypothesis search over a race scenario's examples, with its settings, database keys and seeds.

`explore` runs `run_example` under ``@given``; `race_test` turns ``async def test_x(race)`` into a plain test
that explores it; `race_settings`, `keyed_settings` and `seed_for` are the settings every search (the
session-cache machine's too) runs under. Settings not given take the loaded profile's (``settings.default``), so
``--hypothesis-profile`` and ``--hypothesis-seed`` work as for any Hypothesis test; the advice Hypothesis adds to
a failure (``@reproduce_failure``, ``@seed``) is rewritten into the arguments that do the same here (`Advice`;
`race_test` and `RaceSuite` run `explore` under `advised_as`, so the advice names them, not `explore`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import re
import sys
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, overload

from hypothesis import HealthCheck, given, reproduce_failure, settings
from hypothesis import seed as pin_seed
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase

from .._compat import mark_hypothesis_test, stacked_hypothesis_decorators
from .._host._inprocess import InProcessFake
from .._record._counters import http_client_hooks_kept
from .._wire._options import FakeMCPOptions
from ._draws import is_reporting
from ._example_run import run_example
from ._search import SearchBudget, ShrinkingTimeUp

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator

    from ._example import Race
    from ._schedule import Schedule
    from ._server_choices import ServerChoices

__all__ = [
    "Advice",
    "advise",
    "advised_as",
    "counts_as_failure",
    "explore",
    "keyed_settings",
    "race_settings",
    "race_test",
    "run_bounded",
    "seed_for",
    "settings_for",
]


def race_settings(max_examples: int | None = None, **kwargs: Any) -> settings:
    """The Hypothesis settings race tests use: no deadline (virtual time), the blob printed, no too_slow check.

    Every setting not given is the loaded profile's (``settings.default``, e.g. ``--hypothesis-profile=nightly``),
    ``max_examples`` included.

    Example::

        explore(scenario, settings=race_settings(500, database=None))
    """
    kwargs.setdefault("deadline", None)
    kwargs.setdefault("print_blob", True)
    kwargs.setdefault("suppress_health_check", [HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    if max_examples is not None:
        kwargs["max_examples"] = max_examples
    return settings(**kwargs)


def settings_for(max_examples: int | None, configured: settings | None) -> settings:
    """``configured`` (default: `race_settings`, on the loaded profile) with ``max_examples``, if given, winning."""
    if configured is None:
        return race_settings(max_examples)
    if max_examples is None:
        return configured
    return settings(configured, max_examples=max_examples)


def explore(
    scenario: Callable[[Race], Awaitable[Any]],
    *,
    max_examples: int | None = None,
    options: FakeMCPOptions | None = None,
    choices: ServerChoices | None = None,
    schedule_strategy: st.SearchStrategy[Schedule] | None = None,
    allow_leftover_tasks: bool = False,
    allow_loop_errors: bool = False,
    database_key: str | None = None,
    settings: settings | None = None,
    seed: int | None = None,
    reproduce: tuple[str, bytes] | None = None,
    shrink_seconds: float | None = None,
    shrink_again: bool | None = None,
) -> None:
    """Run ``scenario(race)`` under up to ``max_examples`` explored schedules; raise on the minimal failure.

    Call it from a plain (sync) test. ``max_examples`` defaults to the loaded Hypothesis profile's (100 unless
    ``--hypothesis-profile`` loads another), and wins over the one in ``settings``. ``settings`` replaces
    `race_settings` (build it with `race_settings`, which keeps the race defaults). ``database_key`` names the
    saved failures (default: the scenario's qualified name), so a rerun replays the last failure first. ``seed``
    pins generation (as ``@hypothesis.seed``; under ``derandomize``, the key is the seed).
    ``reproduce=(version, blob)`` runs exactly the example a failure printed: the failure says which argument to
    add, as ``reproduce=(...)``. ``shrink_seconds`` bounds shrinking: that many wall-clock seconds after the
    first failure, the smallest failing example found so far is reported (default 20, or pytest's
    ``--race-shrink-seconds``). A failure replayed from the database is reported as stored, not shrunk again,
    unless ``shrink_again`` (or pytest's ``--race-shrink-again``).

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
    budget = SearchBudget(shrink_seconds=shrink_seconds, shrink_again=shrink_again)
    advice = _ADVICE.get() or _EXPLORE

    def example(data: Any) -> None:
        __tracebackhide__ = True
        budget.data = data
        budget.check(is_reporting())
        try:
            run_example(
                data,
                scenario,
                options=options,
                choices=choices,
                schedule_strategy=schedule_strategy,
                allow_leftover_tasks=allow_leftover_tasks,
                allow_loop_errors=allow_loop_errors,
                fake=fake,
                remarks=lambda: budget.remarks(advice.setting),
                logs=budget.logs.lines,
            )
        except Exception as error:
            if counts_as_failure(error):
                budget.failed()
            raise

    key = database_key or f"{getattr(scenario, '__module__', '')}.{getattr(scenario, '__qualname__', scenario)}"
    example.__name__ = "race_" + "".join(c if c.isalnum() else "_" for c in key.rsplit(".", 1)[-1])
    example.__qualname__ = example.__name__
    test = given(data=st.data())(example)
    configured = settings_for(max_examples, settings)
    pinned = seed_for(seed, configured, key)
    if pinned is not None:
        test = pin_seed(pinned)(test)  # under the settings: they keep their database
    runner = keyed_settings(configured, key, budget)(test)
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
            with budget.logs:
                run_bounded(runner, budget, advice)
        except BaseException as error:
            advise(error, advice)
            raise
        finally:
            # Collect what the runs left here, not in whichever test runs next.
            gc.collect()
            if frozen:
                gc.unfreeze()


def run_bounded(
    search: Callable[[], None],
    budget: SearchBudget,
    advice: Advice,
    replay: Callable[[tuple[str, bytes]], None] | None = None,
) -> None:
    """``search()``; when ``budget`` stops it (`ShrinkingTimeUp`), ``replay(best)`` runs its smallest failing
    example so far (default: ``search`` under ``@reproduce_failure``), and its failure gets the advice that
    replays it (Hypothesis adds none to a replay)."""
    __tracebackhide__ = True
    try:
        try:
            search()
            return
        except ShrinkingTimeUp:
            best = budget.best
        assert best is not None  # ShrinkingTimeUp is raised only once a failing example was kept
        try:
            if replay is None:
                reproduce_failure(*best)(search)()
            else:
                replay(best)
        except BaseException as error:
            if hasattr(error, "add_note"):
                error.add_note(advice.reproduce(*best).lstrip("\n"))
            raise
    finally:
        budget.release()


def counts_as_failure(error: BaseException) -> bool:
    """Is ``error`` an example's failure (not Hypothesis ending or rejecting it, nor a skip)?"""
    from hypothesis.errors import HypothesisException

    from ._run import is_skip

    return not isinstance(error, HypothesisException) and not is_skip(error)


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
    """``database`` with each key under ``prefix``: Hypothesis keys a test by its source, alike for every race.

    With a ``budget``, it also counts the failures stored for the search (the primary key's, which Hypothesis
    replays first), and under ``shrink_again`` offers them as mere candidates (with the secondary key's), so that
    Hypothesis shrinks them again instead of reporting a stored, already shrunk failure as it is.
    """

    def __init__(self, database: ExampleDatabase, prefix: bytes, budget: SearchBudget | None = None) -> None:
        super().__init__()
        self.database = database
        self.prefix = prefix
        self.budget = budget
        self._hidden: list[bytes] = []

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self.prefix + key, value)
        if self.budget is not None and not key.endswith((_SECONDARY, _PARETO)):
            self.budget.saved()

    def fetch(self, key: bytes) -> Iterable[bytes]:
        values = self.database.fetch(self.prefix + key)
        if self.budget is None or key.endswith(_PARETO):
            return values
        if key.endswith(_SECONDARY):
            return [*self._hidden, *values]
        stored = list(values)
        if self.budget.hides_stored():
            self._hidden = stored
            return []
        self.budget.fetched(len(stored))
        return stored

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self.prefix + src, self.prefix + dest, value)

    def __repr__(self) -> str:
        return f"_KeyedDatabase({self.database!r}, prefix={self.prefix!r})"


_SECONDARY: Final = b".secondary"
_PARETO: Final = b".pareto"
"""The sub-keys Hypothesis fetches besides a test's own (its candidates and its Pareto front): not stored failures."""


def seed_for(seed: int | None, configured: settings, key: str) -> Hashable | None:
    """``seed``; else, under ``derandomize``, ``key``: each search its own fixed seed.

    Hypothesis derandomises a test with a seed from its source, alike for every search `explore` runs.
    """
    if seed is not None:
        return seed
    return key if configured.derandomize else None


def keyed_settings(configured: settings, key: str, budget: SearchBudget | None = None) -> settings:
    """``configured`` with its database (if any) keeping the failures saved under ``key`` apart from others'.

    ``budget`` learns how many failures the database holds for ``key`` (see `SearchBudget`).
    """
    database = configured.database
    if database is None:
        return configured
    return settings(configured, database=_KeyedDatabase(database, key.encode() + b"/", budget))


class Advice:
    """Where a failure's advice puts the values Hypothesis's decorators would take: here, arguments of ``call``.

    ``@reproduce_failure`` and ``@seed`` reach only a ``@given`` test; a race search takes the same values from
    whatever started it (`explore`'s arguments, `race_test`'s, a `RaceSuite` subclass's attributes).
    """

    def __init__(self, call: str) -> None:
        self.call = call

    def reproduce(self, version: str, blob: bytes) -> str:
        """The note that replaces Hypothesis's ``@reproduce_failure(...)`` advice."""
        return (
            f"\nYou can run exactly this example by temporarily adding this argument to {self.call}: "
            f"reproduce=({version!r}, {blob!r})"
        )

    def seed(self, seed: str) -> str:
        """What replaces ``adding @seed(N) to this test`` in Hypothesis's note."""
        return f"passing seed={seed} to {self.call}"

    def setting(self, name: str, value: str) -> str:
        """How a report tells the user to set one of the search's options (``shrink_seconds=60 on explore()``)."""
        return f"{name}={value} on {self.call}"


_EXPLORE: Final = Advice("explore()")
_ADVICE: ContextVar[Advice | None] = ContextVar("race_advice", default=None)
"""Whom `explore`'s failure advice addresses, when `advised_as` names its caller (None: `explore` itself)."""


@contextlib.contextmanager
def advised_as(advice: Advice) -> Iterator[None]:
    """`explore` calls inside the block word a failure's advice for ``advice`` (`race_test`, `RaceSuite`)."""
    token = _ADVICE.set(advice)
    try:
        yield
    finally:
        _ADVICE.reset(token)


_REPRODUCE_ADVICE: Final = re.compile(r"@reproduce_failure\((?P<args>.*)\) as a decorator")
_SEED_ADVICE: Final = re.compile(r"adding @seed\((?P<seed>[^)]*)\) to this test")


def advise(error: BaseException, advice: Advice | str) -> None:
    """Rewrite Hypothesis's advice on ``error`` (``@reproduce_failure``, ``@seed``) for ``advice``.

    A string is the call whose arguments take the values (``"explore_session_cache()"``). A note whose wording
    Hypothesis changed is left as it is (``tests/test_races_hypothesis.py``).
    """
    target = Advice(advice) if isinstance(advice, str) else advice
    errors = [error]
    while errors:
        current = errors.pop()
        if isinstance(current, BaseExceptionGroup):
            errors.extend(current.exceptions)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            current.__notes__ = [_advice(note, target) for note in notes]


def _advice(note: str, advice: Advice) -> str:
    found = _REPRODUCE_ADVICE.search(note)
    if found is not None:
        try:
            version, blob = ast.literal_eval(found["args"])
        except (ValueError, SyntaxError, TypeError):
            return note
        return advice.reproduce(version, blob)
    found = _SEED_ADVICE.search(note)
    if found is not None:
        return note.replace(found[0], advice.seed(found["seed"]))
    return note


@overload
def race_test(fn: Callable[[Race], Awaitable[Any]], /) -> Callable[[], None]: ...


@overload
def race_test(
    *, max_examples: int | None = None, **explore_options: Any
) -> Callable[[Callable[[Race], Awaitable[Any]]], Callable[[], None]]: ...


def race_test(
    fn: Callable[[Race], Awaitable[Any]] | None = None, /, *, max_examples: int | None = None, **explore_options: Any
) -> Callable[[], None] | Callable[[Callable[[Race], Awaitable[Any]]], Callable[[], None]]:
    """Turn ``async def test_x(race)`` into a plain test that explores it (see `explore` for the options).

    Usable bare (``@race_test``) or with `explore`'s options (``@race_test(max_examples=500)``). Without
    ``max_examples`` it runs the loaded Hypothesis profile's (``--hypothesis-profile``). Hypothesis's pytest
    plugin knows it as a Hypothesis test (``--hypothesis-show-statistics``, ``--hypothesis-seed``); its
    settings, seed and replayed example are arguments (``settings=``, ``seed=``, ``reproduce=``), not
    decorators stacked on it.

    Example::

        @race_test
        async def test_cache_creates_one_session(race):
            ...
    """

    def decorate(fn: Callable[[Race], Awaitable[Any]]) -> Callable[[], None]:
        if not callable(fn):
            raise TypeError(
                f"race_test takes explore()'s options as keywords, e.g. @race_test(max_examples=50); got {fn!r}"
            )

        @functools.wraps(fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def test() -> None:
            __tracebackhide__ = True
            stacked = stacked_hypothesis_decorators(test)
            if stacked:
                raise TypeError(
                    f"{fn.__qualname__}: a Hypothesis decorator (@settings, @seed or @reproduce_failure) is stacked "
                    "on @race_test, and cannot reach its search; pass the same value to race_test instead: "
                    "@race_test(settings=race_settings(...)), @race_test(seed=...) or @race_test(reproduce=(...))"
                )
            with advised_as(_RACE_TEST):
                explore(fn, max_examples=max_examples, **explore_options)

        del test.__wrapped__  # pytest must not see the `race` argument
        mark_hypothesis_test(test, fn)  # Hypothesis's pytest plugin reports statistics only for tests it knows
        return test

    if fn is not None:
        return decorate(fn)
    return decorate


_RACE_TEST: Final = Advice("@race_test(...)")
