"""The fake's benchmarks: a table of ratios, each against a baseline measured in the same run.

    PYTHONPATH=src .venv/bin/python bench/run.py            # the table
    PYTHONPATH=src .venv/bin/python bench/run.py --check    # ... and exit 1 if a goal is missed
    PYTHONPATH=src .venv/bin/python bench/run.py --only start,throughput --rounds 3

Sections (docs/performance.md explains each and its goal):

* ``pytest``: N trivial tests using ``fake_mcp_server`` against N not using it, each set in one pytest process;
* ``start``: start+stop of a fresh fake listener against the same for a real SDK server;
* ``throughput``: the real mcp 2.x client against ``fake-mcp serve``, a real SDK server and a floor server
  (a canned raw-ASGI endpoint under the same uvicorn, fixed bytes, no logic; and, for information, the same
  floor sending each answer in one write as the fake does), each in its own process:
  sequential calls, concurrent sessions and session setup, in SSE and JSON modes;
* ``scale``: 1,000 concurrent sessions and 10,000 calls through one ``fake-mcp serve``: errors, memory per
  idle session, and the server's CPU per call with 1,000 live sessions against 10 (wall time for information);
* ``races``: examples per second the race engine explores of the standard scenario (three concurrent first
  calls through the reference client and the real SDK, then ``aclose``), against the same scenario run on
  stock asyncio with the same in-process fake (bench/bench_races.py's measurement).

Rounds of the compared runs are interleaved and every figure is a median, because the absolute numbers
move with whatever else the machine runs; the ratios are what we track.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
if not os.environ.get("PYTHONPATH"):  # a PYTHONPATH given names the copy to measure (e.g. a checkout of main)
    os.environ["PYTHONPATH"] = str(ROOT / "src")
    sys.path.insert(0, str(ROOT / "src"))
PYTHON = sys.executable
ENV = dict(os.environ)


@dataclass
class Row:
    """One line of the table: a figure, its baseline, their ratio and the goal it is held to."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    goal: str = ""
    ok: bool | None = None
    paired: float | None = None
    """The median of per-round ratios (each round measures both back to back), when there are rounds."""

    @property
    def ratio(self) -> float | None:
        if self.paired is not None:
            return self.paired
        return None if not self.baseline else self.value / self.baseline


ROWS: list[Row] = []


def row(row: Row) -> None:
    ROWS.append(row)
    print(_format(row), flush=True)


def _format(r: Row) -> str:
    ratio = "" if r.ratio is None else f"{r.ratio:8.3f}"
    base = "" if r.baseline is None else f"{r.baseline:10.2f} {r.unit:<6} {r.baseline_name}"
    mark = {None: "", True: "ok", False: "MISSED"}[r.ok]
    return f"{r.name:<42} {r.value:10.2f} {r.unit:<6} {ratio:>8}   {base:<34} {r.goal:<22} {mark}"


def header() -> None:
    print(f"{'figure':<42} {'value':>10} {'unit':<6} {'ratio':>8}   {'baseline':<34} {'goal':<22}")
    print("-" * 126)


def median(samples: list[float]) -> float:
    return statistics.median(samples)


# --- per-test cost through pytest ---------------------------------------------------------------------


_WITH = """
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i, fake_mcp_server):
    pass
"""
_WITHOUT = """
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    pass
"""


