"""Run the official MCP conformance suite's server scenarios against ``fake-mcp serve --profile conformance``.

    npm ci --prefix tests/node          # node 22, the suite and the TypeScript SDK, pinned, into tests/node
    python tests/node/conformance.py    # prints one line per scenario; exit 0 only if every scenario passed

A scenario passes when none of its checks is FAILURE. ``--url URL`` tests a server already running
instead; ``--expect N`` also requires exactly N scenarios (the active suite has 30); ``--json PATH``
writes the per-scenario results.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
_TIMEOUT = 600


def missing() -> str | None:
    """Why the suite cannot run here (None when it can)."""
    for path in (NODE, SUITE):
        if not path.exists():
            return f"{path} is not installed; run: npm ci --prefix {HERE.relative_to(Path.cwd(), walk_up=True)}"
    return None


@contextmanager
def fake_server(*args: str) -> Iterator[str]:
    """``fake-mcp serve`` in a subprocess; yields its URL; stopped with SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_fake_mcp", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise SystemExit(f"fake-mcp serve exited with status {process.wait(30)} before printing its URL")
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=30)


def run_suite(url: str, out_dir: Path, suite: str = "active") -> tuple[int, dict[str, dict[str, int]], str]:
    """Run the suite against ``url``; its exit status, per scenario the count of checks by status, and its stdout."""
    completed = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", url, "--suite", suite, "-o", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
    )
    scenarios: dict[str, dict[str, int]] = {}
    for checks_file in sorted(out_dir.glob("server-*/checks.json")):
        # DIR/server-<scenario>-<ISO timestamp>/checks.json
        scenario = checks_file.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        counts: dict[str, int] = {}
        for check in json.loads(checks_file.read_text()):
            counts[check["status"]] = counts.get(check["status"], 0) + 1
        scenarios[scenario] = counts
    return completed.returncode, scenarios, completed.stdout + completed.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="test this running server instead of starting fake-mcp serve")
    parser.add_argument("--suite", default="active", choices=["active", "pending", "all"])
    parser.add_argument("--expect", type=int, default=None, help="require exactly this many scenarios")
    parser.add_argument("--json", type=Path, default=None, help="write the per-scenario results here")
    args = parser.parse_args(argv)
    reason = missing()
    if reason:
        print(f"conformance: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="conformance-") as out:
        if args.url:
            status, scenarios, output = run_suite(args.url, Path(out), args.suite)
        else:
            with fake_server("--profile", "conformance") as url:
                status, scenarios, output = run_suite(url, Path(out), args.suite)
    passed = [name for name, counts in scenarios.items() if not counts.get("FAILURE")]
    for name, counts in scenarios.items():
        verdict = "PASS" if name in passed else "FAIL"
        print(f"{verdict}  {name}  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"{len(passed)}/{len(scenarios)} scenarios passed (suite exit status {status})")
    if args.json:
        args.json.write_text(json.dumps({"status": status, "scenarios": scenarios}, indent=2) + "\n")
    ok = status == 0 and len(passed) == len(scenarios) and (args.expect is None or len(scenarios) == args.expect)
    if not ok:
        print(output[-4000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
