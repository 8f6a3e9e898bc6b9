"""Era faults through ``on(...)``, each against the real mcp 2.x ``Client()`` (issue 10).

A deploy switching the era under a live client; ``server/discover`` slower than the client's probe timeout;
discover naming versions the client does not speak; cache hints that make list results reusable or not; a
modern-only refusal of ``initialize``. Then ``on(..., era=...)``, and what the stream and connection faults do to a
modern answer (JSON unless the method streams), and the actions the modern era has no use for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from _sdk import MCP2, MODES, sdk_session
from pytest_fake_mcp import ScriptError, VerificationError
from test_eras import _innermost

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}


def _posts(server: FakeMCPServer) -> list[tuple[str | None, str | None, int | None]]:
    return [(e.era, e.rpc_method, e.status) for e in server.journal if e.http_method == "POST"]


@needs_mcp2
@pytest.mark.asyncio
async def test_a_rollback_to_the_handshake_under_a_modern_client_fails_its_next_call(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call").switch_era("handshake")
    async with Client(fake_mcp_server.url) as client:
        await client.list_tools()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"text": "hi"})
    assert caught.value.code == -32600  # the handshake era's "Missing session ID": the client has no session
    assert _posts(fake_mcp_server) == [
        ("modern", "server/discover", 200),
        ("modern", "tools/list", 200),
        ("handshake", "tools/call", 400),
    ]


@needs_mcp2
@pytest.mark.asyncio
async def test_an_upgrade_to_modern_only_under_a_legacy_session_fails_its_next_call(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call").switch_era("modern")
    async with Client(fake_mcp_server.url, mode="legacy") as client:
        await client.list_tools()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("echo", {"text": "b"})
    assert caught.value.code == -32602  # its handshake request has no envelope
    assert _posts(fake_mcp_server)[-1] == ("modern", "tools/call", 400)
    delete = fake_mcp_server.journal.get_request(http_method="DELETE")
    assert delete is not None
    assert (delete.era, delete.status) == ("modern", 405)  # no session to end any more


@needs_mcp2
@pytest.mark.asyncio
async def test_a_discover_slower_than_the_probe_timeout_makes_the_client_fall_back(
    fake_mcp_server: FakeMCPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp.client.session
    from mcp import Client

    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 0.3)  # the SDK's 10 s, shortened
    fake_mcp_server.on("server/discover").delay(5.0)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    probe, *rest = [e for e in fake_mcp_server.journal if e.http_method == "POST"]
    assert probe.rpc_method == "server/discover"
    assert [e.rpc_method for e in rest][:2] == ["initialize", "notifications/initialized"]
    assert probe.status is None  # the client fell back while its probe was held, and never got its answer
    assert {e.era for e in rest} == {"handshake"}


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("versions", [["2099-01-01"], ["2025-11-25"], []], ids=["unknown", "handshake-only", "none"])
async def test_discover_naming_no_version_the_client_speaks_makes_it_fall_back(
    fake_mcp_server: FakeMCPServer, versions: list[str]
) -> None:
    from mcp import Client

    fake_mcp_server.on("server/discover").discover_versions(versions)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    posts = _posts(fake_mcp_server)
    assert posts[0] == ("modern", "server/discover", 200)
    assert posts[1] == ("handshake", "initialize", 200)
    probe = fake_mcp_server.journal.get_request(method="server/discover")
    assert probe is not None
    assert probe.response_messages[0]["result"]["supportedVersions"] == versions


@needs_mcp2
@pytest.mark.asyncio
async def test_discover_naming_our_version_keeps_the_client_modern(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.on("server/discover").discover_versions(["2099-01-01", "2026-07-28"])
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
    assert {era for era, _, _ in _posts(fake_mcp_server)} == {"modern"}


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(("ttl_ms", "lists_on_the_wire"), [(60_000, 1), (0, 3)], ids=["cacheable", "not-cacheable"])
async def test_cache_hints_decide_whether_the_client_lists_again(
    fake_mcp_server: FakeMCPServer, ttl_ms: int, lists_on_the_wire: int
) -> None:
    from mcp import Client

    fake_mcp_server.on("tools/list").always().cache_hint(ttl_ms=ttl_ms, scope="public")
    async with Client(fake_mcp_server.url) as client:
        for _ in range(3):
            await client.list_tools()
    lists = fake_mcp_server.journal.get_requests(method="tools/list")
    assert len(lists) == lists_on_the_wire
    assert lists[0].response_messages[0]["result"]["ttlMs"] == ttl_ms
    assert lists[0].response_messages[0]["result"]["cacheScope"] == "public"


@pytest.mark.asyncio
async def test_a_refused_initialize_names_the_modern_versions_to_a_handshake_client(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("initialize").refuse_initialize()
    with pytest.raises(BaseException) as caught:
        async with sdk_session(fake_mcp_server.url):
            pass
    if MCP2:
        from mcp import MCPError

        error = _innermost(caught.value, MCPError)
        assert error.code == -32022
    else:
        import httpx

        assert _innermost(caught.value, httpx.HTTPStatusError).response.status_code == 400
    refused = fake_mcp_server.journal.get_request(method="initialize")
    assert refused is not None
    assert refused.status == 400
    assert refused.response_messages[0]["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_era_faults_check_their_arguments(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"switch_era\('stateless'\): era must be one of"):
        fake_mcp_server.on("tools/call").switch_era("stateless")
    with pytest.raises(ScriptError, match=r"cache_hint\(ttl_ms=-1\) must be an int >= 0"):
        fake_mcp_server.on("tools/list").cache_hint(ttl_ms=-1)
    with pytest.raises(ScriptError, match=r"cache_hint\(scope='shared'\) must be 'private' or 'public'"):
        fake_mcp_server.on("tools/list").cache_hint(ttl_ms=1, scope="shared")
    with pytest.raises(ScriptError, match=r"takes a list of version strings"):
        fake_mcp_server.on("server/discover").discover_versions("2026-07-28")  # type: ignore[arg-type]


@pytest.mark.fake_mcp_fault("server/discover", discover_versions=["2099-01-01"])
def test_the_marker_scripts_era_faults(fake_mcp_server: FakeMCPServer) -> None:
    import httpx

    response = httpx.post(
        fake_mcp_server.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
        },
        timeout=10,
    )
    if MCP2 or response.status_code == 200:
        assert response.json()["result"]["supportedVersions"] == ["2099-01-01"]


# --- on(..., era=...): a fault for one era's exchanges -----------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(("era", "failing"), [("modern", "auto"), ("handshake", "legacy")])
async def test_a_fault_limited_to_one_era_fires_only_on_that_eras_client(
    fake_mcp_server: FakeMCPServer, era: str, failing: str
) -> None:
    from mcp import Client, MCPError

    fault = fake_mcp_server.on("tools/call", era=era).respond(503)
    outcomes: dict[str, str] = {}
    for mode in ("legacy", "auto"):  # a dual fake serves each client in its own era
        async with Client(fake_mcp_server.url, mode=mode) as client:
            try:
                await client.call_tool("echo", {"text": mode})
                outcomes[mode] = "ok"
            except MCPError:
                outcomes[mode] = "refused"
    assert outcomes == {mode: "refused" if mode == failing else "ok" for mode in ("legacy", "auto")}
    assert fault.fired == 1
    [faulted] = [e for e in fake_mcp_server.journal if e.faults]
    assert (faulted.era, faulted.rpc_method, faulted.status) == (era, "tools/call", 503)
    assert f"in the {era} era" in str(fault)


@pytest.mark.parametrize(
    ("era", "message"),
    [
        ("dual", r"era='dual' must be 'handshake' or 'modern' \('dual' is what a server serves; each request"),
        ("stateless", r"era='stateless' must be 'handshake' or 'modern' \(leave era out to match both\)"),
    ],
)
def test_on_refuses_an_era_no_exchange_has_naming_the_choices(
    fake_mcp_server: FakeMCPServer, era: str, message: str
) -> None:
    with pytest.raises(ScriptError, match=message):
        fake_mcp_server.on("tools/call", era=era)
    assert fake_mcp_server.scripted_faults == ()


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_fault("tools/call", era="modern", respond=503)
async def test_the_marker_takes_era_like_on(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client, MCPError

    async with Client(fake_mcp_server.url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "handshake: untouched"})
    async with Client(fake_mcp_server.url) as client:
        with pytest.raises(MCPError):
            await client.call_tool("echo", {"text": "modern: refused"})
    [rule] = fake_mcp_server.scripted_faults
    assert rule.fired_on == [e.seq for e in fake_mcp_server.journal if e.era == "modern" and e.status == 503]


def test_the_marker_help_lists_era() -> None:
    from pytest_fake_mcp._faults import fault_marker_help

    assert " era=," in fault_marker_help()


@pytest.mark.asyncio
async def test_an_unfired_era_fault_shows_the_era_of_its_near_misses(
    fake_mcp_server_factory: FakeMCPServerFactory,
) -> None:
    # The lease's exit runs the teardown check.
    with pytest.raises(VerificationError) as caught, fake_mcp_server_factory.lease(era="handshake") as server:  # noqa: PT012
        server.on("tools/call", era="modern").respond(503)
        async with sdk_session(server.url) as session:
            await session.call_tool("echo", {"text": "hi"})
    text = str(caught.value)
    assert "'Service Unavailable' on POST tools/call in any session in the modern era, once: fired 0 of 1" in text
    assert "differs: era 'handshake' != 'modern'" in text


def test_the_control_api_takes_era_like_the_marker() -> None:
    from _served import serve

    tools_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    with serve("--era", "dual") as served:
        refused = served.control("faults", {"method": "tools/call", "era": "dual", "respond": 503})
        assert refused.status_code == 400
        assert "era='dual' must be 'handshake' or 'modern'" in refused.json()["error"]
        posted = served.control("faults", {"method": "tools/call", "era": "modern", "respond": 503})
        assert posted.status_code == 201
        assert "in the modern era" in posted.json()["fault"]
        modern = {**tools_call, "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": MODERN_META}}
        headers = {**MODERN_HEADERS, "mcp-method": "tools/call", "mcp-name": "echo"}
        answer = served.http.post(served.url, json=modern, headers=headers)
        assert answer.status_code == 503
        [exchange] = served.journal()
        assert exchange["faults"]
        assert exchange["status"] == 503


# --- stream and connection faults on modern answers -------------------------------------------------------------
# A modern answer waits for the method before its status line (JSON unless the method streams), so a cut before the
# method closes the connection before the status line, in SSE mode too. The mcp 2.x client in modern mode lets the
# transport error through (it is not an MCP error).

ConnectionFault = Callable[["FakeMCPServer"], object]
BEFORE_THE_METHOD: dict[str, tuple[ConnectionFault, str]] = {
    "cut-stream": (lambda s: s.on("tools/call", era="modern").cut_stream(), "cut"),
    "cut-stream-reset": (lambda s: s.on("tools/call", era="modern").cut_stream(reset=True), "reset"),
    "close-connection": (lambda s: s.on("tools/call", era="modern").close_connection(), "cut"),
    "reset-connection": (lambda s: s.on("tools/call", era="modern").reset_connection(), "reset"),
}
AFTER_THE_METHOD: dict[str, tuple[ConnectionFault, str]] = {
    "cut-stream-after-call": (lambda s: s.on("tools/call", era="modern").cut_stream(after_call=True), "cut"),
    "cut-stream-after-call-reset": (
        lambda s: s.on("tools/call", era="modern").cut_stream(after_call=True, reset=True),
        "reset",
    ),
    "truncated": (lambda s: s.on("tools/call", era="modern").malformed("truncated"), "cut"),
}


async def _cut_call(server: FakeMCPServer, script: Any) -> Any:
    """Script a cut, make one modern call with the real client; it fails with a transport error. The call's exchange."""
    import httpx2
    from mcp import Client

    script(server)
    with pytest.raises(BaseException) as caught:  # the transport error, inside the client's groups
        async with Client(server.url) as client:
            await client.call_tool("echo", {"text": "hi"})
    assert _innermost(caught.value, httpx2.TransportError) is not None
    call = server.journal.get_request(method="tools/call")
    assert call is not None
    return call


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(BEFORE_THE_METHOD))
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_cut_before_the_method_closes_a_modern_answer_before_its_status_line(
    fake_mcp_server: FakeMCPServer, name: str, mode: str
) -> None:
    script, outcome = BEFORE_THE_METHOD[name]
    call = await _cut_call(fake_mcp_server, script)
    assert (call.era, call.status, str(call.outcome)) == ("modern", None, outcome)
    assert fake_mcp_server.executions("echo") == []


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(AFTER_THE_METHOD))
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_cut_after_the_method_loses_a_modern_answer_the_tool_already_gave(
    fake_mcp_server: FakeMCPServer, name: str, mode: str
) -> None:
    script, outcome = AFTER_THE_METHOD[name]
    call = await _cut_call(fake_mcp_server, script)
    assert (call.era, call.status, call.response_format, str(call.outcome)) == ("modern", 200, "json", outcome)
    [run] = fake_mcp_server.executions("echo")
    assert run.delivered is False  # the tool ran; its answer never arrived


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_cut_after_the_method_of_a_modern_answer_that_streams_ends_the_stream_before_the_response(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client, MCPError

    def chatty(ctx: Any) -> str:
        ctx.log("info", "working")  # a notification: the modern answer commits to SSE
        return "done"

    fake_mcp_server.add_tool("chatty", chatty)
    fake_mcp_server.on("tools/call", era="modern").cut_stream(after_call=True)
    with pytest.raises(BaseException) as caught:  # inside the client's exception groups
        async with Client(fake_mcp_server.url) as client:
            await client.call_tool("chatty", {})
    error = _innermost(caught.value, MCPError)
    assert (error.code, error.message) == (-32000, "SSE stream ended without a response")
    call = fake_mcp_server.journal.get_request(method="tools/call")
    assert call is not None
    assert (call.status, call.response_format, str(call.outcome)) == (200, "sse", "cut")
    assert [m.get("method") for m in call.response_messages] == ["notifications/message"]  # no response
    [run] = fake_mcp_server.executions("chatty")
    assert run.delivered is False


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="modern")
async def test_malformed_modern_answers_reach_the_client_as_json(fake_mcp_server: FakeMCPServer, mode: str) -> None:
    from mcp import Client, MCPError

    fake_mcp_server.on("tools/call", era="modern").malformed("bad-json")
    fake_mcp_server.on("tools/call", era="modern").nth(2).malformed("wrong-content-type")
    fake_mcp_server.on("tools/call", era="modern").nth(3).malformed("wrong-id")
    codes = []
    async with Client(fake_mcp_server.url, read_timeout_seconds=0.5) as client:
        for _ in range(3):
            with pytest.raises(MCPError) as caught:
                await client.call_tool("echo", {"text": "hi"})
            codes.append(caught.value.code)
    # Not JSON: a parse error; not JSON's content type: refused; an id never sent: the answer is dropped and the
    # call times out (in the handshake era's SSE mode the stream still ties it to the request).
    assert codes == [-32700, -32600, -32001]
    calls = fake_mcp_server.journal.get_requests(method="tools/call")
    assert [e.response_format for e in calls] == ["json", "json", "json"]


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_delay_between_events_of_a_modern_json_answer_holds_its_body(
    fake_mcp_server: FakeMCPServer, mode: str
) -> None:
    from mcp import Client

    gate = fake_mcp_server.gate("body")
    fault = fake_mcp_server.on("tools/call", era="modern").delay(until=gate, between_events=True)
    async with Client(fake_mcp_server.url) as client:
        call = asyncio.create_task(client.call_tool("echo", {"text": "hi"}))
        await fault.wait_fired()
        held = await _wait_for_status(fake_mcp_server)
        assert not call.done()
        gate.open()
        result = await asyncio.wait_for(call, 10)
    assert held == 200  # the status line went out; the body (the JSON answer, its one event) waited
    assert result.content[0].text == "hi"  # type: ignore[union-attr]


