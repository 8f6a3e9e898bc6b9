"""Race-engine benchmark: examples per second, the FIFO ratio to stock asyncio, examples-to-find per bug.

Run from the repository root (not a timed test):

    PYTHONPATH=src:tests python bench/bench_races.py              # speed: examples/s vs stock asyncio
    PYTHONPATH=src:tests python bench/bench_races.py --rounds 5   # ... five rounds, to see the spread
    PYTHONPATH=src:tests python bench/bench_races.py --find 10    # examples to first failure, 10 seeds per bug
    PYTHONPATH=src:tests python bench/bench_races.py --find 10 --limit 200 --cache-limit 100   # the defaults
    PYTHONPATH=src:tests python bench/bench_races.py --reference 1000   # the reference client and cache pass
    PYTHONPATH=src:tests python bench/bench_races.py --corpus FILE      # the engine's behaviour: write, or compare
    PYTHONPATH=src:tests python bench/bench_races.py --shorten 5        # cache failures shortened, 5 seeds per bug

Find: three tables, one row per planted bug, each searched under seeds 0..SEEDS-1 with generation only (no
shrinking, no database): the broken clients (tests/race_clients.py's ``BROKEN_CLIENTS`` and, bench-local,
``UnsharedCloseClient`` under the two-concurrent-acloses scenario) through their `RaceSuite` scenario within
``--limit`` examples; the team's broken caches (``BROKEN_CACHES``) and the held-out caches
(tests/race_heldout.py's ``HELD_OUT``) through `explore_session_cache` within ``--cache-limit`` examples (100:
Hypothesis's default budget). Per bug: found in N/SEEDS seeds, the median and max examples to the first failure
(a miss counts as above the limit for the median), the median wall-clock seconds of one search, the median
examples it began, and the median first failure counted in valid examples only. Examples are counted as they
begin (`run_example` for the suite, the cache machine's first rule for caches), invalid ones too, so a count
may pass the limit, which counts valid examples only (the "valid" column counts as the limit does); the first
failure's number excludes the replay Hypothesis runs to report it.

Corpus: every scenario with the reference client and every client of tests/contract_clients.py and
tests/race_clients.py, and the session-cache machine with every cache of tests/race_clients.py, under
fixed seeds; one line per controlled loop (per example, found failures' replays included): a digest of
its trace and task names, its decision and deviation counts, the out-of-order steps described, the errors it
collected. The first run writes FILE, later runs compare with it and print the first difference: a change
meant to make the engine faster must leave it identical (under each mcp version: write one file per venv). The
line numbers in where a task stood are not compared (an edit elsewhere in its file moves them).

Shorten: every broken cache (the team's and the held-out ones) searched under seeds 0..SEEDS-1 with Hypothesis's
default phases, shrinking bounded at ``--shrink-seconds``; per bug, the median steps of the program the rules
issued in the run Hypothesis reported, the median steps the shortened report kept (settles included; a
report not shortened keeps them all), the most kept, and the median seconds the shortening took.

Speed: the standard scenario (three concurrent first calls through the reference client and the real
SDK, then aclose) under explored schedules, against the same scenario run with ``asyncio.run`` on stock
asyncio (same in-process fake, no exploration) in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import re
import statistics
import sys
import time
import weakref
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import Phase, Verbosity
from hypothesis.internal.conjecture.data import Status
from hypothesis.internal.conjecture.engine import ConjectureRunner

import pytest_fake_mcp._race._cache_under_test as cache_module
import pytest_fake_mcp._race._explore as explore_module
import pytest_fake_mcp._race._suite as suite_module
from contract_clients import CLIENTS, ReferenceClient
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._race._loop import ControlledLoop
from pytest_fake_mcp._race._machine import _CacheMachineBase
from pytest_fake_mcp.races import RaceFailure, RaceSuite, explore_session_cache, race_settings
from race_clients import BROKEN_CACHES, BROKEN_CLIENTS, ReferenceCache, UnsharedCloseClient
from race_heldout import HELD_OUT, HELD_OUT_CORRECT

FIND_MEDIAN = 20
"""Issue 9's budget: each planted bug is found in a median of at most this many examples (and always within 200)."""

