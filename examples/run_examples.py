"""The main job: real MCP clients against the fake, the good ones passing and the buggy ones failing.

1. ``pytest examples -p no:randomly --ignore=examples/buggy``: every good example must pass.
2. ``pytest examples/buggy -p no:randomly``: every buggy example must fail on an assertion; a headline per
   failure (its first line) comes first, then pytest's output: each full report (the assertion message and
   the sequence diagram) for you to read.

Exits 0 only if both hold, else 1 with a line saying why. Run it with the venv's Python:
``.venv/bin/python examples/run_examples.py``.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOOD = ["examples", "-p", "no:randomly", "--ignore=examples/buggy"]
BUGGY = ["examples/buggy", "-p", "no:randomly"]
ASSERTION_FAILURES = ("AssertionError", "pytest_fake_mcp.races.RaceFailure")
"""How a buggy example must fail: a plugin assertion (a race found by the engine is an AssertionError too)."""


def banner(text: str) -> None:
    print(f"\n{'=' * 100}\n== {text}\n{'=' * 100}", flush=True)


def pytest(args: list[str]) -> int:
    """Run pytest in a subprocess from the repo root; its output goes straight to ours."""
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, check=False).returncode


def pytest_captured(args: list[str]) -> tuple[int, str]:
    """Run pytest in a subprocess from the repo root; its exit code and its output (stdout and stderr)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=ROOT,
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    return run.returncode, run.stdout


def headline(message: str) -> str:
    """A failure message's first line, with the next one when the first ends on a colon (what failed)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def node_id(classname: str, name: str) -> str:
    """A junit test case as pytest names it (``examples/buggy/test_x.py::test_y``) when its module is a file here."""
    module = Path(*classname.split(".")).with_suffix(".py")
    return f"{module}::{name}" if (ROOT / module).is_file() else f"{classname}::{name}"


def failure_headlines(junit: Path) -> list[str]:
    """Two lines per failed test case: its id, then the headline of its failure message."""
    lines = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is not None:
            lines.append(f"  {node_id(case.get('classname') or '', case.get('name') or '')}")
            lines.append(f"      {headline(failure.get('message') or '')}")
    return lines


def unexpected_buggy_outcomes(junit: Path) -> tuple[int, list[str]]:
    """How many buggy examples ran, and a line for each that did not fail on an assertion."""
    problems = []
    cases = ET.parse(junit).getroot().iter("testcase")
    count = 0
    for count, case in enumerate(cases, 1):  # noqa: B007 - count is read after the loop
        name = f"{case.get('classname')}::{case.get('name')}"
        failures = case.findall("failure")
        others = [child.tag for child in case if child.tag in ("error", "skipped")]
        if others:
            problems.append(f"{name}: {' and '.join(others)} (expected an assertion failure)")
        elif not failures:
            problems.append(f"{name}: passed (expected it to fail)")
        elif not (failures[0].get("message") or "").startswith(ASSERTION_FAILURES):
            problems.append(f"{name}: failed with {failures[0].get('message', '?')[:120]!r}, not an AssertionError")
    return count, problems


def main() -> int:
    version = importlib.metadata.version("mcp")
    print(f"pytest-fake-mcp main job: example MCP clients against the fake (mcp {version}, {sys.executable})")

    banner("1/2  good clients: these must PASS   (pytest " + " ".join(GOOD) + ")")
    good = pytest(GOOD)

    banner("2/2  buggy clients: the plugin must make these FAIL; read why below   (pytest " + " ".join(BUGGY) + ")")
    print("(running them; what each failure says comes first, then pytest's output with the full reports)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "buggy.xml"
        buggy, output = pytest_captured([*BUGGY, f"--junitxml={junit}"])
        ran, problems = unexpected_buggy_outcomes(junit) if junit.exists() else (0, [])
        headlines = failure_headlines(junit) if junit.exists() else []
    if headlines:
        print("\nThe buggy examples' failures, one headline each (the full reports follow):\n" + "\n".join(headlines))
        print(f"\n{'-' * 100}")
    print(output, end="" if output.endswith("\n") else "\n", flush=True)

    banner("result")
    reasons = []
    if good != 0:
        reasons.append(f"the good examples did not all pass (pytest exit code {good}; see part 1/2)")
    if buggy != 1 or ran == 0:
        reasons.append(f"the buggy examples did not run to failures (pytest exit {buggy}, {ran} ran; see part 2/2)")
    reasons += [f"buggy example {problem}" for problem in problems]
    if reasons:
        for reason in reasons:
            print(f"MAIN JOB FAILED: {reason}")
        return 1
    print(f"MAIN JOB OK: the good examples passed and all {ran} buggy examples failed, as expected.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
