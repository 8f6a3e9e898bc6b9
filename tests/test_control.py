"""The ``/_fake/`` control API of ``fake-mcp serve``, driven over loopback by plain HTTP and by SDK clients."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _node import NODE_DIR, require_node
from _sdk import MCP2, SDKError, sdk_session
from _served import Served, serve

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
REQUIRED_FIELDS = {"http_method", "rpc_method", "status", "session_id", "faults"}


@pytest.fixture(scope="module")
def module_server() -> Iterator[Served]:
    with serve("--profile", "conformance") as served:
        yield served


@pytest.fixture
def served(module_server: Served) -> Served:
    """The module's server, reset to a clean fake for this test."""
    assert module_server.control("reset").status_code == 200
    return module_server


def _code(error: BaseException) -> int:
    return error.error.code if not MCP2 else error.code  # type: ignore[attr-defined]


# --- drop_session, restart, reset --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_drop_session_ends_every_live_session_and_the_sdk_client_meets_404(served: Served) -> None:
    async with sdk_session(served.url) as session:
        await session.call_tool("echo", {"text": "before"})
        response = served.control("drop_session")
        assert response.status_code == 200
        [dropped] = response.json()["dropped"]
        with pytest.raises(SDKError) as caught:
            await session.call_tool("echo", {"text": "after"})
    assert _code(caught.value) in (-32600, 32600)  # 2.x: the body's code; 1.x: +32600 "Session terminated"
    late = [e for e in served.journal() if e["rpc_method"] == "tools/call" and e["status"] == 404]
    assert [e["session_id"] for e in late] == [dropped]


@pytest.mark.asyncio
async def test_drop_session_by_id_ends_only_that_session(served: Served) -> None:
    async with sdk_session(served.url) as first, sdk_session(served.url) as second:
        sessions = {e["response_session_id"] for e in served.journal() if e["rpc_method"] == "initialize"}
        assert len(sessions) == 2
        victim = sorted(sessions)[0]
        assert served.control("drop_session", {"session_id": victim}).json() == {"dropped": [victim]}
        outcomes = []
        for session in (first, second):
            try:
                await session.send_ping()
                outcomes.append("ok")
            except SDKError:
                outcomes.append("404")
    assert sorted(outcomes) == ["404", "ok"]
    assert served.control("drop_session", {"session_id": victim}).json() == {"dropped": []}


def test_drop_session_rejects_a_bad_body_with_the_reason(served: Served) -> None:
    bad_type = served.control("drop_session", {"session_id": 7})
    unknown = served.control("drop_session", {"session": "x"})
    not_json = served.http.post("/_fake/drop_session", content=b"{nope", headers={"content-type": "application/json"})
    assert (bad_type.status_code, unknown.status_code, not_json.status_code) == (400, 400, 400)
    assert "must be a string" in bad_type.json()["error"]
    assert "unknown field(s) session" in unknown.json()["error"]
    assert "not JSON" in not_json.json()["error"]


