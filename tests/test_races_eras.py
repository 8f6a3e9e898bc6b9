"""The race suite's scenarios in both eras (issue 10): the reference client in auto mode passes each, and a
client that probes once per first caller is found in the modern era by exploration alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import Phase

from _sdk import MCP2
from contract_clients import NoSingleFlightFirstCallClient
from pytest_fake_mcp import FakeMCPOptions
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.races import Race, RaceFailure, RaceSuite, explore, race_settings

NO_DATABASE: dict[str, Any] = {"database": None}
FIND_ONLY: dict[str, Any] = {"database": None, "phases": (Phase.generate,), "derandomize": True}  # one seed: no flakes
needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)


class TestReferenceClientRacesInBothEras(RaceSuite):
    eras = ("handshake", "modern")
    max_examples = 15
    hypothesis_settings: ClassVar[dict[str, Any]] = NO_DATABASE

    @pytest.fixture
    def make_client(self, race_era: str | None) -> Callable[[str], ReusingSessionClient]:
        if race_era == "modern" and not MCP2:
            pytest.skip(
                "the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
            )
        return lambda url: ReusingSessionClient(url, mode="auto", read_timeout=3.0)


def test_each_scenario_runs_once_per_era_and_the_session_scenario_is_skipped_in_the_modern_era(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import pytest
        from pytest_fake_mcp.client import ReusingSessionClient
        from pytest_fake_mcp.races import RaceSuite

        class TestEras(RaceSuite):
            eras = ("handshake", "modern")
            max_examples = 1
            hypothesis_settings = {"database": None}

            @pytest.fixture
            def make_client(self):
                return lambda url: ReusingSessionClient(url)

            def _explore(self, name, scenario, choices=None):
                print(f"ran {name} in {self._era} with era={self._options().era}")
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-rs", "-s")
    # 7 scenarios, 2 eras; the session loss skips in the modern era, the authorization scenario (off) in both
    result.assert_outcomes(passed=13, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*ran concurrent_first_calls in handshake with era=handshake*",
            "*ran concurrent_first_calls in modern with era=modern*",
            "*SKIPPED*a session loss needs a session: the 2026-07-28 era has no sessions*",
        ]
    )


@needs_mcp2
def test_in_the_modern_era_the_reference_client_goes_stateless_under_every_explored_schedule() -> None:
    async def scenario(race: Race) -> None:
        client = ReusingSessionClient(race.url, mode="auto", read_timeout=3.0)
        first = race.spawn(client.call_tool("echo", {"text": "a"}), "caller-1")
        second = race.spawn(client.call_tool("echo", {"text": "b"}), "caller-2")
        await first
        await second
        await client.aclose()
        await race.quiet()
        assert {e.era for e in race.server.journal} == {"modern"}
        race.server.assert_discover_once()
        race.server.assert_no_session_ids()

    explore(scenario, max_examples=10, options=FakeMCPOptions(era="modern"), settings=race_settings(10, **NO_DATABASE))


class _ProbePerCallerClient(NoSingleFlightFirstCallClient):
    """Bug: concurrent first callers each open their own connection, so each probes the era again."""

    def __init__(self, url: str) -> None:
        super().__init__(url, mode="auto", read_timeout=3.0)


@needs_mcp2
def test_a_client_probing_once_per_first_caller_is_found_in_the_modern_era() -> None:
    suite_cls = type(
        "ModernRaces",
        (RaceSuite,),
        {"max_examples": 200, "hypothesis_settings": FIND_ONLY, "eras": ("modern",), "__module__": __name__},
    )
    suite = suite_cls()
    suite._era = "modern"
    with pytest.raises(RaceFailure, match="server/discover"):
        suite.test_concurrent_first_calls_open_one_session_and_one_http_client(_ProbePerCallerClient)
