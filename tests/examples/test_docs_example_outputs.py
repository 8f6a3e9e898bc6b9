"""The failure outputs docs/examples.md and the home page show are what the flawed examples print.

The flawed clients' tests (``examples/buggy``, the race exploration left out: it runs for a minute) run in a
subprocess, as ``examples/run_examples.py`` runs them; every assertion block of the pages must match one of their
failures: same first line, same hint. Session ids, times and rows are not compared. The pages show mcp 2.x runs.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "examples.md", ROOT / "docs" / "index.md"]

pytestmark = pytest.mark.skipif(
    int(importlib.metadata.version("mcp").split(".")[0]) < 2, reason="docs/examples.md shows the mcp 2.x output"
)


def first_and_hint(lines: list[str]) -> tuple[str, str]:
    return lines[0], next(line for line in lines if line.startswith("Hint:"))


def shown() -> list[tuple[str, str]]:
    """(first line, hint) of each failure block of the pages (the home page leaves out ``AssertionError: ``)."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```text\n(.*?)\n```", page.read_text(encoding="utf-8"), re.DOTALL):
            if block.startswith("assert_"):
                block = f"AssertionError: {block}"
            if block.startswith("AssertionError: "):
                found.append(first_and_hint(block.splitlines()))
    return found


def printed(junit: Path) -> list[tuple[str, str]]:
    """(first line, hint) of each failure's assertion message, as pytest printed it (``E`` prefixes removed)."""
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        text = failure.text if failure is not None and failure.text else ""
        lines = [line for line in text.splitlines() if line.startswith("E ")]
        start = next((i for i, line in enumerate(lines) if "AssertionError: " in line), None)
        if start is None:
            continue
        cut = lines[start].index("AssertionError: ")
        found.append(first_and_hint([line[cut:].rstrip() for line in lines[start:]]))
    return found


def test_the_page_shows_what_the_flawed_examples_print(tmp_path: Path) -> None:
    junit = tmp_path / "buggy.xml"
    command = [sys.executable, "-m", "pytest", "examples/buggy", "-p", "no:randomly", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [*command, "-k", "not races", "-q", f"--junitxml={junit}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert junit.exists(), run.stdout[-2000:] + run.stderr[-2000:]
    real = printed(junit)
    missing = [block for block in shown() if block not in real]
    assert not missing, "the docs show failures the examples no longer print:\n" + "\n".join(
        f"  {first}\n    {hint}" for first, hint in missing
    )
    assert len(shown()) >= 8
