"""How-to: the authorization scenarios of the contract suite (docs/contract.md) and the race suite
(docs/races.md). Each region is shown verbatim in those pages, complete: imports included.

Here only the authorization scenarios run (the others are left out below the regions): tests/test_contract.py and
the race suite's tests run them on the reference client.
"""
# ruff: noqa: E402, I001

from __future__ import annotations

# --8<-- [start:oauth-client]
from pytest_fake_mcp import HeadlessOAuth
from pytest_fake_mcp.client import ReusingSessionClient

try:
    import httpx2 as httpx  # the HTTP client mcp 2.x speaks
except ImportError:
    import httpx  # mcp 1.x


class OurClient:  # your client here: one whose HTTP client logs in (the SDK's OAuthClientProvider)
    def __init__(self, url):
        self.http = httpx.AsyncClient(auth=HeadlessOAuth().provider(url))
        self.mcp = ReusingSessionClient(url, http_client=self.http)

    async def call_tool(self, name, arguments):
        return await self.mcp.call_tool(name, arguments)

    async def aclose(self):
        await self.mcp.aclose()
        await self.http.aclose()  # an HTTP client given to ReusingSessionClient is yours to close


# --8<-- [end:oauth-client]


# --8<-- [start:contract-auth]
import pytest
from pytest_fake_mcp.contract import SessionReuseSuite


class TestOurClientLoggedIn(SessionReuseSuite):
    auth = True  # the authorization scenarios run, each on a fake with auth=True

    @pytest.fixture
    def make_client(self):
        return OurClient


# --8<-- [end:contract-auth]


# --8<-- [start:race-auth]
import pytest
from pytest_fake_mcp.races import RaceSuite


class TestOurClientRacesLoggedIn(RaceSuite):
    auth = True  # the authorization scenario runs, on an in-process fake with auth=True
    max_examples = 20

    @pytest.fixture
    def make_client(self):
        return OurClient


# --8<-- [end:race-auth]

_AUTH = (
    "test_concurrent_calls_meeting_an_expired_token_renew_it_once",
    "test_session_loss_with_auth_on_opens_a_session_and_renews_no_token",
    "test_insufficient_scope_403_steps_up_in_the_same_session",
)
for _suite in (TestOurClientLoggedIn, TestOurClientRacesLoggedIn):
    for _name in dir(_suite):
        if _name.startswith("test_") and _name not in _AUTH:
            setattr(_suite, _name, None)  # not collected: only the authorization scenarios run here
