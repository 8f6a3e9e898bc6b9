"""Benchmarks of the fake, as ratios against baselines measured in the same run (never absolute times).

    .venv/bin/python bench/bench_server.py

* per-test cost: leasing a pooled fake (a reset) vs starting and stopping a real SDK server;
* start and stop of a fresh fake listener vs the same for a real SDK server;
* sequential ``tools/call`` throughput of one SDK ``ClientSession`` against the fake vs a real SDK server.

Each figure is the median of several rounds. Run it on an otherwise idle machine; the ratios, not the
milliseconds, are what we track (roadmap: benchmarks live in bench/ as ratios).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _reference_server import reference_server
from pytest_fake_mcp import FakeMCPOptions, FakeMCPServerFactory
from pytest_fake_mcp._app import FakeMCPApp
from pytest_fake_mcp._listener import Listener

ROUNDS = 7
CALLS = 200


def median_seconds(fn: Callable[[], object], rounds: int = ROUNDS) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def fake_start_stop() -> None:
    listener = Listener(FakeMCPApp(FakeMCPOptions()))
    listener.start()
    listener.stop()


def real_start_stop() -> None:
    with reference_server():
        pass


async def sequential_calls(url: str, calls: int) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        asyncio.timeout(120),
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        for i in range(calls):
            await session.call_tool("echo", {"text": str(i)})


def calls_per_second(url: str) -> float:
    seconds = median_seconds(lambda: asyncio.run(sequential_calls(url, CALLS)), rounds=3)
    return CALLS / seconds


def main() -> None:
    factory = FakeMCPServerFactory()
    try:
        with factory.lease():  # the first lease starts the pooled listener
            pass

        def lease() -> None:
            with factory.lease():
                pass

        lease_s = median_seconds(lease, rounds=21)
        real_s = median_seconds(real_start_stop)
        fresh_s = median_seconds(fake_start_stop)
        print(f"per-test lease of a pooled fake: {lease_s * 1000:8.2f} ms")
        print(f"start+stop a real SDK server:    {real_s * 1000:8.2f} ms   (baseline)")
        print(f"start+stop a fresh fake:         {fresh_s * 1000:8.2f} ms")
        print(f"ratio lease / real start+stop:   {lease_s / real_s:8.3f}   (goal: < 0.1)")
        print(f"ratio fresh fake / real:         {fresh_s / real_s:8.3f}   (goal: <= 1.5)")
        with factory.lease() as fake:
            fake_rate = calls_per_second(fake.url)
        with reference_server() as url:
            real_rate = calls_per_second(url)
        print(f"tools/call per second, fake:     {fake_rate:8.1f}")
        print(f"tools/call per second, real SDK: {real_rate:8.1f}   (baseline)")
        print(f"ratio fake / real throughput:    {fake_rate / real_rate:8.3f}   (goal: >= 0.8)")
    finally:
        factory.close()


if __name__ == "__main__":
    main()
