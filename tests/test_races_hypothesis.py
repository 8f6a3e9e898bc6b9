"""Race tests keep Hypothesis's habits: profiles, statistics, the bare decorator, and advice that runs as printed.

Each runs pytest in a subprocess: Hypothesis's pytest plugin (which these are about) is left out of in-process
pytester runs (tests/_sdk.py ``INNER_ARGS``).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from pytest_fake_mcp._race._explore import advise

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-q")

# A scenario that costs no request: it counts its examples in a file, and fails when its draw is 3 or more.
HEADER = """
from pathlib import Path

from hypothesis import strategies as st

from pytest_fake_mcp.races import Race, race_test

COUNTS = Path(__file__).with_suffix(".counts")


async def count(race: Race, name: str, fail_from: int | None = None) -> None:
    with COUNTS.open("a") as file:
        file.write(name + "\\n")
    n = race.draw(st.integers(0, 10), "n")
    assert fail_from is None or n < fail_from, f"n={n}"
"""


def run(pytester: pytest.Pytester, body: str, *args: str, name: str = "test_inner") -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(**{name: HEADER + textwrap.dedent(body)})
    return pytester.runpytest_subprocess(*ARGS, *args, f"{name}.py", timeout=120)


def counts(pytester: pytest.Pytester, name: str = "test_inner") -> dict[str, int]:
    lines = (pytester.path / f"{name}.counts").read_text().split()
    return {test: lines.count(test) for test in lines}


def test_race_test_runs_the_loaded_profiles_max_examples_and_explicit_arguments_win(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "from hypothesis import settings\nsettings.register_profile('nightly', max_examples=2, database=None)\n"
    )
    body = """
    @race_test()
    async def test_profile(race):
        await count(race, "profile")

    @race_test(max_examples=3)
    async def test_explicit(race):
        await count(race, "explicit")
    """
    result = run(pytester, body, "--hypothesis-profile=nightly")
    result.assert_outcomes(passed=2)
    assert counts(pytester) == {"profile": 2, "explicit": 3}


def test_race_test_used_bare_runs_like_a_test(pytester: pytest.Pytester) -> None:
    body = """
    @race_test
    async def test_bare(race):
        await count(race, "bare")
    """
    result = run(pytester, body, "--hypothesis-seed=1")
    result.assert_outcomes(passed=1)
    assert counts(pytester) == {"bare": 100}  # the default profile's max_examples


def test_show_statistics_reports_a_race_test(pytester: pytest.Pytester) -> None:
    body = """
    @race_test(max_examples=5)
    async def test_statistics(race):
        await count(race, "statistics")
    """
    result = run(pytester, body, "--hypothesis-show-statistics")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*Hypothesis Statistics*", "test_inner.py::test_statistics:"])
    import hypothesis

    if hypothesis.__version_info__ >= (6, 170):  # 6.100's plugin prints the section, but empty for a race test
        result.stdout.fnmatch_lines(["*5 passing, 0 failing*", "*max_examples=5*"])


def test_the_printed_reproduce_advice_run_verbatim_replays_the_failure(pytester: pytest.Pytester) -> None:
    body = """
    @race_test(max_examples=50)
    async def test_fails(race):
        await count(race, "search", fail_from=3)
    """
    result = run(pytester, body)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "@reproduce_failure(" not in output, output  # Hypothesis's decorator cannot reach a race test
    advice = re.search(r"adding this argument to @race_test\(\.\.\.\): (reproduce=\(.*\))$", output, re.MULTILINE)
    assert advice is not None, output

    replay = f"""
    @race_test(max_examples=50, {advice[1]})
    async def test_replayed(race):
        await count(race, "replay", fail_from=3)
    """
    result = run(pytester, replay, name="test_replay")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RaceFailure*", "*Raised: AssertionError: n=3*"])
    assert counts(pytester, "test_replay") == {"replay": 1}  # exactly the printed example, shrunk to n=3


def test_a_hypothesis_decorator_stacked_on_race_test_says_which_argument_to_use(pytester: pytest.Pytester) -> None:
    body = """
    from hypothesis import settings

    @settings(max_examples=5)
    @race_test
    async def test_stacked(race):
        await count(race, "stacked")
    """
    result = run(pytester, body)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*is stacked on @race_test*pass the same value to race_test instead*"])


def test_hypothesis_seed_advice_becomes_the_seed_argument() -> None:
    error = AssertionError("boom")
    error.add_note(
        "You can reproduce this failure by adding @seed(1234) to this test, or by running pytest with "
        "--hypothesis-seed=1234."
    )
    advise(error, "@race_test(...)")
    assert error.__notes__ == [
        "You can reproduce this failure by passing seed=1234 to @race_test(...), or by running pytest with "
        "--hypothesis-seed=1234."
    ]
