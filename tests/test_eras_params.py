"""``Mcp-Param-*`` headers in the 2026-07-28 era: a tool's arguments mirrored into headers, checked by the fake.

``add_tool(param_headers={"region": "Region"})`` marks the argument ``x-mcp-header`` in ``tools/list``; the mcp 2.x
client then mirrors it into ``Mcp-Param-Region`` on each modern ``tools/call``, and the fake, as the 2.3.0 server,
answers a call whose headers disagree with its arguments 400, -32020. The wire rows against the real server are in
``test_differential.py``; these pin the declaration, the real client, and what the check leaves alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from _sdk import MCP2, MODES
from pytest_fake_mcp import ScriptError

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServer

needs_mcp2 = pytest.mark.skipif(
    not MCP2, reason="the 2026-07-28 era needs the mcp 2.x client: mcp 1.x's ClientSession speaks only the handshake"
)

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def route(region: str, shards: int = 1, dry_run: bool = False) -> str:
    """Say where the call was routed."""
    return f"{region}/{shards}/{dry_run}"


def _serve_route(server: FakeMCPServer) -> None:
    server.add_tool("route", route, param_headers={"region": "Region", "shards": "Shards", "dry_run": "Dry-Run"})


async def _call(url: str, arguments: Any, headers: list[tuple[str, str]], *, name: str = "route") -> httpx.Response:
    """A raw, well-formed modern ``tools/call`` with these extra header lines (a name may repeat)."""
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META},
    }
    base = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
    ]
    async with httpx.AsyncClient(timeout=10.0) as client:
        request = client.build_request("POST", url, headers=[*base, *headers], json=body)
        return await client.send(request)


def _error(response: httpx.Response) -> tuple[int, int, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"]


# --- the declaration --------------------------------------------------------------------------------------------


def test_param_headers_mark_the_arguments_in_the_input_schema(fake_mcp_server: FakeMCPServer) -> None:
    tool = fake_mcp_server.add_tool("route", route, param_headers={"region": "Region", "shards": "Shards"})
    properties = tool.input_schema["properties"]
    assert isinstance(properties, dict)
    assert properties["region"] == {"type": "string", "x-mcp-header": "Region"}
    assert properties["shards"] == {"type": "integer", "x-mcp-header": "Shards"}
    assert properties["dry_run"] == {"type": "boolean"}


def test_param_headers_keep_an_explicit_input_schema(fake_mcp_server: FakeMCPServer) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"region": {"type": "string", "minLength": 2}}}
    tool = fake_mcp_server.add_tool("route", lambda region: region, input_schema=schema, param_headers={"region": "R"})
    assert tool.input_schema["properties"] == {"region": {"type": "string", "minLength": 2, "x-mcp-header": "R"}}
    assert schema["properties"]["region"] == {"type": "string", "minLength": 2}  # the caller's dict is untouched


@pytest.mark.parametrize(
    ("param_headers", "message"),
    [
        ({"zone": "Zone"}, r"'zone' is not an argument of the tool \(its arguments: 'region', 'shards', 'dry_run'\)"),
        ({"region": "Re gion"}, r"x-mcp-header 'Re gion' is not a header name token"),
        ({"region": "Region", "shards": "region"}, r"x-mcp-header .* is already used by argument"),
        (["region"], r"map argument names to header names, e\.g\. \{'region': 'Region'\}"),
    ],
    ids=["unknown-argument", "not-a-token", "case-insensitive-duplicate", "not-a-mapping"],
)
def test_param_headers_a_real_server_would_refuse_fail_at_the_test_line(
    fake_mcp_server: FakeMCPServer, param_headers: Any, message: str
) -> None:
    with pytest.raises(ScriptError, match=message):
        fake_mcp_server.add_tool("route", route, param_headers=param_headers)


def test_param_headers_need_a_typed_argument(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"argument 'region' has type None; .* annotate the handler's parameter"):
        fake_mcp_server.add_tool("route", lambda region: region, param_headers={"region": "Region"})
    schema: dict[str, Any] = {"type": "object", "properties": {"ratio": {"type": "number"}}}
    with pytest.raises(ScriptError, match=r"argument 'ratio' has type 'number'; a header mirrors only a string"):
        fake_mcp_server.add_tool("scale", lambda ratio: ratio, input_schema=schema, param_headers={"ratio": "Ratio"})


# --- the real client --------------------------------------------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.fake_mcp_server(era="modern")
async def test_the_real_client_mirrors_marked_arguments_into_headers(fake_mcp_server: FakeMCPServer, mode: str) -> None:
    from mcp import Client

    _serve_route(fake_mcp_server)
    async with Client(fake_mcp_server.url) as client:
        listed = await client.list_tools()
        result = await client.call_tool("route", {"region": "eu west ✓", "shards": 3, "dry_run": True})
    (listed_route,) = [tool for tool in listed.tools if tool.name == "route"]
    assert listed_route.input_schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert result.is_error is False
    assert result.content[0].text == "eu west ✓/3/True"  # type: ignore[union-attr]
    call = fake_mcp_server.journal.get_request(method="tools/call")
    assert call is not None
    assert call.status == 200
    assert call.request_headers["mcp-param-region"] == "=?base64?ZXUgd2VzdCDinJM=?="  # not a plain header value
    assert call.request_headers["mcp-param-shards"] == "3"
    assert call.request_headers["mcp-param-dry-run"] == "true"


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_client_calling_before_it_listed_is_refused_then_relists_and_resends(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client

    _serve_route(fake_mcp_server)
    async with Client(fake_mcp_server.url) as client:
        result = await client.call_tool("route", {"region": "eu"})
    assert result.content[0].text == "eu/1/False"  # type: ignore[union-attr]
    wire = [(e.rpc_method, e.status, e.error_code) for e in fake_mcp_server.journal]
    assert wire == [
        ("server/discover", 200, None),
        ("tools/call", 400, -32020),  # it did not know the tool mirrors 'region'
        ("tools/list", 200, None),
        ("tools/call", 200, None),
    ]
    assert fake_mcp_server.journal.get_requests(method="tools/call")[1].request_headers["mcp-param-region"] == "eu"
    assert len(fake_mcp_server.executions("route")) == 1  # the refused call never ran


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_client_whose_listing_went_stale_relists_when_refused(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client

    fake_mcp_server.add_tool("route", route, param_headers={"region": "Region"})
    async with Client(fake_mcp_server.url) as client:
        await client.list_tools()
        fake_mcp_server.add_tool("route", route, param_headers={"region": "Zone"})  # a redeploy renames the header
        await client.call_tool("route", {"region": "eu"})
    calls = fake_mcp_server.journal.get_requests(method="tools/call")
    assert [(c.status, sorted(k for k in c.request_headers if k.startswith("mcp-param-"))) for c in calls] == [
        (400, ["mcp-param-region"]),
        (200, ["mcp-param-zone"]),
    ]


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_a_second_refusal_after_the_relist_reaches_the_caller(fake_mcp_server: FakeMCPServer) -> None:
    from mcp import Client, MCPError

    _serve_route(fake_mcp_server)
    fake_mcp_server.on("tools/call", era="modern").times(2).respond(400, code=-32020, message="Mcp-Param-Region ...")
    async with Client(fake_mcp_server.url) as client:
        await client.list_tools()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("route", {"region": "eu"})
    assert caught.value.code == -32020
    wire = [e.rpc_method for e in fake_mcp_server.journal][1:]
    assert wire == ["tools/list", "tools/call", "tools/list", "tools/call"]  # one relist, one resend, then raised


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern")
async def test_the_real_client_drops_a_tool_with_an_invalid_mark_and_the_fake_checks_nothing(
    fake_mcp_server: FakeMCPServer,
) -> None:
    from mcp import Client

    # Served as written, so a test can show its client copes; param_headers= would refuse it at this line.
    bad = {"type": "object", "properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}}}
    fake_mcp_server.add_tool("scale", lambda ratio: str(ratio), input_schema=bad)
    _serve_route(fake_mcp_server)
    async with Client(fake_mcp_server.url) as client:
        listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == ["echo", "route"]  # 'scale' dropped by the client
    scale = await _call(fake_mcp_server.url, {"ratio": 0.5}, [("Mcp-Param-Ratio", "2")], name="scale")
    assert scale.status_code == 200  # an invalid mark validates nothing, as on the real server


# --- the check --------------------------------------------------------------------------------------------------


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "eu"}, [("Mcp-Param-Region", "eu")]),
        ({"region": "eu", "shards": 2}, [("Mcp-Param-Region", "=?base64?ZXU=?="), ("mcp-param-shards", "2.00")]),
        ({"region": "eu", "shards": None}, [("Mcp-Param-Region", "eu")]),
        ({"region": "eu", "dry_run": False}, [("Mcp-Param-Region", "eu"), ("Mcp-Param-Dry-Run", "false")]),
    ],
    ids=["plain", "base64-and-decimal-integer", "null-is-absent", "boolean"],
)
@pytest.mark.fake_mcp_server(era="modern")
async def test_headers_agreeing_with_the_arguments_pass(
    fake_mcp_server: FakeMCPServer, arguments: dict[str, Any], headers: list[tuple[str, str]]
) -> None:
    _serve_route(fake_mcp_server)
    response = await _call(fake_mcp_server.url, arguments, headers)
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is False


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "headers", "message"),
    [
        ({"region": "eu"}, [], "Mcp-Param-Region header is missing but the request body's 'region' argument is"),
        ({"region": "eu"}, [("Mcp-Param-Region", "us")], "Mcp-Param-Region header does not match"),
        (
            {"region": "eu"},
            [("Mcp-Param-Region", "eu"), ("Mcp-Param-Shards", "1")],
            "Mcp-Param-Shards header is present but the request body's 'shards' argument is absent",
        ),
        ({"region": "eu"}, [("Mcp-Param-Region", "=?base64?ZXU?=")], "carries a malformed base64 sentinel value"),
        ({"region": "eu"}, [("Mcp-Param-Region", "eu"), ("mcp-param-region", "eu")], "appears more than once"),
        ({"region": "eu", "shards": 2}, [("Mcp-Param-Region", "eu"), ("Mcp-Param-Shards", "2.5")], "does not match"),
        ({"region": ["eu"]}, [("Mcp-Param-Region", "eu")], "does not match the request body's 'region' argument"),
    ],
    ids=["missing", "mismatched", "without-argument", "bad-sentinel", "repeated", "fraction", "not-mirrorable"],
)
@pytest.mark.fake_mcp_server(era="modern")
async def test_headers_disagreeing_with_the_arguments_are_refused_before_the_tool_runs(
    fake_mcp_server: FakeMCPServer, arguments: dict[str, Any], headers: list[tuple[str, str]], message: str
) -> None:
    _serve_route(fake_mcp_server)
    response = await _call(fake_mcp_server.url, arguments, headers)
    status, code, text = _error(response)
    assert (status, code) == (400, -32020)
    assert message in text
    assert response.headers["content-type"] == "application/json"
    assert fake_mcp_server.figures.tool_executions.get("route", 0) == 0


@needs_mcp2
@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(era="modern", fail_on_unknown_tool=False)
async def test_the_check_leaves_unknown_tools_and_bare_calls_to_the_method(fake_mcp_server: FakeMCPServer) -> None:
    _serve_route(fake_mcp_server)
    unknown = await _call(fake_mcp_server.url, {"region": "eu"}, [("Mcp-Param-Region", "us")], name="nope")
    assert unknown.status_code == 200
    assert unknown.json()["result"]["isError"] is True  # "Unknown tool", as the method answers it
    bare = await _call(fake_mcp_server.url, {}, [])
    assert bare.status_code == 200  # no arguments and no header: nothing to compare (the tool says what is missing)


@needs_mcp2
@pytest.mark.asyncio
async def test_the_handshake_era_does_not_check_param_headers(fake_mcp_server: FakeMCPServer) -> None:
    from _sdk import sdk_session

    _serve_route(fake_mcp_server)
    async with sdk_session(fake_mcp_server.url) as session:  # a handshake session sends no Mcp-Param-* headers
        result = await session.call_tool("route", {"region": "eu"})
    assert result.is_error is False
