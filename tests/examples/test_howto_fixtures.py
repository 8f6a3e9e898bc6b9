"""How-to: the fixtures and markers (docs/fixtures.md)."""

from __future__ import annotations

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:marker]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(json_response=True, flavour="mcp1", echo_tool=False)
async def test_options_per_test(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url) as session:
        tools = await session.list_tools()

    assert tools.tools == []  # echo_tool=False
    assert fake_mcp_server.get_request(method="tools/list").response_format == "json"
    assert fake_mcp_server.options.idle_timeout is None  # the mcp 1.x server never expires sessions


# --8<-- [end:marker]


# --8<-- [start:factory]
@pytest.mark.asyncio
async def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
    with fake_mcp_server_factory.lease(flavour="mcp1") as other:  # verified when the block ends
        async with sdk_session(fake_mcp_server.url), sdk_session(other.url):
            pass
        other.assert_initialize_count(1)
    fake_mcp_server.assert_initialize_count(1)


# --8<-- [end:factory]


# --8<-- [start:http-clients]
@pytest.mark.asyncio
async def test_one_http_client(fake_mcp_server, mcp_http_clients):
    async with sdk_session(fake_mcp_server.url):  # the SDK builds and closes its own HTTP client
        pass

    mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
    mcp_http_clients.assert_all_closed()


# --8<-- [end:http-clients]


# --8<-- [start:fault-marker]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_fault("tools/call", tool="echo", drop_session=True)  # on(...).drop_session()
async def test_fault_from_a_marker(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url) as session:
        with pytest.raises(Exception, match="Session"):  # the SDK client does not recover from a 404
            await session.call_tool("echo", {"text": "hi"})

    assert fake_mcp_server.get_request(method="tools/call").status == 404


@pytest.mark.fake_mcp_server(assert_all_faults_fired=False)  # opt this test out of one teardown check
def test_a_fault_that_may_not_fire(fake_mcp_server):
    fake_mcp_server.on("initialize").respond(503)  # never reached: no client in this test


# --8<-- [end:fault-marker]


# --8<-- [start:closed]
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(assert_no_requests_after_close=True)
async def test_nothing_arrives_after_close(fake_mcp_server):
    async with sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
    fake_mcp_server.mark_client_closed()  # from here on, any request fails the test at teardown


# --8<-- [end:closed]
