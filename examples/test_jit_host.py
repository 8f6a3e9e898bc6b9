"""The MCP host registers servers just in time: three fakes at once, one of them slow.

Each fake is a separate MCP server (``fake_mcp_server`` plus ``fake_mcp_server_factory.lease()``).
The slow one holds its ``initialize`` at a gate, so "slow" is a fact of the test, not a race.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.jit_host import MCPHost, RegistrationTimeoutError, ServerConfig
from clients.sdk import WAIT, text

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory, HTTPClientCounter

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]

REGISTRATION_TIMEOUT = 1.0


# --8<-- [start:timeout]
async def test_registration_timeout_closes_what_it_opened(
    fake_mcp_server: FakeMCPServer,
    fake_mcp_server_factory: FakeMCPServerFactory,
    mcp_http_clients: HTTPClientCounter,
) -> None:
    weather = fake_mcp_server
    weather.add_tool("forecast", lambda city: f"{city}: sunny")
    with (
        fake_mcp_server_factory.lease(echo_tool=False) as places,
        fake_mcp_server_factory.lease(echo_tool=False) as slow,
    ):
        places.add_tool("lookup", lambda city: f"{city}: 59.9N 10.7E")
        gate = slow.gate("slow initialize")
        slow.on("initialize").delay(until=gate)  # the slow server answers its handshake only when the test says
        servers = [ServerConfig(name="weather", url=weather.url), ServerConfig(name="places", url=places.url)]
        servers.append(ServerConfig(name="slow", url=slow.url))

        async with asyncio.timeout(WAIT), MCPHost(servers, registration_timeout=REGISTRATION_TIMEOUT) as host:
            failures = await host.register_all(["weather", "places", "slow"])  # an agent needs all three
            tools = host.tool_names
            gate.open()  # the slow server answers at last, after the host gave up on it
            # leaving the block closes the host: every session DELETEd, the late one included

        assert list(failures) == ["slow"]
        assert isinstance(failures["slow"], RegistrationTimeoutError)
        assert tools == ["places-lookup", "weather-forecast"]  # the others registered; prefixed server-tool
        slow.assert_initialize_count(1)
        slow.assert_all_sessions_closed()  # the session the slow handshake created got its DELETE
        slow.assert_sessions(created=1, live=0)
        places.assert_all_sessions_closed()
    weather.assert_all_sessions_closed()
    mcp_http_clients.assert_created(1)  # one HTTP client for the three servers
    mcp_http_clients.assert_all_closed()
    # --8<-- [end:timeout]


# --8<-- [start:not-blocking]
async def test_a_slow_server_does_not_hold_up_the_others(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    weather = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as places:
        # The places server answers its initialize only once the weather server has served a call:
        # a host that registers one server at a time cannot get there.
        gate = places.gate("places initialize")
        places.on("initialize").delay(until=gate)
        places.add_tool("lookup", lambda city: f"{city}: 59.9N 10.7E")

        def forecast(city: str) -> str:
            gate.open()
            return f"{city}: sunny"

        weather.add_tool("forecast", forecast)
        servers = [ServerConfig(name="places", url=places.url), ServerConfig(name="weather", url=weather.url)]

        async with MCPHost(servers, registration_timeout=REGISTRATION_TIMEOUT) as host:
            async with asyncio.timeout(WAIT):
                # The agent's first two tool calls, made at once: each registers its server on first use.
                outcomes = await asyncio.gather(
                    host.call_tool("places-lookup", {"city": "Oslo"}),
                    host.call_tool("weather-forecast", {"city": "Oslo"}),
                    return_exceptions=True,
                )

        places.assert_tool_ran("lookup", times=1)
        weather.assert_tool_ran("forecast", times=1)
        assert [text(outcome) for outcome in outcomes] == ["Oslo: 59.9N 10.7E", "Oslo: sunny"]
        places.assert_all_sessions_closed()
    weather.assert_all_sessions_closed()
    # --8<-- [end:not-blocking]


async def test_tools_are_routed_by_their_server_prefix(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    with fake_mcp_server_factory.lease(echo_tool=False) as other:
        fake_mcp_server.add_tool("search", lambda query: f"docs about {query}")
        other.add_tool("search", lambda query: f"web pages about {query}")  # the same tool name on both
        servers = [ServerConfig(name="docs", url=fake_mcp_server.url), ServerConfig(name="web", url=other.url)]

        async with asyncio.timeout(WAIT), MCPHost(servers) as host:
            web = text(await host.call_tool("web-search", {"query": "mcp"}))
            assert not host.is_registered("docs")  # registered on first use only
            docs = text(await host.call_tool("docs-search", {"query": "mcp"}))
            assert host.tool_names == ["docs-search", "web-search"]

        assert (docs, web) == ("docs about mcp", "web pages about mcp")
        other.assert_tool_ran("search", times=1)
        other.assert_initialize_count(1)
        other.assert_all_sessions_closed()
    fake_mcp_server.assert_tool_ran("search", times=1)
    fake_mcp_server.assert_initialize_count(1)
