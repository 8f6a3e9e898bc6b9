"""Soak and flake hunting.

    python bench/soak.py fixture --uses 1000   # lease the fake 1,000 times, a real SDK session each; count leftovers
    python bench/soak.py suite --runs 20       # the whole suite N times, random order, -n 2; every test that failed

``fixture`` does what the ``fake_mcp_server`` fixture does per test (a lease of the session's factory: reset,
then the teardown checks) with an SDK ``ClientSession`` that initializes, calls ``echo`` and closes, and a dropped
session every tenth use. It counts threads, file descriptors, sockets, asyncio tasks and listeners after a
warm-up and at the end, and exits 1 if any grew.

``suite`` runs ``pytest -n 2 -p randomly`` N times with a fresh random seed each, keeps each run's JUnit XML,
and prints every test that ever failed or errored, with the runs and seeds; it exits 1 if any did.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _resources(loop: asyncio.AbstractEventLoop, listeners: int) -> dict[str, int]:
    fds = os.listdir("/proc/self/fd")
    sockets = sum(1 for fd in fds if _link(fd).startswith("socket:"))
    return {
        "threads": threading.active_count(),
        "file descriptors": len(fds),
        "sockets": sockets,
        "asyncio tasks": len([t for t in asyncio.all_tasks(loop) if not t.done()]),
        "listeners": listeners,
    }


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed by now
        return ""


async def _fixture_soak(uses: int, warmup: int) -> int:
    from _sdk import SDKError, sdk_session
    from pytest_fake_mcp import FakeMCPServerFactory

    logging.getLogger("mcp").setLevel(logging.ERROR)  # "Session termination failed: 404" after each drop
    loop = asyncio.get_running_loop()
    started = loop.time()
    factory = FakeMCPServerFactory()
    baseline: dict[str, int] = {}
    try:
        for use in range(uses):
            with factory.lease() as server:
                async with asyncio.timeout(20), sdk_session(server.url) as session:
                    await session.call_tool("echo", {"text": str(use)})
                    if use % 10 == 9:
                        server.drop_session()
                        with contextlib.suppress(SDKError):
                            await session.call_tool("echo", {"text": "gone"})
            if use + 1 == warmup:
                await asyncio.sleep(0)
                baseline = _resources(loop, factory.started)
        await asyncio.sleep(0)
        final = _resources(loop, factory.started)
    finally:
        factory.close()
    print(f"{uses} fixture uses in {loop.time() - started:.0f}s (baseline taken after {warmup}):")
    grew = []
    for name, before in baseline.items():
        after = final[name]
        print(f"  {name:17} {before:5} -> {after:5}")
        if after > before:
            grew.append(name)
    print("nothing left behind" if not grew else f"LEFT BEHIND: {', '.join(grew)}")
    return 1 if grew else 0


def _suite(runs: int, extra: list[str]) -> int:
    failures: dict[str, list[tuple[int, int]]] = defaultdict(list)
    totals = []
    with tempfile.TemporaryDirectory(prefix="soak-") as out:
        for run in range(1, runs + 1):
            seed = random.randrange(2**32)
            report = Path(out) / f"run-{run}.xml"
            command = [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", f"--randomly-seed={seed}"]
            command += [f"--junitxml={report}", "-q", *extra]
            completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            cases = ET.parse(report).getroot().iter("testcase") if report.exists() else iter(())
            count = 0
            for case in cases:
                count += 1
                if case.find("failure") is not None or case.find("error") is not None:
                    failures[f"{case.get('classname')}::{case.get('name')}"].append((run, seed))
            totals.append(count)
            last = completed.stdout.strip().splitlines()[-1:] or [f"exit {completed.returncode}"]
            print(f"run {run:2}/{runs} seed {seed:10}: {last[0]}", flush=True)
    print(f"{runs} runs, {min(totals, default=0)}..{max(totals, default=0)} tests each")
    if not failures:
        print("no test ever failed")
        return 0
    for test, where in sorted(failures.items()):
        print(f"FAILED {len(where)}x {test}: " + ", ".join(f"run {r} (seed {s})" for r, s in where))
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fixture = commands.add_parser("fixture", help="lease the fake N times and count what is left behind")
    fixture.add_argument("--uses", type=int, default=1000)
    fixture.add_argument("--warmup", type=int, default=20)
    suite = commands.add_parser("suite", help="run the whole suite N times in random order under -n 2")
    suite.add_argument("--runs", type=int, default=20)
    suite.add_argument("pytest_args", nargs="*", help="extra pytest arguments (e.g. a test path)")
    args = parser.parse_args(argv)
    if args.command == "fixture":
        return asyncio.run(_fixture_soak(args.uses, args.warmup))
    return _suite(args.runs, args.pytest_args)


if __name__ == "__main__":
    sys.exit(main())
