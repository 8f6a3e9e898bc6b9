"""RaceSuite's authorization scenario (``auth = True``): the engine finds a refresher without single flight with no
barrier placed by hand, within the suite's default budget; the single-flight refresher and the reference client
logging in with the SDK's ``OAuthClientProvider`` pass; without the switch it skips naming it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from _auth_suite_clients import reference_with_refresher, reference_with_sdk_oauth, sdk_session_with_oauth
from pytest_fake_mcp.races import RaceFailure, RaceSuite

SCENARIO = "test_concurrent_calls_meeting_an_expired_token_renew_it_once"


class _Suite(RaceSuite):
    auth = True
    hypothesis_settings = {"database": None}  # noqa: RUF012 (the suite's own knob)


def _run(make_client: Callable[[str], Any], **knobs: Any) -> None:
    suite = type("TestOurs", (_Suite,), knobs)()
    getattr(suite, SCENARIO)(make_client)


def test_the_engine_finds_a_refresher_without_single_flight_within_the_default_budget() -> None:
    with pytest.raises(RaceFailure) as failed:
        _run(reference_with_refresher(single_flight=False), seed=0)
    assert "Raised: AssertionError: assert_single_flight_refresh(): " in str(failed.value)
    text = str(failed.value.__cause__)  # the oracle's failure, with its diagram and hint
    assert "assert_single_flight_refresh(): " in text
    assert "redundant token grant" in text
    assert "hold one refresh (a lock or a shared future)" in text


def test_the_single_flight_refresher_passes() -> None:
    _run(reference_with_refresher(), max_examples=30, seed=0)


def test_the_reference_client_logging_in_with_the_sdks_oauth_passes() -> None:
    _run(reference_with_sdk_oauth, max_examples=30, seed=0)


class TestTheSdksSessionWithItsOAuth(RaceSuite):
    """The SDK's ClientSession, entered and left on the scenario's task (``open_client``): its provider holds one
    lock across each request's auth flow, so the callers renew one by one."""

    auth = True
    max_examples = 30
    hypothesis_settings = {"database": None}  # noqa: RUF012 (the suite's own knob)
    locals().update({name: None for name in dir(RaceSuite) if name.startswith("test_") and name != SCENARIO})

    @pytest.fixture
    def open_client(self) -> Callable[[str], Any]:
        return sdk_session_with_oauth


def test_the_scenario_skips_without_the_switch_naming_it() -> None:
    class TestOurs(RaceSuite):
        pass

    with pytest.raises(pytest.skip.Exception, match=r"set auth = True on TestOurs") as skipped:
        getattr(TestOurs(), SCENARIO)(reference_with_sdk_oauth)
    assert "docs/races.md#authorization" in str(skipped.value)
