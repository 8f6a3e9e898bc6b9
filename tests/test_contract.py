"""The reference client passes the whole contract suite (pytest_fake_mcp.contract), on the installed SDK line."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.contract import SessionReuseSuite

# mcp 1.x waits for ever on an SSE stream cut before its response: bound the wait for each response.
READ_TIMEOUT = 5.0  # well above a loaded machine's round trip, well under the suite's call_timeout


class TestReferenceClient(SessionReuseSuite):
    client_timeout = READ_TIMEOUT  # its own bound on a call: the slow-tool scenario runs

    @pytest.fixture
    def make_client(self) -> Callable[[str], ReusingSessionClient]:
        return lambda url: ReusingSessionClient(url, read_timeout=READ_TIMEOUT)


@pytest.mark.fake_mcp_server(flavour="mcp1")
class TestReferenceClientOnAnMcp1FlavouredServer(TestReferenceClient):
    """The fake answering as python-sdk 1.x servers do (their 404 bodies, no idle timeout)."""