async def _wait_for_status(server: FakeMCPServer) -> int | None:
    """The status of the held tools/call once its headers are out (bounded)."""
    async with asyncio.timeout(5):
        while True:
            call = server.journal.get_request(method="tools/call")
            if call is not None and call.status is not None:
                return call.status
            await asyncio.sleep(0)


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_modern_client_never_adopts_a_bogus_session_id(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.on("tools/call", era="modern").bogus_session_id(only_errors=False)
    async with Client(fake_mcp_server.url) as client:
        await client.call_tool("echo", {"text": "hi"})
        await client.call_tool("echo", {"text": "again"})
    first, second = fake_mcp_server.journal.get_requests(method="tools/call")
    assert second.session_id is None
    assert str(first.response_session_id).startswith("bogus")
    fake_mcp_server.assert_no_session_ids()


# --- actions the modern era has no use for ------------------------------------------------------------------------

UNFIT: dict[str, tuple[Callable[[Any], object], str]] = {
    "end-stream": (lambda rule: rule.end_stream(), "the modern era has no GET stream"),
    "hold-stream": (lambda rule: rule.hold_stream(), "the modern era has no GET stream"),
    "drop-session": (lambda rule: rule.drop_session(), "the modern era has no session to drop"),
    "cut-stream-event-ids": (lambda rule: rule.cut_stream(event_ids=True), "the modern era resumes no stream"),
    "cut-stream-after-call-event-ids": (
        lambda rule: rule.cut_stream(after_call=True, event_ids=True),
        "the modern era resumes no stream",
    ),
}


@pytest.mark.parametrize("name", list(UNFIT))
def test_an_action_the_modern_era_has_no_use_for_fails_at_the_test_line(
    fake_mcp_server: FakeMCPServer, name: str
) -> None:
    action, reason = UNFIT[name]
    with pytest.raises(ScriptError, match=f"on .* in the modern era: {reason}"):
        action(fake_mcp_server.on(era="modern"))
    rule = fake_mcp_server.on(era="handshake")
    action(rule)  # the handshake era has streams and sessions
    assert rule.faults
    rule.optional()


@needs_mcp2
@pytest.mark.asyncio
async def test_an_action_unfit_for_the_era_that_answered_does_not_act_and_fails_the_test_saying_why(
    fake_mcp_server_factory: FakeMCPServerFactory,
) -> None:
    from mcp import Client

    # The lease's exit runs the teardown check.
    with pytest.raises(VerificationError) as caught, fake_mcp_server_factory.lease() as server:  # noqa: PT012
        rule = server.on("tools/call").drop_session()
        async with Client(server.url) as client:  # goes modern: no session to drop
            await client.call_tool("echo", {"text": "hi"})
        assert rule.fired == 0
    call_seq = 2
    assert f"did not act on #{call_seq}, answered by the modern era: the modern era has no session to drop" in str(
        caught.value
    )


@needs_mcp2
@pytest.mark.asyncio
async def test_the_same_action_acts_on_the_handshake_client(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client, MCPError

    rule = fake_mcp_server.on("tools/call").drop_session()
    async with Client(fake_mcp_server.url, mode="legacy") as client:
        with pytest.raises(MCPError):
            await client.call_tool("echo", {"text": "hi"})
    assert rule.fired == 1
