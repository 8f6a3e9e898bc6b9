"""The failure outputs docs/journal.md shows are what the assertions print: same first line, same hint.

Each scenario makes one assertion fail the way the page describes, on a real SDK client; the page's ```text
block for that assertion must start with the message's first line and end with its hint. Session ids, times and
the rows the page trims are not compared.
"""

from __future__ import annotations

import asyncio
import contextlib
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
}


def test_every_shown_failure_has_a_scenario() -> None:
    assert sorted(shown_failures()) == sorted(SCENARIOS)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_the_page_shows_the_real_failure(name: str, fake_mcp_server: Any, mcp_http_clients: Any) -> None:
    with pytest.raises(AssertionError) as failure:
        async with asyncio.timeout(20):
            await SCENARIOS[name](fake_mcp_server, mcp_http_clients)
    printed = str(failure.value).splitlines()
    shown = shown_failures()[name]
    assert shown[0] == printed[0], f"docs/journal.md shows another first line for {name}"
    assert shown[-1] == printed[-1], f"docs/journal.md shows another hint for {name}"