SCENARIOS = {
    "concurrent_first_calls": "test_concurrent_first_calls_open_one_session_and_one_http_client",
    "calls_across_session_loss": "test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss",
    "aclose_racing_first_call": "test_aclose_racing_the_first_call_leaves_nothing_open",
    "caller_cancelled_while_opening": "test_caller_cancelled_while_its_session_opens_leaks_no_session",
    "stateful_mixture": "test_stateful_mixture_of_calls_losses_cancellation_and_close",
    "concurrent_double_aclose": "test_two_concurrent_acloses_on_an_open_session_leave_nothing_open",
    "aclose_racing_a_call": "test_aclose_racing_a_call_on_an_open_session_leaves_nothing_open",
}


class _Counter:
    """Counts examples (runs of `run_example`) and the number of the first failing one."""

    def __init__(self) -> None:
        self.examples = 0
        self.first_failure: int | None = None
        self._original = explore_module.run_example

    def __enter__(self) -> _Counter:
        def counting(*args: Any, **kwargs: Any) -> Any:
            self.examples += 1
            try:
                return self._original(*args, **kwargs)
            except RaceFailure:
                if self.first_failure is None:
                    self.first_failure = self.examples
                raise

        explore_module.run_example = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        explore_module.run_example = self._original  # type: ignore[assignment]


def _suite(examples: int, **settings: Any) -> RaceSuite:
    cls = type("BenchRaces", (RaceSuite,), {"max_examples": examples, "hypothesis_settings": settings})
    return cls()  # type: ignore[no-any-return]


def _explore_seeded(seed: int) -> Any:
    original = suite_module.explore

    def seeded(*args: Any, **kwargs: Any) -> Any:
        kwargs["seed"] = seed
        return original(*args, **kwargs)

    return original, seeded


async def _stock_scenario(url: str) -> None:
    client = ReferenceClient(url)
    callers = []
    for i in range(3):
        if i:
            for _ in range(3):
                await asyncio.sleep(0)
        callers.append(asyncio.ensure_future(client.call_tool("echo", {"text": f"c{i}"})))
    await asyncio.wait(callers)
    await client.aclose()


@dataclass(frozen=True)
class Speed:
    """One round: ``examples`` explored examples of the standard scenario, then as many stock-asyncio runs."""

    examples: int
    explored_wall: float
    explored_cpu: float
    runs: int
    stock_wall: float
    stock_cpu: float

    @property
    def rate(self) -> float:
        return self.examples / self.explored_wall

    @property
    def cpu_rate(self) -> float:
        return self.examples / self.explored_cpu

    @property
    def stock_rate(self) -> float:
        return self.runs / self.stock_wall

    @property
    def stock_cpu_rate(self) -> float:
        return self.runs / self.stock_cpu


def measure_speed(examples: int, rounds: int = 1) -> list[Speed]:
    """``rounds`` rounds, each the explored scenario then the stock-asyncio run of it, back to back.

    bench/run.py's race row calls this too.
    """
    suite = _suite(examples, database=None, phases=(Phase.generate,))
    suite.test_concurrent_first_calls_open_one_session_and_one_http_client(ReferenceClient)  # warm up imports
    with InProcessFake() as fake:
        asyncio.run(_stock_scenario(fake.url))
    speeds = []
    for _ in range(rounds):
        with _Counter() as counter:
            wall, cpu = time.perf_counter(), time.process_time()
            suite.test_concurrent_first_calls_open_one_session_and_one_http_client(ReferenceClient)
            explored_wall, explored_cpu = time.perf_counter() - wall, time.process_time() - cpu
        runs = counter.examples
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(runs):
            with InProcessFake() as fake:
                asyncio.run(_stock_scenario(fake.url))
        speeds.append(
            Speed(
                counter.examples,
                explored_wall,
                explored_cpu,
                runs,
                time.perf_counter() - wall,
                time.process_time() - cpu,
            )
        )
    return speeds


