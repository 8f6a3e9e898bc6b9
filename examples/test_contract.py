"""The contract suite: the whole session-reuse battery on your client, by subclassing one class.

Every scenario (reuse, each shape of session loss, concurrent first calls, 5xx and tool errors that are
not session loss, a clean close) runs against a fresh ``fake_mcp_server``. Replace the client with yours.
"""

from __future__ import annotations

# --8<-- [start:contract]
import pytest

from pytest_fake_mcp.client import ReusingSessionClient
from pytest_fake_mcp.contract import SessionReuseSuite


class TestReusingSessionClientContract(SessionReuseSuite):
    concurrency = 3  # knobs are class attributes

    @pytest.fixture
    def make_client(self):
        # read_timeout bounds each response: mcp 1.x waits for ever on an SSE stream cut before its answer
        return lambda url: ReusingSessionClient(url, read_timeout=2.0)


# --8<-- [end:contract]
