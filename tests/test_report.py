"""The sequence diagram, the stale-id marks and the HTML trace (_report.py, _analysis.py).

Layout is checked on real SDK traffic with the fake; the timing corner cases of the stale rule
(requests sent alongside the one that learnt, a DELETE overtaking the handshake notification)
cannot be produced on demand over loopback, so those use hand-built journal records.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pytest_fake_mcp import Exchange, FakeMCPServer, JournalEvent, Outcome
from pytest_fake_mcp._record._analysis import CLIENT_CLOSED, short_ids, stale_uses
from pytest_fake_mcp._record._report import render_diagram, render_html

MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
if MCP2:
    from mcp import MCPError as SDKError
else:
    from mcp import McpError as SDKError

ARROW_LINE = re.compile(r"^\s*[\d.]+ms  client ── (?P<label>.+?) ─*▶ server   (?P<result>.*)$")
A, B = "3f2a9c0011", "9b1c77de22"


@contextlib.asynccontextmanager
async def sdk_session(url: str, *, terminate_on_close: bool = True) -> AsyncIterator[Any]:
    async with (
        asyncio.timeout(10),
        streamable_http_client(url, terminate_on_close=terminate_on_close) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def ex(seq: int, method: str | None = "tools/call", **fields: Any) -> Exchange:
    """A journal record as the fake writes one (for timings loopback cannot produce on demand)."""
    http_method = fields.pop("http_method", "POST")
    kind = fields.pop("kind", "request" if http_method == "POST" else "delete")
    started = fields.pop("started", float(seq))
    return Exchange(
        seq=seq,
        http_method=http_method,
        path="/mcp",
        rpc_method=method if http_method == "POST" else None,
        kind=kind,
        target="echo" if method == "tools/call" else None,
        started=started,
        ended=fields.pop("ended", started + 0.01),
        status=fields.pop("status", 200),
        outcome=fields.pop("outcome", Outcome.COMPLETE),
        **fields,
    )


def arrow_lines(diagram: str) -> list[str]:
    return [line for line in diagram.splitlines() if "▶ server" in line]


# --- layout on real traffic ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_diagram_lines_up_the_server_column_and_shortens_session_ids(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("a_tool_with_a_rather_long_name", lambda: "ok")
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "x"})
        await session.call_tool("a_tool_with_a_rather_long_name", {})
    sid = fake_mcp_server.sessions[0].id
    diagram = render_diagram(fake_mcp_server.journal.exchanges, fake_mcp_server.journal.events)
    lines = arrow_lines(diagram)
    assert len(lines) == len(fake_mcp_server.journal.exchanges)
    assert len({line.index("▶ server") for line in lines}) == 1, diagram
    assert len({line.index("client") for line in lines}) == 1, diagram
    assert f"── initialize ────────────────────────────────────────▶ server   200 sid={sid[:4]}" in lines[0]
    assert f"── tools/call a_tool_with_a_rather_long_name [{sid[:4]}] ──▶ server   200" in diagram
    assert f"── DELETE [{sid[:4]}] ─────────────────────────────────────▶ server   200" in lines[-1]
    assert str(fake_mcp_server.journal) == diagram


@pytest.mark.asyncio
async def test_diagram_notes_the_harmless_delete_but_not_the_request_that_learnt_with_the_drop_in_order(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "before"})
        fake_mcp_server.drop_session()
        with pytest.raises(SDKError):
            await session.call_tool("echo", {"text": "lost"})
    figures = fake_mcp_server.figures
    sid = figures.sessions[0].id[:4]
    diagram = render_diagram(figures.exchanges, figures.events, sessions=figures.sessions).splitlines()
    drop = next(i for i, line in enumerate(diagram) if "✂ drop_session(every live session)" in line)
    after = [ARROW_LINE.match(line) for line in diagram[drop + 1 :]]
    learnt, delete = (m for m in after if m)
    assert (learnt["label"], learnt["result"].split()[0]) == (f"tools/call echo [{sid}]", "404")
    assert "←" not in learnt["result"]
    assert delete["label"] == f"DELETE [{sid}]"
    assert delete["result"].startswith("404 ")
    learnt_at = figures.exchanges[-2].seq
    assert delete["result"].endswith(f"   ← note: DELETE of {sid}, already ended (404 at #{learnt_at}): harmless")
    strict = render_diagram(
        figures.exchanges,
        figures.events,
        sessions=figures.sessions,
        marks=stale_uses(figures.exchanges, figures.sessions, strict=True),
    )
    assert f"DELETE [{sid}!]" in strict
    assert f"← stale: {sid} already ended (404 at #{learnt_at})" in strict
    assert all("!" not in line for line in diagram[:drop])


@pytest.mark.asyncio
async def test_diagram_shows_an_open_get_stream_as_still_in_flight(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "x"})
        diagram = str(fake_mcp_server.journal)
    assert re.search(r"── GET stream \[\w{4}\] ─*▶ server   200 …", diagram), diagram


@pytest.mark.asyncio
async def test_diagram_of_a_long_journal_elides_the_middle_with_a_count_and_keeps_marked_exchanges(
    fake_mcp_server: FakeMCPServer,
) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        for i in range(100):
            await session.call_tool("echo", {"text": str(i)})
    exchanges = fake_mcp_server.journal.exchanges
    assert len(exchanges) > 100
    diagram = render_diagram(exchanges, marks={50: "look here"})
    lines = diagram.splitlines()
    assert len(lines) < 70
    assert "initialize" in lines[0]
    assert "DELETE" in lines[-1]
    marked = next(i for i, line in enumerate(lines) if line.endswith("← look here"))
    assert "exchanges not shown" in lines[marked - 2]
    assert "exchanges not shown" in lines[marked + 2]
    hidden = [re.search(r"⋮ (\d+) exchanges not shown \(#(\d+)–#(\d+)\)", line) for line in lines]
    runs = [(int(m[1]), int(m[2]), int(m[3])) for m in hidden if m]
    assert [count for count, first, last in runs] == [last - first + 1 for count, first, last in runs]
    assert sum(count for count, _, _ in runs) + len(arrow_lines(diagram)) == len(exchanges)


def test_diagram_marks_faults_under_their_exchange_and_events_and_close_where_they_happened() -> None:
    exchanges = [
        ex(1, "initialize", response_session_id=A),
        ex(2, session_id=A, faults=("Delay 2.0s on POST tools/call in any session, once",)),
        ex(3, session_id=A, status=404),
        ex(4, "initialize", session_id=A, status=404),
    ]
    events = [
        JournalEvent(at=2.7, after_seq=2, text="drop_session(3f2a9c00)"),
        JournalEvent(at=9.0, after_seq=4, text=CLIENT_CLOSED),
    ]
    assert render_diagram(exchanges, events).splitlines() == [
        "   0.0ms  client ── initialize ──────────────▶ server   200 sid=3f2a",
        "1000.0ms  client ── tools/call echo [3f2a] ──▶ server   200",
        "          ✂ fault: Delay 2.0s on POST tools/call in any session, once",
        "          ✂ drop_session(3f2a9c00)",
        "2000.0ms  client ── tools/call echo [3f2a] ──▶ server   404",
        "3000.0ms  client ── initialize [3f2a!] ──────▶ server   404   ← stale session id on initialize",
        "          ■ client closed (mark_client_closed)",
    ]


def test_short_ids_grow_past_four_characters_only_to_keep_ids_apart() -> None:
    assert short_ids([A, B, None]) == {A: "3f2a", B: "9b1c"}
    assert short_ids(["3f2a1", "3f2a2", "77de"]) == {"3f2a1": "3f2a1", "3f2a2": "3f2a2", "77de": "77de"}


# --- the stale-id rule ------------------------------------------------------------------------------


def test_stale_uses_spare_requests_sent_alongside_the_one_that_learnt() -> None:
    exchanges = [
        ex(1, "initialize", response_session_id=A, started=0.0, ended=0.1),
        ex(2, session_id=A, status=404, started=1.0, ended=1.2),  # learnt at 1.2
        ex(3, session_id=A, status=404, started=1.1, ended=1.3),  # already sent: not stale
        ex(4, session_id=A, status=404, started=1.4, ended=1.5),  # sent after learning: stale
    ]
    assert stale_uses(exchanges) == {4: "stale: 3f2a already ended (404 at #2)"}


def test_stale_uses_flag_a_get_reconnect_and_a_second_delete_after_the_clients_own_delete() -> None:
    exchanges = [
        ex(1, "initialize", response_session_id=A, started=0.0, ended=0.1),
        ex(2, None, http_method="DELETE", session_id=A, started=1.0, ended=1.1),
        ex(3, None, http_method="GET", kind="stream", session_id=A, status=404, started=2.0),
        ex(4, None, http_method="DELETE", session_id=A, status=404, started=3.0),
    ]
    assert stale_uses(exchanges) == {
        3: "stale: 3f2a already ended (DELETE at #2)",
        4: "stale: 3f2a already ended (DELETE at #2)",
    }


def test_stale_uses_exempt_the_handshake_notification_a_delete_overtook() -> None:
    """protocol.md §6 item 24: the 2.x SDK's DELETE can reach the server before notifications/initialized."""
    exchanges = [
        ex(1, "initialize", response_session_id=A, started=0.0, ended=0.1),
        ex(2, None, http_method="DELETE", session_id=A, started=0.2, ended=0.3),
        ex(3, "notifications/initialized", kind="notification", session_id=A, status=404, started=0.4),
    ]
    assert stale_uses(exchanges) == {}


def test_stale_uses_flag_initialize_with_a_live_session_id_too() -> None:
    exchanges = [ex(1, "initialize", response_session_id=A), ex(2, "initialize", session_id=A)]
    assert stale_uses(exchanges) == {2: "session id on initialize"}


# --- the HTML trace ---------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)
async def test_html_trace_is_self_contained_and_escapes_what_the_client_sent(fake_mcp_server: FakeMCPServer) -> None:
    async with sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("<b>bold</b>", {})
    figures = fake_mcp_server.figures
    page = render_html("tests/test_x.py::test_y[<1>]", "AssertionError: <boom>", [("fake_mcp_server", figures)])
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page
    assert "src=" not in page
    assert "<link" not in page
    assert "@import" not in page
    assert "<b>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "&lt;boom&gt;" in page
    assert page.count('<td class="a">') == len(figures.exchanges)
    assert "tools/call &lt;b&gt;bold&lt;/b&gt;" in page