def test_restart_forgets_every_session(served: Served) -> None:
    with httpx.Client(timeout=10) as client:
        ids = [client.post(served.url, json=INIT, headers=HEADERS).headers["mcp-session-id"] for _ in range(2)]
        response = served.control("restart")
        assert response.status_code == 200
        assert sorted(response.json()["forgotten"]) == sorted(ids)
        after = client.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={
            **HEADERS, "mcp-session-id": ids[0], "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert after.status_code == 404


def test_reset_clears_journal_and_faults_and_serves_the_profile_again(served: Served) -> None:
    with httpx.Client(timeout=10) as client:
        client.post(served.url, json=INIT, headers=HEADERS)
    assert served.control("faults", {"method": "tools/call", "respond": 503}).status_code == 201
    assert served.journal()
    assert served.control("reset").json() == {"reset": True}
    assert served.journal() == []
    assert served.http.get("/_fake/faults").json() == {"faults": []}


@pytest.mark.asyncio
async def test_reset_keeps_the_conformance_profile(served: Served) -> None:
    async with sdk_session(served.url) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
    assert {"echo", "test_simple_text", "test_sampling", "test_elicitation"} <= names


# --- faults --------------------------------------------------------------------------------------------


def test_posted_fault_fires_like_the_marker(served: Served) -> None:
    response = served.control("faults", {"method": "tools/call", "tool": "echo", "respond": 503})
    assert response.status_code == 201
    assert "503" in response.json()["fault"]
    with httpx.Client(timeout=10) as client:
        sid = client.post(served.url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        params = {"name": "echo", "arguments": {"text": "x"}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        statuses = [client.post(served.url, json=call, headers=headers).status_code for _ in range(2)]
    assert statuses == [503, 200]  # once, as the marker's default count
    faulted = [e for e in served.journal() if e["rpc_method"] == "tools/call"]
    assert [bool(e["faults"]) for e in faulted] == [True, False]
    assert served.http.get("/_fake/faults").json()["faults"] == [response.json()["fault"]]


def test_posted_fault_takes_counts_and_keyword_actions(served: Served) -> None:
    body = {"method": "ping", "nth": 2, "respond": {"status": 500, "message": "boom"}}
    assert served.control("faults", body).status_code == 201
    with httpx.Client(timeout=10) as client:
        sid = client.post(served.url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        statuses = [client.post(served.url, json=ping, headers=headers).status_code for _ in range(3)]
    assert statuses == [200, 500, 200]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"method": "tools/call"}, "give an action"),
        ({"method": "tools/cal", "respond": 500}, "tools/cal"),
        ({"method": "ping", "respond": 500, "colour": "red"}, "colour"),
        ({"method": "ping", "respond": 99}, "100..599"),
    ],
    ids=["no-action", "typo-method", "unknown-field", "bad-status"],
)
def test_a_bad_fault_is_refused_with_400_naming_the_problem(
    served: Served, body: dict[str, Any], expected: str
) -> None:
    response = served.control("faults", body)
    assert response.status_code == 400
    assert expected in response.json()["error"]
    assert served.http.get("/_fake/faults").json() == {"faults": []}


# --- journal ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_journal_lists_every_exchange_with_its_fields(served: Served) -> None:
    async with sdk_session(served.url) as session:
        await session.call_tool("echo", {"text": "hi"})
    exchanges = served.journal()
    assert all(set(e) >= REQUIRED_FIELDS for e in exchanges)
    methods = [(e["http_method"], e["rpc_method"], e["status"]) for e in exchanges if e["http_method"] == "POST"]
    assert methods[:2] == [("POST", "initialize", 200), ("POST", "notifications/initialized", 202)]
    assert ("POST", "tools/call", 200) in methods
    sid = exchanges[0]["response_session_id"]
    assert all(e["session_id"] == sid for e in exchanges[1:])
    assert {e["era"] for e in exchanges} == {"handshake"}  # the era that answered each exchange


def test_control_requests_stay_out_of_the_journal(served: Served) -> None:
    served.control("drop_session")
    served.http.get("/_fake/faults")
    assert served.journal() == []


# --- routing: off the MCP path, never reachable from it ---------------------------------------------------


def test_unknown_control_endpoint_lists_the_known_ones_and_wrong_verbs_get_405(served: Served) -> None:
    unknown = served.http.post("/_fake/shutdown", json={})
    wrong_verb = served.http.get("/_fake/reset")
    assert unknown.status_code == 404
    assert "POST /_fake/drop_session" in unknown.json()["error"]
    assert wrong_verb.status_code == 405
    assert "use POST" in wrong_verb.json()["error"]