def bench_speed(examples: int, rounds: int) -> None:
    print(f"load average (1, 5, 15 min) at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for speed in measure_speed(examples, rounds):
        print(
            f"explored: {speed.examples} examples in {speed.explored_wall:.2f}s = {speed.rate:.0f} examples/s "
            f"({speed.cpu_rate:.0f}/s of CPU time); stock asyncio FIFO, same scenario and fake: "
            f"{speed.stock_rate:.0f} runs/s ({speed.stock_cpu_rate:.0f}/s of CPU time); "
            f"ratio {speed.rate / speed.stock_rate:.2f}"
        )
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


FIND_CLIENTS: dict[str, tuple[type[Any], str]] = {
    **BROKEN_CLIENTS,
    # issue 23: bench-local (tests/race_clients.py's table feeds the suite's own tests, which meet it elsewhere)
    "unshared aclose (double close)": (UnsharedCloseClient, "concurrent_double_aclose"),
}
"""The broken clients ``--find`` measures: (client class, the RaceSuite scenario that must find it)."""


class _MachineCounter:
    """Counts examples of the session-cache machine (its first rule, ``_start``) and the number of the first
    failing one (the first ``_fail``): the replay Hypothesis runs to report the failure comes after it."""

    def __init__(self) -> None:
        self.examples = 0
        self.first_failure: int | None = None
        self._start = _CacheMachineBase._start
        self._fail = _CacheMachineBase._fail

    def __enter__(self) -> _MachineCounter:
        start, fail = self._start, self._fail

        def counting_start(machine: Any, *args: Any, **kwargs: Any) -> None:
            self.examples += 1
            start(machine, *args, **kwargs)

        def counting_fail(machine: Any, *args: Any, **kwargs: Any) -> None:
            if self.first_failure is None:
                self.first_failure = self.examples
            fail(machine, *args, **kwargs)

        _CacheMachineBase._start = counting_start  # type: ignore[method-assign,assignment]
        _CacheMachineBase._fail = counting_fail  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        _CacheMachineBase._start = self._start  # type: ignore[method-assign]
        _CacheMachineBase._fail = self._fail  # type: ignore[method-assign]


class _ValidCounter:
    """Counts the examples Hypothesis's runner judged valid (its ``max_examples`` counts these) and the number of
    the first failing one, from the status of each test case its engine ran (the reporting replay is not one)."""

    def __init__(self) -> None:
        self.valid = 0
        self.first_failure: int | None = None
        self._original = ConjectureRunner.test_function

    def __enter__(self) -> _ValidCounter:
        original = self._original

        def counting(runner: ConjectureRunner, data: Any) -> None:
            try:
                original(runner, data)
            finally:
                if data.status >= Status.VALID:
                    self.valid += 1
                if data.status == Status.INTERESTING and self.first_failure is None:
                    self.first_failure = self.valid

        ConjectureRunner.test_function = counting  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        ConjectureRunner.test_function = self._original  # type: ignore[method-assign]


@dataclass(frozen=True)
class Found:
    """One search: the example that first failed (None: none within the limit) and its wall-clock seconds."""

    first_failure: int | None
    seconds: float
    began: int
    """Examples begun in the search, the reporting replay included (Hypothesis's limit counts valid examples only)."""
    valid_first_failure: int | None
    """The first failure's number among the valid examples only (Hypothesis's count)."""


def _find_client(client_cls: type[Any], scenario: str, seed: int, limit: int) -> Found:
    original, seeded = _explore_seeded(seed)
    suite_module.explore = seeded
    started = time.perf_counter()
    try:
        with _ValidCounter() as valid, _Counter() as counter, contextlib.suppress(RaceFailure):
            getattr(_suite(limit, database=None, phases=(Phase.generate,)), SCENARIOS[scenario])(client_cls)
    finally:
        suite_module.explore = original
    return Found(counter.first_failure, time.perf_counter() - started, counter.examples, valid.first_failure)


def _find_cache(cache_cls: type[Any], seed: int, limit: int) -> Found:
    started = time.perf_counter()
    with _ValidCounter() as valid, _MachineCounter() as counter:
        try:
            explore_session_cache(
                cache_cls,
                max_examples=limit,
                seed=seed,
                settings=race_settings(limit, database=None, phases=(Phase.generate,), report_multiple_bugs=False),
            )
        except RaceFailure:
            if counter.first_failure is None:  # a failure raised past `_fail`: the last example is its replay
                counter.first_failure = counter.examples - 1
    return Found(counter.first_failure, time.perf_counter() - started, counter.examples, valid.first_failure)


def _print_table(title: str, rows: list[tuple[str, list[Found]]], limit: int) -> None:
    print(f"\n{title} (within {limit} examples per search; a miss counts as >{limit} for the median)")
    print(
        f"{'bug':44s} {'found':>7s} {'median':>7s} {'max':>6s} {'s/search':>9s} {'began':>6s} {'valid':>6s}  per seed"
    )
    for bug, results in rows:
        counts = [r.first_failure for r in results]
        found = [c for c in counts if c is not None]
        median = statistics.median([math.inf if c is None else c for c in counts])
        shown = f">{limit}" if median == math.inf else f"{median:g}"
        seconds = statistics.median(r.seconds for r in results)
        began = statistics.median(r.began for r in results)
        valid = statistics.median(
            [math.inf if r.valid_first_failure is None else r.valid_first_failure for r in results]
        )
        valid_shown = f">{limit}" if valid == math.inf else f"{valid:g}"
        within = len(found) == len(counts) and median <= FIND_MEDIAN
        print(
            f"{bug:44s} {len(found):>3d}/{len(counts):<3d} {shown:>7s} {max(found) if found else '-':>6} "
            f"{seconds:>9.2f} {began:>6g} {valid_shown:>6s}  {'within budget' if within else 'OVER BUDGET'}  "
            f"{['-' if c is None else c for c in counts]}"
        )


def bench_find(seeds: int, limit: int, cache_limit: int) -> None:
    started = time.perf_counter()
    print(f"load average (1, 5, 15 min) at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"budget: found in every search, median <= {FIND_MEDIAN} examples (issue 9; issue 23: >= 9/10 seeds)")
    clients = [
        (bug, [_find_client(client_cls, scenario, seed, limit) for seed in range(seeds)])
        for bug, (client_cls, scenario) in FIND_CLIENTS.items()
    ]
    _print_table("clients (RaceSuite)", clients, limit)
    caches = [
        (bug, [_find_cache(cache_cls, seed, cache_limit) for seed in range(seeds)])
        for bug, cache_cls in BROKEN_CACHES.items()
    ]
    _print_table("the team's caches (explore_session_cache)", caches, cache_limit)
    held_out = [
        (bug, [_find_cache(cache_cls, seed, cache_limit) for seed in range(seeds)])
        for bug, cache_cls in HELD_OUT.items()
    ]
    _print_table("held-out caches (explore_session_cache)", held_out, cache_limit)
    print(f"\nload average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"total {time.perf_counter() - started:.0f}s")


@dataclass(frozen=True)
class Shortened:
    """One cache search's failure: the steps its reported run's rules issued, those its report kept, and the
    seconds the shortening took (0 if the search passed)."""

    steps: int
    kept: int
    seconds: float


_SHORTENED = re.compile(r"The program, shortened: (\d+) of the (\d+) steps")


def _shorten_cache(cache_cls: type[Any], seed: int, shrink_seconds: float) -> Shortened | None:
    taken: list[tuple[int, float]] = []
    original = cache_module._Shortening.of

    def timed(shortening: Any, error: RaceFailure) -> Any:
        steps = len(shortening.last[1].steps) if shortening.last is not None else 0
        started = time.perf_counter()
        try:
            return original(shortening, error)
        finally:
            taken.append((steps, time.perf_counter() - started))

    cache_module._Shortening.of = timed  # type: ignore[method-assign]
    try:
        quiet = race_settings(database=None, verbosity=Verbosity.quiet)  # Hypothesis's own printing left out
        explore_session_cache(cache_cls, seed=seed, shrink_seconds=shrink_seconds, settings=quiet)
    except RaceFailure as failure:
        if not taken:
            return None
        steps, seconds = taken[-1]
        found = _SHORTENED.search(str(failure))
        return Shortened(steps, steps - int(found[1]) if found else steps, seconds)
    finally:
        cache_module._Shortening.of = original  # type: ignore[method-assign]
    return None


def bench_shorten(seeds: int, shrink_seconds: float) -> None:
    started = time.perf_counter()
    print(f"load average (1, 5, 15 min) at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"shrinking bounded at {shrink_seconds:g} s; steps of the reported program -> steps its report kept")
    print(f"{'bug':44s} {'failed':>7s} {'steps':>6s} {'kept':>5s} {'max':>4s} {'s':>5s}  per seed (steps->kept)")
    for bug, cache_cls in {**BROKEN_CACHES, **HELD_OUT}.items():
        runs = [_shorten_cache(cache_cls, seed, shrink_seconds) for seed in range(seeds)]
        done = [r for r in runs if r is not None]
        if not done:
            print(f"{bug:44s} {0:>3d}/{seeds:<3d}")
            continue
        print(
            f"{bug:44s} {len(done):>3d}/{seeds:<3d} {statistics.median(r.steps for r in done):>6g} "
            f"{statistics.median(r.kept for r in done):>5g} {max(r.kept for r in done):>4d} "
            f"{statistics.median(r.seconds for r in done):>5.1f}  "
            f"{['-' if r is None else f'{r.steps}->{r.kept}' for r in runs]}"
        )
    print(f"\nload average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"total {time.perf_counter() - started:.0f}s")


def _first_lines(failure: BaseException, lines: int = 30) -> str:
    return "\n".join(f"    {line}" for line in str(failure).splitlines()[:lines])


def bench_reference(examples: int) -> int:
    """The reference client under every scenario, the reference cache and the held-out correct caches: each must
    pass ``examples`` examples (a failure is a false alarm: its first 30 lines are printed, the exit status is 1)."""
    failures = 0
    suite = _suite(examples, database=None)
    for name, method in SCENARIOS.items():
        started = time.perf_counter()
        with _Counter() as counter:
            try:
                getattr(suite, method)(ReferenceClient)
                outcome = "passed"
            except RaceFailure as failure:
                failures += 1
                outcome = f"FAILED (false alarm):\n{_first_lines(failure)}"
        print(
            f"reference client, {name}: {counter.examples} examples {outcome} in {time.perf_counter() - started:.1f}s"
        )
    for name, cache_cls in {"reference SessionCache": ReferenceCache, **HELD_OUT_CORRECT}.items():
        started = time.perf_counter()
        with _MachineCounter() as machine:
            try:
                explore_session_cache(cache_cls, max_examples=examples, settings=race_settings(examples, database=None))
                outcome = "passed"
            except RaceFailure as failure:
                failures += 1
                outcome = f"FAILED (false alarm) at example {machine.first_failure}:\n{_first_lines(failure)}"
        print(f"{name}: {machine.examples} examples {outcome} in {time.perf_counter() - started:.1f}s")
    return 1 if failures else 0


CORPUS_SEEDS = (0, 1)
CORPUS_EXAMPLES = 12
"""Examples of each search: a few, so the corpus runs in under a minute."""
CORPUS_LONG = 200
"""Examples of the one long search (the standard scenario, the reference client): Hypothesis draws larger
examples as a search goes on, which short searches never reach."""


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _loop_record(loop: ControlledLoop) -> dict[str, Any]:
    """What must not change when the loop gets faster: every step it ran and every choice it offered."""
    errors = []
    for context in loop.errors:
        exc = context.get("exception")
        message = re.sub(r" at 0x[0-9a-f]+", "", str(context.get("message", "")))  # an address differs per run
        errors.append(f"{message} {type(exc).__name__ if exc is not None else ''}")
    return {
        "trace": _digest(loop.trace),
        "steps": loop.steps,
        "decisions": loop.decisions,
        "deviation_count": loop.deviation_count,
        "deviations": [repr(d) for d in loop.deviations],
        "names": _digest(sorted(loop.names.items())),
        "virtual_time": loop.time(),
        "errors": errors,
    }


def run_corpus() -> list[dict[str, Any]]:
    """One record per controlled loop closed while every search of the corpus runs (see the module docstring)."""
    records: list[dict[str, Any]] = []
    search = ""
    original_close, original_shutdown = ControlledLoop.close, ControlledLoop.shutdown_asyncgens
    recorded: weakref.WeakSet[ControlledLoop] = weakref.WeakSet()

    def record(loop: ControlledLoop) -> None:
        if loop not in recorded and not loop.is_closed():
            recorded.add(loop)
            records.append({"search": search, **_loop_record(loop)})

    def recording_close(loop: ControlledLoop) -> None:
        record(loop)
        original_close(loop)

    async def recording_shutdown(loop: ControlledLoop) -> None:
        # Recorded before: the generators left open are closed in the order of a WeakSet (by address).
        record(loop)
        await original_shutdown(loop)

    clients = dict(CLIENTS)
    for client_cls, _ in BROKEN_CLIENTS.values():
        clients.setdefault(client_cls.__name__, client_cls)
    ControlledLoop.close = recording_close  # type: ignore[method-assign]
    ControlledLoop.shutdown_asyncgens = recording_shutdown  # type: ignore[method-assign]
    try:
        for seed in CORPUS_SEEDS:
            original, seeded = _explore_seeded(seed)
            suite_module.explore = seeded
            try:
                searches = [
                    (scenario, method, name, CORPUS_EXAMPLES)
                    for scenario, method in SCENARIOS.items()
                    for name in sorted(clients)
                ]
                if seed == CORPUS_SEEDS[0]:
                    searches.append(
                        ("concurrent_first_calls", SCENARIOS["concurrent_first_calls"], "ReferenceClient", CORPUS_LONG)
                    )
                for scenario, method, name, examples in searches:
                    search = f"seed {seed} {scenario} {name} ({examples} examples)"
                    suite = _suite(examples, database=None, phases=(Phase.generate,))
                    outcome = "passed"
                    try:
                        getattr(suite, method)(clients[name])
                    except (Exception, pytest.skip.Exception) as exc:  # a race, a skip or else: it must stay too
                        outcome = type(exc).__name__
                    records.append({"search": search, "outcome": outcome})
            finally:
                suite_module.explore = original
            for cache_cls in (ReferenceCache, *BROKEN_CACHES.values()):
                search = f"seed {seed} session cache {cache_cls.__name__}"
                outcome = "passed"
                try:
                    explore_session_cache(
                        cache_cls,
                        max_examples=CORPUS_EXAMPLES,
                        seed=seed,
                        settings=race_settings(CORPUS_EXAMPLES, database=None, phases=(Phase.generate,)),
                    )
                except Exception as exc:
                    outcome = type(exc).__name__
                records.append({"search": search, "outcome": outcome})
    finally:
        ControlledLoop.close = original_close  # type: ignore[method-assign]
        ControlledLoop.shutdown_asyncgens = original_shutdown  # type: ignore[method-assign]
    return records


_SOURCE_LINE = re.compile(r"(\w+\.py):\d+")
"""Where a task stood, as ``_machine.py:483``: compared without the line, which an edit elsewhere in the file moves."""


def bench_corpus(path: str) -> int:
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    started = time.perf_counter()
    records = run_corpus()
    elapsed = time.perf_counter() - started
    lines = [json.dumps(record, sort_keys=True) for record in records]
    loops = sum("trace" in record for record in records)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"corpus written to {path}: {loops} runs in {len(records) - loops} searches ({elapsed:.1f}s)")
        return 0
    with open(path) as f:
        expected = f.read().splitlines()
    for number, (want, got) in enumerate(zip(expected, lines, strict=False), 1):
        if _SOURCE_LINE.sub(r"\1:#", want) != _SOURCE_LINE.sub(r"\1:#", got):
            print(f"corpus differs from {path} at line {number}:\n  expected {want}\n  got      {got}")
            return 1
    if len(expected) != len(lines):
        print(f"corpus differs from {path}: {len(expected)} lines expected, {len(lines)} now")
        return 1
    print(f"corpus identical to {path}: {loops} runs in {len(records) - loops} searches ({elapsed:.1f}s)")
    return 0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1, help="speed rounds (explored, then stock, each round)")
    parser.add_argument("--find", type=int, metavar="SEEDS", help="examples to first failure per broken client")
    parser.add_argument("--limit", type=int, default=200, help="examples allowed per client search (with --find)")
    parser.add_argument(
        "--cache-limit",
        type=int,
        default=100,
        help="examples allowed per cache search (with --find; Hypothesis's default)",
    )
    parser.add_argument("--reference", type=int, metavar="N", help="run the reference client/cache for N examples")
    parser.add_argument("--corpus", metavar="FILE", help="write the engine's behaviour to FILE, or compare with it")
    parser.add_argument("--shorten", type=int, metavar="SEEDS", help="cache failures shortened, SEEDS seeds per bug")
    parser.add_argument("--shrink-seconds", type=float, default=5.0, help="the shrinking bound (with --shorten)")
    args = parser.parse_args(argv)
    if args.corpus:
        sys.exit(bench_corpus(args.corpus))
    elif args.find:
        # The broken clients abandon sessions mid-stream on purpose; the SDK logs each cut as an error.
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        bench_find(args.find, args.limit, args.cache_limit)
    elif args.shorten:
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        bench_shorten(args.shorten, args.shrink_seconds)
    elif args.reference:
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        sys.exit(bench_reference(args.reference))
    else:
        bench_speed(args.examples, args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
