"""Race tests keep Hypothesis's habits: profiles, statistics, the bare decorator, and advice that runs as printed.

Each runs pytest in a subprocess: Hypothesis's pytest plugin (which these are about) is left out of in-process
pytester runs (tests/_sdk.py ``INNER_ARGS``).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

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


# --- RaceSuite: the same habits for a subclass ------------------------------------------------------------

TESTS_DIR = Path(__file__).parent

SUITE_HEADER = f"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {str(TESTS_DIR)!r})

from race_clients import LazyHTTPClientClient
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.races import RaceSuite

COUNTS = Path(__file__).with_suffix(".counts")


def counted(name, client_cls):
    def make(url):
        with COUNTS.open("a") as file:
            file.write(name + "\\n")  # one client per example of a scenario
        return client_cls(url)

    return make
"""

FIRST_CALLS = "test_concurrent_first_calls_open_one_session_and_one_http_client"


def run_suite(pytester: pytest.Pytester, body: str, *args: str, name: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(**{name: SUITE_HEADER + textwrap.dedent(body)})
    return pytester.runpytest_subprocess(*ARGS, *args, "-k", "concurrent_first_calls", f"{name}.py", timeout=300)


def test_race_suite_runs_the_loaded_profiles_max_examples_and_its_own_count_wins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "from hypothesis import settings\nsettings.register_profile('quick', max_examples=2, database=None)\n"
    )
    body = """
    class TestProfile(RaceSuite):
        @pytest.fixture
        def make_client(self):
            return counted("profile", ReusingSessionClient)

    class TestOwnCount(RaceSuite):
        max_examples = 3

        @pytest.fixture
        def make_client(self):
            return counted("own", ReusingSessionClient)
    """
    result = run_suite(pytester, body, "--hypothesis-profile=quick", name="test_suite_profile")
    result.assert_outcomes(passed=2)
    assert counts(pytester, "test_suite_profile") == {"profile": 2, "own": 3}


def _schedule_lines(output: str) -> list[str]:
    return [line.split("E ", 1)[-1].strip() for line in output.splitlines() if "Schedule: Schedule(" in line]


def test_a_race_suite_failure_prints_class_attribute_advice_that_replays_it_when_pasted(
    pytester: pytest.Pytester,
) -> None:
    body = """
    class TestLazy(RaceSuite):
        max_examples = 200
        hypothesis_settings = {"database": None, "derandomize": True}

        @pytest.fixture
        def make_client(self):
            return counted("search", LazyHTTPClientClient)
    """
    result = run_suite(pytester, body, name="test_suite_search")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "@reproduce_failure(" not in output, output
    assert "explore()" not in output, output  # a RaceSuite user does not call explore()
    advice = re.search(r"adding this class attribute to TestLazy: (reproduce = \{.*\})$", output, re.MULTILINE)
    assert advice is not None, output
    assert advice[1].startswith(f"reproduce = {{{FIRST_CALLS!r}: ("), advice[1]
    found = _schedule_lines(output.split("short test summary info")[0])
    assert found, output

    replay = f"""
    class TestLazy(RaceSuite):
        max_examples = 200
        hypothesis_settings = {{"database": None}}
        {advice[1]}

        @pytest.fixture
        def make_client(self):
            return counted("replay", LazyHTTPClientClient)
    """
    result = run_suite(pytester, replay, name="test_suite_replay")
    result.assert_outcomes(failed=1)
    assert counts(pytester, "test_suite_replay") == {"replay": 1}  # exactly the printed example
    # The failures section only: with CI set, pytest's short summary repeats whole messages.
    replayed = _schedule_lines(result.stdout.str().split("short test summary info")[0])
    assert replayed == found[-1:]  # the same schedule as the failure reported


def test_hypothesis_seed_advice_becomes_the_suites_seed_attribute() -> None:
    from pytest_fake_mcp._race._suite import _ClassAttributes

    error = AssertionError("boom")
    error.add_note(
        "You can reproduce this failure by adding @seed(1234) to this test, or by running pytest with "
        "--hypothesis-seed=1234."
    )
    advise(error, _ClassAttributes("TestOurClientRaces", FIRST_CALLS))
    assert error.__notes__ == [
        "You can reproduce this failure by setting the class attribute seed = 1234 on TestOurClientRaces, or by "
        "running pytest with --hypothesis-seed=1234."
    ]