def test_the_mcp_endpoint_does_not_reach_the_control_api(served: Served) -> None:
    with httpx.Client(timeout=10) as client:
        under = client.post(f"{served.url}/_fake/reset", json={}, headers=HEADERS)
        sid = client.post(served.url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        as_rpc = client.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": "_fake/reset"}, headers=headers)
        still = client.post(served.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=headers)
    assert under.status_code == 404
    assert '"code":-32601' in as_rpc.text  # an unknown JSON-RPC method, nothing more
    assert still.status_code == 200  # the session was not reset


def test_serve_refuses_a_path_that_would_hide_the_control_api() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_fake_mcp", "serve", "--path", "/_fake/mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "would hide the control API" in completed.stderr


# --- the TypeScript SDK client, through the control API -----------------------------------------------


def _run_typescript(script: str, *serve_args: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run a tests/node driver against ``fake-mcp serve``: its JSON report (its last line) and the journal."""
    node = require_node()
    with serve(*serve_args) as served:
        completed = subprocess.run(
            [str(node), str(NODE_DIR / script), served.url], capture_output=True, text=True, timeout=60, check=False
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout.strip().splitlines()[-1]), served.journal()


def test_typescript_sdk_client_keeps_the_dead_session_id_and_never_sends_delete() -> None:
    report, exchanges = _run_typescript("ts_client.mjs")
    sid = report["session_at_connect"]
    assert report["tools"] == ["echo"]
    assert report["call_before_drop"] == {"ok": True, "text": "before"}
    assert report["drop"] == {"status": 200, "body": {"dropped": [sid]}}
    # What the client does on a dropped session: each call fails with the HTTP 404 ...
    for step in ("call_after_drop", "second_call_after_drop"):
        assert report[step]["ok"] is False
        assert report[step]["error"]["code"] == 404
        assert "Session not found" in report[step]["error"]["message"]
    # ... and it keeps the dead id, through close(): no new session, no re-initialize.
    assert report["session_after_drop"] == report["session_after_close"] == sid
    assert [e["rpc_method"] for e in exchanges if e["rpc_method"] == "initialize"] == ["initialize"]
    late = [e for e in exchanges if e["rpc_method"] == "tools/call" and e["status"] == 404]
    assert [e["session_id"] for e in late] == [sid, sid]
    # close() sends no DELETE: the fake still counts the session as ended by the drop only.
    assert not [e for e in exchanges if e["http_method"] == "DELETE"]


def test_typescript_sdk_client_logs_in_through_the_authorization_server_and_renews_an_expired_token() -> None:
    """`fake-mcp serve --auth` serves the TypeScript SDK's OAuth: registration, the code flow with PKCE (headless:
    tests/node/ts_oauth_client.mjs reads the code from the redirect), the token; on a 401 for an expired token it
    renews the token once (with its refresh token, no new authorization) and keeps its session."""
    report, exchanges = _run_typescript("ts_oauth_client.mjs", "--auth")
    assert report["first_connect"] == "unauthorized"  # the SDK's UnauthorizedError: "go and authorize"
    assert report["code_received"] is True
    assert report["has_refresh_token"] is True
    assert report["call"] == {"ok": True, "text": "authorized"}
    assert report["fault_status"] == 201
    assert report["call_after_expiry"] == {"ok": True, "text": "expired"}
    assert report["session_after_expiry"] == report["session"]  # a 401 is not session loss
    assert report["authorizations"] == 1  # renewed without a new authorization
    paths = [(e["http_method"], e["path"], e["status"]) for e in exchanges]
    assert paths.count(("POST", "/register", 201)) == 1
    assert paths.count(("GET", "/authorize", 302)) == 1
    assert paths.count(("POST", "/token", 200)) == 2  # the code grant, then one renewal
    calls = [(e["status"], e["session_id"]) for e in exchanges if e["rpc_method"] == "tools/call"]
    assert calls == [(200, report["session"]), (401, report["session"]), (200, report["session"])]
    assert [e["rpc_method"] for e in exchanges].count("initialize") == 2  # the 401, then the one session
