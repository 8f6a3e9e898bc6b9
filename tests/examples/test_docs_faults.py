"""docs/faults.md covers every fault, and every marker form it shows scripts a fault.

The page's table at the top lists each fault with a link to its how-to; every action of the fault builder and
every fault method of the server must be in it. Each ``@pytest.mark.fake_mcp_fault(...)`` the page shows is
parsed as the marker parses it, on a real server. The teardown failure the page shows is what teardown prints.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory, ScriptedFault, SessionLossShape, VerificationError
from pytest_fake_mcp._faults._marker import apply_fault_marker
from pytest_fake_mcp._faults._rule import steps_of

PAGE = Path(__file__).resolve().parents[2] / "docs" / "faults.md"
SERVER_FAULTS = (
    "drop_session",
    "restart",
    "advance_idle_clock",
    "cap_sessions",
    "sessions_expired",
    "strict_initialize",
    "down",
    "latency",
    "gate",
)
_MARKER = re.compile(r"(?:@pytest\.mark\.)?(fake_mcp_fault\((?:[^()`]|\([^()`]*\))*\))")


def glance_table() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Every fault at a glance")
    return text[start : text.index("\n## ", start + 1)]


def marker_forms() -> list[str]:
    return sorted(set(_MARKER.findall(PAGE.read_text(encoding="utf-8"))))


@pytest.mark.parametrize("name", [*steps_of(ScriptedFault, "action"), *SERVER_FAULTS])
def test_every_fault_has_a_row_linking_to_its_how_to(name: str) -> None:
    rows = [row for row in glance_table().splitlines() if re.search(rf"\b{name}\(", row)]
    assert rows, f"docs/faults.md: no row of the table at the top names {name}(...)"
    assert all(re.search(r"\]\(#[\w-]+\)", row) for row in rows), f"{name}: a row without a link to its how-to"


def test_the_page_shows_marker_forms() -> None:
    assert len(marker_forms()) >= 20, marker_forms()


@pytest.mark.fake_mcp_server(auth=True, event_store=True)  # what the page's auth and replay faults need
@pytest.mark.parametrize("form", marker_forms())
def test_each_marker_form_on_the_page_scripts_a_fault(form: str, fake_mcp_server: FakeMCPServer) -> None:
    def fake_mcp_fault(*args: Any, **kwargs: Any) -> ScriptedFault:
        return apply_fault_marker(fake_mcp_server.on, args, kwargs)

    rule = eval(form, {"fake_mcp_fault": fake_mcp_fault, "SessionLossShape": SessionLossShape})
    assert isinstance(rule, ScriptedFault)
    assert rule.faults, form
    rule.optional()  # scripted, never meant to fire here


def _post_ping(url: str) -> int:
    """One raw JSON-RPC ``ping`` without a session, from the standard library: any HTTP client will do."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        connection.request("POST", parts.path, body, headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _a_fault_that_never_fires(factory: FakeMCPServerFactory) -> None:
    with factory.lease() as server:  # verified when the block ends
        server.on("initialize").delay(0.5)
        assert _post_ping(server.url) == 400  # no session: refused, and no initialize ever arrives


def test_the_unfired_fault_failure_on_the_page_is_what_teardown_prints(
    fake_mcp_server_factory: FakeMCPServerFactory,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Unfired faults") :]
    shown = re.findall(r"```text\n(.*?)\n```", section, re.DOTALL)[0].splitlines()
    with pytest.raises(VerificationError) as failure:
        _a_fault_that_never_fires(fake_mcp_server_factory)
    printed = [
        f"{type(failure.value).__name__}: {str(failure.value).splitlines()[0]}",
        *str(failure.value).splitlines()[1:],
    ]
    assert printed[: len(shown)] == shown
