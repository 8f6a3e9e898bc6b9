"""The main job (``examples/run_examples.py``) puts what it wants read where it is read.

Its output leads with one headline per buggy example's failure, then pytest's full reports; the race
exploration example fails on the same shrunk program from a cold start, without the log of its search.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_examples", ROOT / "examples" / "run_examples.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_failure_headlines_come_before_the_full_reports(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    pytester.mkpydir("good").joinpath("test_good.py").write_text("def test_passes():\n    pass\n")
    pytester.mkpydir("buggy").joinpath("test_buggy.py").write_text(
        "def test_leaks():\n"
        "    raise AssertionError('assert_all_sessions_closed(): 1 of 1 session got no DELETE.\\nExchanges: …')\n"
        "\n"
        "def test_races():\n"
        "    raise AssertionError('A cache invariant failed once the run was quiet:\\n  - 2 sessions live')\n"
    )
    job = run_examples()
    monkeypatch.setattr(job, "ROOT", pytester.path)
    monkeypatch.setattr(job, "GOOD", ["good", "-p", "no:randomly", "-p", "no:cacheprovider"])
    monkeypatch.setattr(job, "BUGGY", ["buggy", "-p", "no:randomly", "-p", "no:cacheprovider"])

    assert job.main() == 0
    out = capfd.readouterr().out
    leaks = "  buggy/test_buggy.py::test_leaks\n      AssertionError: assert_all_sessions_closed(): 1 of 1"
    races = "  buggy/test_buggy.py::test_races\n      AssertionError: A cache invariant failed once the run was quiet:"
    races += " - 2 sessions live"  # a headline ending on a colon takes the next line: what failed
    assert leaks in out, out
    assert races in out, out
    assert out.index("one headline each") < out.index(leaks) < out.index("= FAILURES =") < out.index("MAIN JOB OK")


def test_the_race_example_fails_the_same_way_from_a_cold_start_without_its_search_log(tmp_path: Path) -> None:
    env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis")}  # cold: no saved examples
    test = "examples/buggy/test_buggy_kiln_races.py"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    assert "RaceFailure: A cache invariant failed once the run was quiet:" in out, out[-3000:]
    # Shrunk, and shortened: the first step kept is a get_or_create, numbered as in the whole program (which steps
    # Hypothesis's shrinker leaves, and so which the shortening leaves out, varies with Hypothesis's version).
    assert re.search(r"^E +(\d+)\. get-\1: get_or_create \(server 1, run-1\)$", out, re.MULTILINE), out[-3000:]
    # The example's space: programs of up to 3 operations (a settle, and the end's check of every key, are not).
    steps = re.findall(r"^E +\d+\. (.*)$", out, re.MULTILINE)
    operations = [step for step in steps if not step.startswith("settle (") and "(the end:" not in step]
    assert 1 <= len(operations) <= 3, steps
    assert "The failing run on the wire" in out, out[-3000:]  # the sequence diagram
    assert "Captured log" not in out, out[-3000:]
    assert len(out.splitlines()) < 150, out[-3000:]
