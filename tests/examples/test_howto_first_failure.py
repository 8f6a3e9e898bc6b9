"""How-to: what a failure looks like (docs/quickstart.md): a client that opens a session per call."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:first-failure]
async def search(url, query):
    """The client under test, written the common way: a session per call."""
    async with sdk_session(url) as session:
        return await session.call_tool("search", {"query": query})


@pytest.mark.asyncio
async def test_search_keeps_one_session(fake_mcp_server):
    fake_mcp_server.add_tool("search", lambda query: f"results for {query}")

    await search(fake_mcp_server.url, "mcp")
    await search(fake_mcp_server.url, "pytest")

    fake_mcp_server.assert_initialize_count(1)


# --8<-- [end:first-failure]
# The page shows this test failing; here it must fail, on that assertion.
test_search_keeps_one_session = pytest.mark.xfail(raises=AssertionError, strict=True)(test_search_keeps_one_session)


@pytest.mark.asyncio
async def test_the_failure_reads_as_the_quickstart_shows(fake_mcp_server):
    with pytest.raises(AssertionError) as failure:
        await test_search_keeps_one_session(fake_mcp_server)
    message = str(failure.value)
    assert message.startswith("assert_initialize_count(1): 2 initialize requests arrived, expected 1.\n")
    assert "← initialize 2 of 2" in message
    assert message.endswith(
        "Hint: one initialize per tools/call: the client opens a session per call; open one and reuse it"
    )
