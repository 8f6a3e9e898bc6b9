"""The contract suite's era-neutral scenarios in both eras, passed by the reference client (issue 10).

``ReusingSessionClient(url, mode="auto")`` probes, so it runs statelessly against a modern fake and keeps one
session against a handshake fake; the session scenarios still meet a handshake fake (the suite pins them).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from _sdk import MCP2
from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.contract import SessionReuseSuite

pytestmark = pytest.mark.asyncio


class TestReferenceClientInBothEras(SessionReuseSuite):
    eras = ("handshake", "modern")
    call_timeout = 10.0

    @pytest.fixture
    def make_client(self, contract_era: str | None) -> Callable[[str], ReusingSessionClient]:
        if contract_era == "modern" and not MCP2:
            pytest.skip(
                "the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
            )
        return lambda url: ReusingSessionClient(url, mode="auto", read_timeout=5.0)
