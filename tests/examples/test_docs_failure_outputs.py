"""The failure outputs docs/journal.md shows are what the assertions print: same first line, same hint.

Each scenario makes one assertion fail the way the page describes, on a real SDK client; the page's ```text
block for that assertion must start with the message's first line and end with its hint. Session ids, times and
the rows the page trims are not compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from _howto_sdk import sdk_session

PAGE = Path(__file__).resolve().parents[2] / "docs" / "journal.md"
SECTION = "### What each failure says"


def shown_failures() -> dict[str, list[str]]:
    """The page's failure blocks, keyed by the call their first line names (``assert_tool_ran``)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n### ", len(SECTION))]
    blocks = re.findall(r"```text\n(.*?)\n```", section, re.DOTALL)
    return {block.split("(", 1)[0]: block.splitlines() for block in blocks}


async def _call(server: Any, text: str) -> None:
    async with sdk_session(server.url) as session:
        await session.call_tool("echo", {"text": text})


async def initialize_count(server: Any, clients: Any) -> None:
    await _call(server, "a")
    await _call(server, "b")
    server.assert_initialize_count(1)


async def sessions(server: Any, clients: Any) -> None:
    await _call(server, "a")
    server.assert_sessions(created=1, ended_by={"dropped": 1})


async def session_reused(server: Any, clients: Any) -> None:
    await _call(server, "a")
    await _call(server, "b")
    server.assert_session_reused()


async def no_stale_session_ids(server: Any, clients: Any) -> None:
    async with sdk_session(server.url) as session:
        await session.call_tool("echo", {"text": "a"})
        server.drop_session()
        for _ in range(2):
            with contextlib.suppress(Exception):
                await session.call_tool("echo", {"text": "b"})
    server.assert_no_stale_session_ids()


async def all_sessions_closed(server: Any, clients: Any) -> None:
    async with contextlib.AsyncExitStack() as stack:  # asserts before the close, outside the SDK's task groups
        session = await stack.enter_async_context(sdk_session(server.url))
        await session.call_tool("echo", {"text": "a"})
        try:
            server.assert_all_sessions_closed()
        finally:
            await stack.aclose()


async def tool_ran(server: Any, clients: Any) -> None:
    await _call(server, "a")
    server.assert_tool_ran("echo", times=2)


async def concurrent(server: Any, clients: Any) -> None:
    async with sdk_session(server.url) as session:
        for text in "ab":
            await session.call_tool("echo", {"text": text})
    server.assert_concurrent(min_in_flight=2)


async def no_requests_after_close(server: Any, clients: Any) -> None:
    async with sdk_session(server.url) as session:
        await session.call_tool("echo", {"text": "a"})
        server.mark_client_closed()
        await session.call_tool("echo", {"text": "b"})
    server.assert_no_requests_after_close()


async def created(server: Any, clients: Any) -> None:
    await _call(server, "a")
    await _call(server, "b")
    clients.assert_created(1)


async def discover_once(server: Any, clients: Any) -> None:
    from mcp import Client

    for _ in range(2):  # a Client per call
        async with Client(server.url) as client:
            await client.call_tool("echo", {"text": "a"})
    server.assert_discover_once()


async def list_results_cached(server: Any, clients: Any) -> None:
    from mcp import Client

    server.on("tools/list").always().cache_hint(ttl_ms=60_000)
    for _ in range(2):
        async with Client(server.url) as client:
            await client.list_tools()
    server.assert_list_results_cached()


async def no_session_ids(server: Any, clients: Any) -> None:
    from mcp import Client, MCPError

    server.on("tools/call").switch_era("modern")
    async with Client(server.url, mode="legacy") as client:
        with contextlib.suppress(MCPError):
            await client.call_tool("echo", {"text": "a"})
    server.assert_no_session_ids()


async def stopped_after_era_refusal(server: Any, clients: Any) -> None:
    for _ in range(2):  # tries the handshake again
        with contextlib.suppress(Exception):
            async with sdk_session(server.url):
                pass
    server.assert_stopped_after_era_refusal()


SCENARIOS: dict[str, Callable[[Any, Any], Awaitable[None]]] = {
    "assert_initialize_count": initialize_count,
    "assert_sessions": sessions,
    "assert_session_reused": session_reused,
    "assert_no_stale_session_ids": no_stale_session_ids,
    "assert_all_sessions_closed": all_sessions_closed,
    "assert_tool_ran": tool_ran,
    "assert_concurrent": concurrent,
    "assert_no_requests_after_close": no_requests_after_close,
    "assert_created": created,
    "assert_discover_once": discover_once,
    "assert_list_results_cached": list_results_cached,
    "assert_no_session_ids": no_session_ids,
    "assert_stopped_after_era_refusal": stopped_after_era_refusal,
}
MODERN_ONLY = pytest.mark.fake_mcp_server(era="modern")
NEEDS_MCP2 = pytest.mark.skipif(
    int(importlib.metadata.version("mcp").split(".")[0]) < 2, reason="the 2026-07-28 era needs the mcp 2.x client"
)
MARKS = {
    "assert_discover_once": [MODERN_ONLY, NEEDS_MCP2],
    "assert_list_results_cached": [MODERN_ONLY, NEEDS_MCP2],
    "assert_no_session_ids": [NEEDS_MCP2],
    "assert_stopped_after_era_refusal": [MODERN_ONLY],
}


def test_every_shown_failure_has_a_scenario() -> None:
    assert sorted(shown_failures()) == sorted(SCENARIOS)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [pytest.param(name, marks=MARKS.get(name, ())) for name in sorted(SCENARIOS)])
async def test_the_page_shows_the_real_failure(name: str, fake_mcp_server: Any, mcp_http_clients: Any) -> None:
    with pytest.raises(AssertionError) as failure:
        async with asyncio.timeout(20):
            await SCENARIOS[name](fake_mcp_server, mcp_http_clients)
    printed = str(failure.value).splitlines()
    shown = shown_failures()[name]
    assert shown[0] == printed[0], f"docs/journal.md shows another first line for {name}"
    assert shown[-1] == printed[-1], f"docs/journal.md shows another hint for {name}"
