"""The just-in-time MCP host as its design note first wrote it: a slow server leaks a session and blocks the others.

``DraftMCPHost`` registers one server at a time under a host-wide lock, and on a registration timeout
it cancels the ``initialize`` still in flight. Both tests are those of ``examples/test_jit_host.py``
with this host in place of ``MCPHost``.
"""

from __future__ import annotations

import asyncio

import pytest
from clients.jit_host import DraftMCPHost, ServerConfig
from clients.sdk import WAIT

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory

pytestmark = [pytest.mark.asyncio, pytest.mark.fake_mcp_server(echo_tool=False)]

REGISTRATION_TIMEOUT = 1.0


async def test_registration_timeout_closes_what_it_opened(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    fake_mcp_server.add_tool("forecast", lambda city: f"{city}: sunny")
    with fake_mcp_server_factory.lease(echo_tool=False) as slow:
        gate = slow.gate("slow initialize")
        slow.on("initialize").delay(until=gate)  # the slow server answers its handshake only when the test says
        servers = [ServerConfig(name="weather", url=fake_mcp_server.url), ServerConfig(name="slow", url=slow.url)]

        async with asyncio.timeout(WAIT), DraftMCPHost(servers, registration_timeout=REGISTRATION_TIMEOUT) as host:
            await host.register_all(["weather", "slow"])
            gate.open()

        # Fails: the host cancelled the initialize in flight; the server had created the session
        # anyway, and with its id never received, nobody DELETEs it.
        slow.assert_all_sessions_closed()


async def test_a_slow_server_does_not_hold_up_the_others(
    fake_mcp_server: FakeMCPServer, fake_mcp_server_factory: FakeMCPServerFactory
) -> None:
    weather = fake_mcp_server
    with fake_mcp_server_factory.lease(echo_tool=False) as places:
        # The places server answers its initialize only once the weather server has served a call.
        gate = places.gate("places initialize")
        places.on("initialize").delay(until=gate)
        places.add_tool("lookup", lambda city: f"{city}: 59.9N 10.7E")

        def forecast(city: str) -> str:
            gate.open()
            return f"{city}: sunny"

        weather.add_tool("forecast", forecast)
        servers = [ServerConfig(name="places", url=places.url), ServerConfig(name="weather", url=weather.url)]

        async with DraftMCPHost(servers, registration_timeout=REGISTRATION_TIMEOUT) as host:
            async with asyncio.timeout(WAIT):
                await asyncio.gather(
                    host.call_tool("places-lookup", {"city": "Oslo"}),
                    host.call_tool("weather-forecast", {"city": "Oslo"}),
                    return_exceptions=True,
                )

        # Fails: the weather server's registration waited behind the places server's, so the
        # forecast that would have let places answer came only after places had timed out.
        places.assert_tool_ran("lookup", times=1)
