"""The contract suite's authorization scenarios (``auth = True``): correct clients pass them, each broken refresher
fails the scenario about its bug with the oracle's headline, and without the switch they skip naming it.

The passing clients run the auth scenarios as a subclass would (the others are ``test_contract.py``'s); the broken
ones call one scenario directly on a fake with ``auth=True``, so the failure it raises can be read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from _auth_suite_clients import (
    RawOAuthClient,
    reference_with_refresher,
    reference_with_sdk_oauth,
    sdk_session_with_oauth,
)
from pytest_fake_mcp import FakeMCPServer
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.contract import SessionReuseSuite

AUTH_SCENARIOS = (
    "test_concurrent_calls_meeting_an_expired_token_renew_it_once",
    "test_session_loss_with_auth_on_opens_a_session_and_renews_no_token",
    "test_insufficient_scope_403_steps_up_in_the_same_session",
)
EXPIRED, LOSS, STEP_UP = AUTH_SCENARIOS


class _AuthScenariosOnly(SessionReuseSuite):
    """The auth scenarios alone: test_contract.py runs every other one (without auth) on the reference client."""

    auth = True
    locals().update(
        {name: None for name in dir(SessionReuseSuite) if name.startswith("test_") and name not in AUTH_SCENARIOS}
    )


class TestReferenceClientWithTheSdksOAuth(_AuthScenariosOnly):
    @pytest.fixture
    def make_client(self) -> Callable[[str], Any]:
        return reference_with_sdk_oauth


class TestReferenceClientWithASingleFlightRefresher(_AuthScenariosOnly):
    @pytest.fixture
    def make_client(self) -> Callable[[str], Any]:
        return reference_with_refresher()


class TestTheSdksSessionWithItsOAuth(_AuthScenariosOnly):
    """The SDK's ClientSession: it never opens a new session after a 404, so the loss scenario skips saying so."""

    @pytest.fixture
    def open_client(self) -> Callable[[str], Any]:
        return sdk_session_with_oauth


@pytest.mark.fake_mcp_server(json_response=True)  # the raw client reads JSON answers
class TestARawClientWithASingleFlightRefresherThatStepsUp(_AuthScenariosOnly):
    """A hand-written client over plain httpx: it refreshes once per expiry, steps up in its session on a 403, and
    reopens a session on a 404 without touching its token: it passes all three."""

    @pytest.fixture
    def make_client(self) -> Callable[[str], Any]:
        return RawOAuthClient


class _Suite(SessionReuseSuite):
    auth = True


