"""ReusingSessionClient against the fake server: the wire oracles hold through outages and restarts."""

from __future__ import annotations

import asyncio
import gc

import pytest

from pytest_fake_mcp import FakeMCPServer
from pytest_fake_mcp.client import ReusingSessionClient, SessionClosedError, SessionLostError


@pytest.mark.asyncio
async def test_an_outage_fails_clearly_and_never_resends_a_dead_id(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
        await client.call_tool("echo", {"text": "before"})
        with fake_mcp_server.sessions_expired(), pytest.raises(SessionLostError, match="lost 3 times"):
            await client.call_tool("echo", {"text": "during"})
        result = await client.call_tool("echo", {"text": "after"})
    assert result.content[0].text == "after"
    fake_mcp_server.assert_no_stale_session_ids()
    assert fake_mcp_server.figures.initialize_count == 1 + 3 + 1  # first, three tries in the outage, after
    fake_mcp_server.assert_tool_ran("echo", times=2)  # nothing ran during the outage


@pytest.mark.asyncio
async def test_a_drop_then_restart_each_cost_one_initialize(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
        await client.call_tool("echo", {"text": "a"})
        fake_mcp_server.drop_session()
        await client.call_tool("echo", {"text": "b"})
        fake_mcp_server.restart()
        await client.call_tool("echo", {"text": "c"})
    fake_mcp_server.assert_initialize_count(3)
    fake_mcp_server.assert_session_reused()
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_all_sessions_closed()
    fake_mcp_server.assert_sessions(created=3, ended_by={"dropped": 1, "restart": 1, "delete": 1})


@pytest.mark.asyncio
async def test_a_caller_cancelled_as_its_call_fails_leaves_no_error_unretrieved(
    fake_mcp_server: FakeMCPServer,
) -> None:
    # Found by the race engine (the reference cache under a schedule where a `use` was cancelled in the
    # very step its tools/call failed with "Connection closed"); pinned here on stock asyncio.
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
            session = await client._session()
            callers: list[asyncio.Task[object]] = []

            async def failing_call(_session: object) -> object:
                callers[0].cancel()  # the caller's cancellation lands in the step this call fails
                raise ConnectionError("Connection closed")

            callers.append(asyncio.create_task(client._guarded(session, failing_call)))
            with pytest.raises(asyncio.CancelledError):
                await callers[0]
            callers.clear()  # the failed call task is now garbage: collecting it reports an unretrieved error
            gc.collect()
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))], reported


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["reset_connection", "close_connection"])
@pytest.mark.fake_mcp_server(era="handshake")
async def test_a_connection_cut_mid_call_fails_that_call_and_the_next_opens_a_new_session(
    fake_mcp_server: FakeMCPServer, fault: str
) -> None:
    # mcp 2.x keeps a ClientSession whose transport failed; every later call would fail "Connection closed".
    getattr(fake_mcp_server.on("tools/call", arguments={"text": "cut"}), fault)()
    async with asyncio.timeout(20), ReusingSessionClient(fake_mcp_server.url, read_timeout=5) as client:
        await client.call_tool("echo", {"text": "before"})
        with pytest.raises(SessionClosedError, match="was not retried because it may have run"):
            await client.call_tool("echo", {"text": "cut"})
        result = await client.call_tool("echo", {"text": "after"})
        assert result.content[0].text == "after"
        await client.call_tool("echo", {"text": "again"})
    fake_mcp_server.assert_initialize_count(2)  # one new session, not one per call
    fake_mcp_server.assert_no_stale_session_ids()
    fake_mcp_server.assert_all_sessions_closed()  # the cut session's id was DELETEd, not left open
    assert fake_mcp_server.executions("echo", {"text": "cut"}) == []
