"""How-to: options for a whole directory by overriding ``fake_mcp_options`` (docs/fixtures.md)."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:options-fixture]
# conftest.py: every fake_mcp_server under this directory answers in JSON, named "search-server"
@pytest.fixture
def fake_mcp_options(fake_mcp_options):  # ini defaults and markers already applied
    return fake_mcp_options.merged(json_response=True, server_name="search-server")


# --8<-- [end:options-fixture]


@pytest.mark.asyncio
async def test_the_directory_defaults_apply(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url):
        pass
    init = fake_mcp_server.get_request(method="initialize")
    assert init.response_format == "json"
    assert init.response_messages[0]["result"]["serverInfo"]["name"] == "search-server"
