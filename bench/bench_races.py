"""Race-engine benchmark: examples per second, the FIFO ratio to stock asyncio, examples-to-find per bug.

Run from the repository root (not a timed test):

    PYTHONPATH=src:tests python bench/bench_races.py              # speed: examples/s vs stock asyncio
    PYTHONPATH=src:tests python bench/bench_races.py --rounds 5   # ... five rounds, to see the spread
    PYTHONPATH=src:tests python bench/bench_races.py --find 10    # examples to first failure, 10 seeds per bug
    PYTHONPATH=src:tests python bench/bench_races.py --reference 1000   # the reference client and cache pass
    PYTHONPATH=src:tests python bench/bench_races.py --corpus FILE      # the engine's behaviour: write, or compare

Corpus: every scenario with the reference client and every client of tests/contract_clients.py and
tests/race_clients.py, and the session-cache machine with every cache of tests/race_clients.py, under
fixed seeds; one line per controlled loop (per example, found failures' replays included): a digest of
its trace and task names, its decision and deviation counts, the out-of-order steps described, the errors it
collected. The first run writes FILE, later runs compare with it and print the first difference: a change
meant to make the engine faster must leave it identical (under each mcp version: write one file per venv).

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
import os
import re
import statistics
import sys
import time
import weakref
from dataclasses import dataclass
from typing import Any

from hypothesis import Phase

import pytest_fake_mcp._race._explore as explore_module
import pytest_fake_mcp._race._suite as suite_module
from contract_clients import CLIENTS, ReferenceClient
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._race._loop import ControlledLoop
from pytest_fake_mcp.races import RaceFailure, RaceSuite, explore_session_cache, race_settings
from race_clients import BROKEN_CACHES, BROKEN_CLIENTS, ReferenceCache

FIND_MEDIAN = 20
"""Issue 9's budget: each planted bug is found in a median of at most this many examples (and always within 200)."""

SCENARIOS = {
    "concurrent_first_calls": "test_concurrent_first_calls_open_one_session_and_one_http_client",
    "calls_across_session_loss": "test_concurrent_calls_across_a_session_loss_reinitialize_once_per_loss",
    "aclose_racing_first_call": "test_aclose_racing_the_first_call_leaves_nothing_open",
    "caller_cancelled_while_opening": "test_caller_cancelled_while_its_session_opens_leaks_no_session",
    "stateful_mixture": "test_stateful_mixture_of_calls_losses_cancellation_and_close",
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


def bench_find(seeds: int, limit: int) -> None:
    rows = []
    for bug, (client_cls, scenario) in BROKEN_CLIENTS.items():
        counts = []
        for seed in range(seeds):
            original, seeded = _explore_seeded(seed)
            suite_module.explore = seeded
            try:
                with _Counter() as counter, contextlib.suppress(RaceFailure):
                    getattr(_suite(limit, database=None, phases=(Phase.generate,)), SCENARIOS[scenario])(client_cls)
            finally:
                suite_module.explore = original
            counts.append(counter.first_failure)
        rows.append((bug, counts))
    for bug, cache_cls in BROKEN_CACHES.items():
        counts = []
        for seed in range(seeds):
            made = _CountingFactory(cache_cls)
            try:
                explore_session_cache(
                    made,
                    max_examples=limit,
                    seed=seed,
                    settings=race_settings(limit, database=None, phases=(Phase.generate,), report_multiple_bugs=False),
                )
                counts.append(None)
            except RaceFailure:
                counts.append(made.examples - 1)  # Hypothesis runs the failing example once more to report it
        rows.append((bug, counts))
    print(f"budget (issue 9): found in every search, median <= {FIND_MEDIAN} examples, each within {limit}")
    for bug, counts in rows:
        found = [c for c in counts if c is not None]
        median = statistics.median(found) if found else None
        within = len(found) == len(counts) and median is not None and median <= FIND_MEDIAN
        print(
            f"{bug:40s} found {len(found)}/{len(counts)}  median {median}  max {max(found) if found else None}  "
            f"{'within budget' if within else 'OVER BUDGET'}  all {counts}"
        )


class _CountingFactory:
    """A cache factory counting the examples of the session-cache machine (one cache per example)."""

    def __init__(self, cache_cls: type[Any]) -> None:
        self.cache_cls = cache_cls
        self.examples = 0
        self.__qualname__ = cache_cls.__qualname__
        self.__module__ = cache_cls.__module__

    def __call__(self) -> Any:
        self.examples += 1
        return self.cache_cls()


def bench_reference(examples: int) -> None:
    suite = _suite(examples, database=None)
    for name, method in SCENARIOS.items():
        started = time.perf_counter()
        with _Counter() as counter:
            getattr(suite, method)(ReferenceClient)
        print(f"reference client, {name}: {counter.examples} examples passed in {time.perf_counter() - started:.1f}s")
    started = time.perf_counter()
    made = _CountingFactory(ReferenceCache)
    explore_session_cache(made, max_examples=examples, settings=race_settings(examples, database=None))
    print(f"reference SessionCache: {made.examples} examples passed in {time.perf_counter() - started:.1f}s")


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
                    except Exception as exc:  # a found race, or whatever else: it must stay the same too
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
        if want != got:
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
    parser.add_argument("--limit", type=int, default=200, help="examples allowed per search (with --find)")
    parser.add_argument("--reference", type=int, metavar="N", help="run the reference client/cache for N examples")
    parser.add_argument("--corpus", metavar="FILE", help="write the engine's behaviour to FILE, or compare with it")
    args = parser.parse_args(argv)
    if args.corpus:
        sys.exit(bench_corpus(args.corpus))
    elif args.find:
        # The broken clients abandon sessions mid-stream on purpose; the SDK logs each cut as an error.
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        bench_find(args.find, args.limit)
    elif args.reference:
        bench_reference(args.reference)
    else:
        bench_speed(args.examples, args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
