"""A RaceSuite scenario's examples give the same step traces in every process, whatever its addresses.

The controlled loop's runs must be a pure function of the example: nothing may depend on object addresses
or ``PYTHONHASHSEED``, or a failure found in one process would not replay in the next. Each child process
below runs the same derandomised examples of the "aclose racing the first call" scenario with the
reference client (whose SDK cancels a task group while a task waits on ``asyncio.shield``), after
allocating a different amount of junk, under a different hash seed, and prints each example's trace digest.
One example alone in a fresh process rarely shows a difference: the examples before it leave the heap in a
state that differs from process to process, which is what moves the addresses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLES = 50

_CHILD = """
import hashlib
import sys

from hypothesis import Phase

from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp._race import _example_run
from pytest_fake_mcp.races import RaceSuite

junk = [object() for _ in range(int(sys.argv[1]))]  # shifts every address this process allocates next
digests = []
_run_controlled = _example_run.run_controlled


def recording(*args, **kwargs):
    result = _run_controlled(*args, **kwargs)
    digests.append(hashlib.sha256(repr(result.trace).encode()).hexdigest()[:16])
    return result


_example_run.run_controlled = recording


class Suite(RaceSuite):
    max_examples = int(sys.argv[2])
    hypothesis_settings = {"database": None, "phases": (Phase.generate,), "derandomize": True}


Suite().test_aclose_racing_the_first_call_leaves_nothing_open(lambda url: ReusingSessionClient(url))
print(" ".join(digests))
"""


def _digests(child: Path, *, hash_seed: str, junk: int) -> list[str]:
    src = Path(__file__).parent.parent / "src"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, str(child), str(junk), str(EXAMPLES)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout.split()


def test_the_same_examples_give_the_same_traces_across_hash_seeds_and_allocation_patterns(tmp_path: Path) -> None:
    child = tmp_path / "race_child.py"
    child.write_text(textwrap.dedent(_CHILD))
    runs = {
        (seed, junk): _digests(child, hash_seed=seed, junk=junk)
        for seed, junk in (("1", 0), ("2", 20_000), ("3", 3_000))
    }
    reference = runs["1", 0]
    assert len(reference) >= EXAMPLES, reference  # Hypothesis may run a few more than it counts
    for (seed, junk), digests in runs.items():
        at = min(len(digests), len(reference))
        first = next((i for i, (a, b) in enumerate(zip(reference, digests, strict=False)) if a != b), None)
        assert digests == reference, (
            f"PYTHONHASHSEED={seed} with {junk} junk objects gave other step traces than PYTHONHASHSEED=1 from "
            f"example {at if first is None else first} on: a run depends on object addresses or set order"
        )