async def _run(scenario: str, make_client: Callable[[str], Any], server: FakeMCPServer) -> None:
    await getattr(_Suite(), scenario)(make_client, server)


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(auth=True)
async def test_a_refresher_without_single_flight_fails_the_expiry_scenario(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(AssertionError) as failed:
        await _run(EXPIRED, reference_with_refresher(single_flight=False), fake_mcp_server)
    text = str(failed.value)
    assert "_Suite: assert_single_flight_refresh(): " in text or "assert_single_flight_refresh(): " in text
    assert "redundant token grant" in text
    assert "hold one refresh (a lock or a shared future)" in text


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(auth=True)
async def test_a_refresher_sending_a_refused_token_again_fails_the_expiry_scenario(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with pytest.raises(AssertionError) as failed:
        await _run(EXPIRED, reference_with_refresher(reuse_refused=True), fake_mcp_server)
    text = str(failed.value)
    assert text.startswith("assert_no_refused_token_reused(): "), text[:300]
    assert "carried a token after its 401" in text
    assert "calls meeting the expired token raised" in text  # named after it, less serious


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(auth=True)
async def test_a_refresher_registering_at_each_renewal_fails_the_expiry_scenario(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with pytest.raises(AssertionError, match=r"assert_no_reregistration\(clients=1\): 2 registrations succeeded"):
        await _run(EXPIRED, reference_with_refresher(register_each_time=True), fake_mcp_server)


AUTH_JSON = pytest.mark.fake_mcp_server(auth=True, json_response=True)  # the raw client reads JSON answers


@pytest.mark.asyncio
@AUTH_JSON
async def test_a_raw_client_that_steps_up_in_its_session_passes_the_step_up_and_loss_scenarios(
    fake_mcp_server: FakeMCPServer,
) -> None:
    await _run(STEP_UP, RawOAuthClient, fake_mcp_server)
    assert [e.status for e in fake_mcp_server.get_requests(method="tools/call")] == [200, 403, 200]


@pytest.mark.asyncio
@AUTH_JSON
async def test_a_raw_client_that_reopens_its_session_on_a_404_passes_the_loss_scenario(
    fake_mcp_server: FakeMCPServer,
) -> None:
    await _run(LOSS, RawOAuthClient, fake_mcp_server)
    assert [e.status for e in fake_mcp_server.get_requests(method="initialize")] == [401, 200, 200]  # login, reopen


@pytest.mark.asyncio
@AUTH_JSON
async def test_a_client_opening_a_new_session_on_a_403_fails_the_step_up_scenario(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with pytest.raises(AssertionError) as failed:
        await _run(STEP_UP, lambda url: RawOAuthClient(url, new_session_on_403=True), fake_mcp_server)
    text = str(failed.value)
    assert text.startswith("assert_session_kept_across_auth(): 1 exchange took a token problem for session loss"), text
    assert "a new session after the 403 at #" in text
    assert "a 401 or 403 is about the token: renew it and retry in the same session" in text


@pytest.mark.asyncio
@AUTH_JSON
async def test_a_client_logging_in_again_on_a_404_fails_the_loss_scenario(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(AssertionError) as failed:
        await _run(LOSS, lambda url: RawOAuthClient(url, renew_on_404=True), fake_mcp_server)
    text = str(failed.value)
    assert text.startswith("assert_session_kept_across_auth(): "), text
    assert "/authorize after the 404 at #" in text
    assert "a 404 is about the session: open a new one, the token is still good" in text


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(auth=True)
async def test_a_client_that_does_not_step_up_skips_the_step_up_scenario_saying_so(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"the client did not step up after the 403 insufficient_scope"):
        await _run(STEP_UP, reference_with_refresher(), fake_mcp_server)


@pytest.mark.asyncio
async def test_the_auth_scenarios_skip_without_the_switch_naming_it(fake_mcp_server: FakeMCPServer) -> None:
    class TestOurs(SessionReuseSuite):
        pass

    for scenario in AUTH_SCENARIOS:
        with pytest.raises(pytest.skip.Exception, match=r"set auth = True on TestOurs") as skipped:
            await getattr(TestOurs(), scenario)(reference_with_sdk_oauth, fake_mcp_server)
        assert "docs/contract.md#authorization" in str(skipped.value)
    assert fake_mcp_server.journal.exchanges == ()


def test_every_authorization_scenario_is_listed_here_and_failed_by_a_broken_client() -> None:
    marked = {name for name in dir(SessionReuseSuite) if getattr(getattr(SessionReuseSuite, name), "_contract_auth", 0)}
    assert marked == set(AUTH_SCENARIOS)
    failed_here = {EXPIRED, LOSS, STEP_UP}  # the *_fails_the_* tests above, one scenario each at least
    assert failed_here == marked


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(auth=True)
async def test_a_client_that_never_logs_in_fails_at_its_first_call_naming_the_fix(
    fake_mcp_server: FakeMCPServer,
) -> None:
    with pytest.raises(AssertionError) as failed:
        await _run(EXPIRED, ReusingSessionClient, fake_mcp_server)
    text = str(failed.value)
    assert "the client never asked the fake's authorization server for a token (auth = True on _Suite)" in text
    assert "auth=HeadlessOAuth().provider(url)" in text
    assert re.search(r"client ── initialize ─+▶ server   401", text)  # the diagram: the challenge it met