def bench_pytest(rounds: int, n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="fake-mcp-bench-") as tmp:
        directory = Path(tmp)
        (directory / "pytest.ini").write_text("[pytest]\n")
        (directory / "test_with.py").write_text(_WITH.format(n=n))
        (directory / "test_without.py").write_text(_WITHOUT.format(n=n))

        # As on a user's machine, compiled (and assertion-rewritten) modules are cached between runs; the cache
        # goes to this run's directory, and a first run of each file fills it.
        env = {k: v for k, v in ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(directory / "pycache")

        def run(name: str, wall: list[float], cpu: list[float]) -> None:
            command = [PYTHON, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", name]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, check=False)
            wall.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode != 0:
                raise SystemExit(f"pytest {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")

        with_s, without_s, with_cpu, without_cpu = [], [], [], []
        run("test_without.py", [], [])
        run("test_with.py", [], [])
        for _ in range(rounds):
            run("test_without.py", without_s, without_cpu)
            run("test_with.py", with_s, with_cpu)
    with_m, without_m = median(with_s), median(without_s)
    per_test = (with_m - without_m) / n * 1000
    per_test_cpu = (median(with_cpu) - median(without_cpu)) / n * 1000
    row(Row(f"pytest: {n} tests without the fixture", without_m, "s"))
    row(Row(f"pytest: {n} tests with fake_mcp_server", with_m, "s", without_m, "without"))
    row(Row("pytest: cost per test of the fixture", per_test, "ms", goal="<= 0.5 ms", ok=per_test <= 0.5))
    row(Row("pytest: ... in CPU time (less noisy)", per_test_cpu, "ms", goal="<= 0.5 ms", ok=per_test_cpu <= 0.5))
    client = _client_construction_ms(rounds * 2)
    row(Row("a user's httpx.AsyncClient() built and closed", client, "ms", per_test, "fixture per test", "(info)"))


def _client_construction_ms(rounds: int) -> float:
    """What one HTTP client costs a test that builds its own (mostly its TLS context): the fixture's yardstick."""
    import httpx

    async def build() -> None:
        client = httpx.AsyncClient()
        await client.aclose()

    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        asyncio.run(build())
        samples.append(time.perf_counter() - start)
    return median(samples) * 1000


# --- start and stop ----------------------------------------------------------------------------------


def bench_start(rounds: int) -> None:
    from _reference_server import reference_server
    from pytest_fake_mcp import FakeMCPOptions
    from pytest_fake_mcp._fake._app import FakeMCPApp
    from pytest_fake_mcp._host._listener import Listener

    def fake() -> None:
        listener = Listener(FakeMCPApp(FakeMCPOptions()))
        listener.start()
        listener.stop()

    def real() -> None:
        with reference_server():
            pass

    fake()
    real()  # imports and first-use costs out of the way
    fake_s, real_s = [], []
    for _ in range(rounds):
        for fn, samples in ((fake, fake_s), (real, real_s)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    fake_ms, real_ms = median(fake_s) * 1000, median(real_s) * 1000
    row(Row("start+stop: real SDK server", real_ms, "ms"))
    ok = fake_ms <= 10 and fake_ms <= real_ms / 10
    row(Row("start+stop: fresh fake", fake_ms, "ms", real_ms, "real SDK", "<= 10 ms, <= 0.1", ok))


# --- throughput against the real server and the floor, each in its own process -------------------------


@contextlib.contextmanager
def served(kind: str, json_response: bool) -> Iterator[tuple[str, int]]:
    """A server of ``kind`` (fake, real, floor) in its own process; yields its URL and pid."""
    mode = ["--json"] if json_response else []
    if kind == "fake":
        command = [PYTHON, "-m", "pytest_fake_mcp", "serve", "--port", "0", *mode]
    else:
        command = [PYTHON, str(ROOT / "bench" / "_serve.py"), kind, *mode]
    # The real SDK server logs tracebacks when a client closes a session mid-request; not ours to show.
    process = subprocess.Popen(
        command, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"{kind} server did not start: {url!r}")
        yield url, process.pid
    finally:
        if kind == "fake":
            process.terminate()
        assert process.stdin is not None
        process.stdin.close()
        process.wait(30)
        assert process.stdout is not None
        process.stdout.close()


@contextlib.asynccontextmanager
async def mcp_session(url: str) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


async def sequential(url: str, calls: int) -> tuple[int, float]:
    async with mcp_session(url) as session:
        await session.call_tool("echo", {"text": "warm"})
        start = time.perf_counter()
        for i in range(calls):
            await session.call_tool("echo", {"text": str(i)})
        return calls, time.perf_counter() - start


async def concurrent(url: str, sessions: int, calls: int) -> tuple[int, float]:
    async def one(ready: asyncio.Event, go: asyncio.Event, counter: list[int]) -> None:
        async with mcp_session(url) as session:
            await session.call_tool("echo", {"text": "warm"})
            counter.append(1)
            if len(counter) == sessions:
                ready.set()
            await go.wait()
            for i in range(calls):
                await session.call_tool("echo", {"text": str(i)})

    ready, go, counter = asyncio.Event(), asyncio.Event(), []
    tasks = [asyncio.ensure_future(one(ready, go, counter)) for _ in range(sessions)]
    await asyncio.wait_for(ready.wait(), 120)
    start = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return sessions * calls, time.perf_counter() - start


async def setup(url: str, sessions: int) -> tuple[int, float]:
    start = time.perf_counter()
    for _ in range(sessions):
        async with mcp_session(url):
            pass
    return sessions, time.perf_counter() - start


def _cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid`` (all its threads) so far: nanoseconds from the scheduler where it tells them,
    else clock ticks (10 ms, too coarse for a per-call figure)."""
    try:
        return (
            sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9
        )
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_throughput(rounds: int, scale: float) -> None:
    calls, sessions, per_session, setups = int(300 * scale), 20, int(20 * scale), int(40 * scale)
    kinds = ("fake", "real", "floor", "floor-one-write")
    for json_response in (False, True):
        mode = "json" if json_response else "sse"
        rates: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        measures: dict[str, Callable[[str], Awaitable[tuple[int, float]]]] = {
            "sequential": lambda url: sequential(url, calls),
            "concurrent": lambda url: concurrent(url, sessions, per_session),
            "setup": lambda url: setup(url, setups),
        }
        with contextlib.ExitStack() as stack:
            servers = {kind: stack.enter_context(served(kind, json_response)) for kind in kinds}
            for _ in range(rounds):
                for what, measure in measures.items():
                    for kind in kinds:
                        url, pid = servers[kind]

                        async def timed(
                            m: Callable[[str], Awaitable[tuple[int, float]]] = measure, u: str = url
                        ) -> tuple[int, float]:
                            return await asyncio.wait_for(m(u), 300)

                        before = _cpu_seconds(pid)
                        ops, seconds = asyncio.run(timed())
                        cpu.setdefault((what, kind), []).append((_cpu_seconds(pid) - before) / ops * 1000)
                        rates.setdefault((what, kind), []).append(ops / seconds)
        for what in measures:
            fake, real, floor, floor1 = (median(rates[(what, kind)]) for kind in kinds)
            vs_real, vs_floor, vs_floor1 = (
                median([f / b for f, b in zip(rates[(what, "fake")], rates[(what, base)], strict=True)])
                for base in ("real", "floor", "floor-one-write")
            )
            unit = "sess/s" if what == "setup" else "call/s"
            row(Row(f"{mode} {what}: real SDK server", real, unit))
            row(Row(f"{mode} {what}: floor server", floor, unit))
            row(Row(f"{mode} {what}: fake vs real SDK", fake, unit, real, "real SDK", "> 1 (info)", None, vs_real))
            row(Row(f"{mode} {what}: fake vs floor", fake, unit, floor, "floor", ">= 0.95", vs_floor >= 0.95, vs_floor))
            # The fake sends each answer in one write; a floor that does too shows the fake's own work alone.
            row(
                Row(
                    f"{mode} {what}: fake vs floor, one write",
                    fake,
                    unit,
                    floor1,
                    "floor, 1 write",
                    "(info)",
                    None,
                    vs_floor1,
                )
            )
            fake_cpu, real_cpu, floor_cpu, floor1_cpu = (median(cpu[(what, kind)]) for kind in kinds)
            per = "sess" if what == "setup" else "call"
            row(Row(f"{mode} {what}: server CPU per {per}, real SDK", real_cpu, "ms"))
            row(Row(f"{mode} {what}: server CPU per {per}, floor", floor_cpu, "ms"))
            row(Row(f"{mode} {what}: server CPU per {per}, floor, 1 write", floor1_cpu, "ms"))
            row(Row(f"{mode} {what}: server CPU per {per}, fake", fake_cpu, "ms", floor_cpu, "floor"))


# --- scale and memory ---------------------------------------------------------------------------------


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _scale(url: str, pid: int, sessions: int, calls: int) -> dict[str, float]:
    import httpx

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
    )
    initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    errors = 0
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def open_session(headers: dict[str, str] = headers) -> str:
            nonlocal errors
            answer = await client.post(url, content=init, headers=headers)
            sid = answer.headers.get("mcp-session-id", "")
            version = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            done = await client.post(url, content=initialized, headers={**headers, **version})
            errors += answer.status_code != 200 or done.status_code != 202
            return sid

        async def call(sid: str, i: int) -> None:
            nonlocal errors
            body = (
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%d"}}}'
                % (i + 2, i)
            )
            version = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            answer = await client.post(url, content=body, headers={**headers, **version})
            errors += answer.status_code != 200 or b'"error"' in answer.content

        async def calls_over(ids: list[str], n: int, width: int = 32) -> tuple[float, float]:
            """Wall time and the server's CPU time per call, for ``n`` calls spread over ``ids``."""
            queue = list(range(n))
            start, cpu = time.perf_counter(), _cpu_seconds(pid)

            async def worker() -> None:
                while queue:
                    i = queue.pop()
                    await call(ids[i % len(ids)], i)

            await asyncio.gather(*(worker() for _ in range(width)))
            return (time.perf_counter() - start) / n, (_cpu_seconds(pid) - cpu) / n

        few = [await open_session() for _ in range(10)]
        await calls_over(few, 500)  # warm up
        small = [await calls_over(few, 1000) for _ in range(3)]
        before = _rss_kb(pid)
        many = list(await asyncio.gather(*(open_session() for _ in range(sessions))))
        after = _rss_kb(pid)
        large = [await calls_over(many, calls), *[await calls_over(many, 1000) for _ in range(2)]]
    return {
        "errors": errors,
        "kb": (after - before) / sessions,
        "small": median([wall for wall, _ in small]),
        "large": median([wall for wall, _ in large]),
        "small_cpu": median([cpu for _, cpu in small]),
        "large_cpu": median([cpu for _, cpu in large]),
    }


def bench_scale(sessions: int, calls: int) -> None:
    with served("fake", True) as (url, pid):
        figures = asyncio.run(_scale(url, pid, sessions, calls))
    row(
        Row(
            f"scale: errors over {sessions} sessions, {calls} calls",
            figures["errors"],
            "",
            goal="0",
            ok=figures["errors"] == 0,
        )
    )
    row(Row("scale: memory per idle session", figures["kb"], "KB", goal="<= 5 KB", ok=figures["kb"] <= 5))
    # The check is on the server's CPU per call: the wall time of these calls is mostly the client's (one
    # httpx client in this process drives them all) and moves by ±0.2 between runs of the same code.
    small, large = figures["small"] * 1000, figures["large"] * 1000
    row(Row("scale: a call, 10 live sessions", small, "ms"))
    row(Row(f"scale: a call, {sessions} live sessions", large, "ms", small, "10 sessions", "(info)"))
    small_cpu, large_cpu = figures["small_cpu"] * 1000, figures["large_cpu"] * 1000
    row(Row("scale: server CPU per call, 10 live sessions", small_cpu, "ms"))
    row(
        Row(
            f"scale: server CPU per call, {sessions} live sessions",
            large_cpu,
            "ms",
            small_cpu,
            "10 sessions",
            "<= 1.2 (flat)",
            large_cpu / small_cpu <= 1.2,
        )
    )


# --- the race engine ----------------------------------------------------------------------------------


def bench_races(rounds: int, examples: int) -> None:
    from bench_races import measure_speed

    speeds = measure_speed(examples, rounds)
    for name, rate, stock in (
        ("races: examples/s, standard scenario", lambda s: s.rate, lambda s: s.stock_rate),
        ("races: ... per second of CPU time", lambda s: s.cpu_rate, lambda s: s.stock_cpu_rate),
    ):
        value = median([rate(s) for s in speeds])
        figure = Row(
            name, value, "ex/s", median([stock(s) for s in speeds]), "stock asyncio runs", ">= 100/s", value >= 100
        )
        figure.paired = median([rate(s) / stock(s) for s in speeds])
        row(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a goal is missed")
    parser.add_argument("--only", default="pytest,start,throughput,scale,races", help="comma-separated sections")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure (the median is kept)")
    parser.add_argument("--quick", action="store_true", help="smaller workloads, for a first look")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    scale = 0.3 if args.quick else 1.0
    print(
        f"pytest-fake-mcp bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; medians of {args.rounds} rounds"
    )
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    header()
    if "pytest" in only:
        bench_pytest(args.rounds, 300 if args.quick else 1000)
    if "start" in only:
        bench_start(args.rounds * 3)
    if "throughput" in only:
        bench_throughput(args.rounds, scale)
    if "scale" in only:
        bench_scale(300 if args.quick else 1000, 3000 if args.quick else 10000)
    if "races" in only:
        bench_races(args.rounds, 60 if args.quick else 200)
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    missed = [r.name for r in ROWS if r.ok is False]
    if missed:
        print(f"\n{len(missed)} goal(s) missed: " + "; ".join(missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
