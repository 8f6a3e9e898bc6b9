"""Hypothesis-generated HTTP requests against the fake: valid, almost valid, garbage and oversized; both eras.

Whatever arrives, the fake never answers 500 for input it should reject (the one 500 is the SDK's own, for a
GET resuming with ``Last-Event-ID`` without an event store), never raises inside, never hangs, and keeps
serving a live session meanwhile; and a generated JSON-RPC message gets the answer a real SDK server gives.
``FAKE_MCP_FUZZ_EXAMPLES=10000 pytest tests/test_fuzz.py`` is the soak.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}},
}
_PING_HEAD = b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"'
EXAMPLES = int(os.environ.get("FAKE_MCP_FUZZ_EXAMPLES", "150"))
BODY_LIMIT = 2048
VERSION = "2025-11-25"
METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
    "prompts/list", "prompts/get", "logging/setLevel", "completion/complete", "notifications/initialized",
    "notifications/cancelled", "server/discover", "resources/subscribe", "nope/nope", "",
]  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2])},
    optional={
        "id": st.integers() | st.text(max_size=8) | st.none() | st.booleans(),
        "method": st.sampled_from(METHODS) | st.text(max_size=12),
        "params": st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "arguments",
                    "uri",
                    "protocolVersion",
                    "capabilities",
                    "clientInfo",
                    "_meta",
                    "level",
                    "cursor",
                    "ref",
                    "argument",
                    "progressToken",
                ]
            ),
            json_values,
            max_size=4,
        ),
        "result": json_values,
        "error": json_values,
    },
)
bodies = st.one_of(
    messages.map(lambda m: json.dumps(m).encode()),
    st.lists(messages, max_size=3).map(lambda m: json.dumps(m).encode()),  # batches
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.just(b""),
    st.integers(BODY_LIMIT + 1, 3 * BODY_LIMIT).map(lambda n: _PING_HEAD + b"x" * n + b'"}'),  # over the limit
)  # fmt: skip
header_values = {
    "accept": st.sampled_from(
        ["application/json, text/event-stream", "application/json", "text/event-stream", "*/*", "text/html", ""]
    ),
    "content-type": st.sampled_from(
        ["application/json", "application/json; charset=utf-8", "text/plain", "application/json-patch+json", ""]
    ),
    "mcp-protocol-version": st.sampled_from([VERSION, "2025-03-26", "2024-11-05", "2026-07-28", "garbage", ""]),
    "mcp-session-id": st.sampled_from(["<live>", "<live>", "0" * 32, "not a session", ""]),
    "last-event-id": st.sampled_from(["1", "abc"]),
    "origin": st.sampled_from(["http://127.0.0.1", "http://evil.example.com", "null"]),
    "host": st.sampled_from(["127.0.0.1", "localhost:1", "evil.example.com"]),
}
requests = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["POST", "POST", "POST", "GET", "DELETE", "PUT", "PATCH", "OPTIONS"]),
        "body": bodies,
        "headers": st.fixed_dictionaries({}, optional=header_values),
    }
)


@pytest.fixture(params=["mcp2", "mcp1"])
def fuzzed(
    fake_mcp_server_factory: FakeMCPServerFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[FakeMCPServer, httpx.Client, str, str]]:
    """A fake of each flavour with a small body limit, a client, a live session the fuzz may use, and one it
    never names."""
    lease = fake_mcp_server_factory.lease(flavour=request.param, max_body_size=BODY_LIMIT)
    with lease as server, httpx.Client(timeout=5) as client:
        accept = {"accept": "application/json, text/event-stream"}
        live, witness = (client.post(server.url, json=INIT, headers=accept).headers["mcp-session-id"] for _ in "ab")
        yield server, client, live, witness


def _send(client: httpx.Client, url: str, live: str, request: dict[str, Any]) -> int:
    headers = {k: (live if v == "<live>" else v) for k, v in request["headers"].items()}
    built = client.build_request(request["method"], url, content=request["body"], headers=headers)
    if "content-type" not in headers:
        built.headers.pop("content-type", None)
    response = client.send(built, stream=True)
    try:
        if not response.headers.get("content-type", "").startswith("text/event-stream") or request["method"] != "GET":
            response.read()  # an open GET stream never ends: its head is the answer
        return response.status_code
    finally:
        response.close()


def test_fuzzed_requests_never_500_never_raise_and_other_sessions_keep_working(
    fuzzed: tuple[FakeMCPServer, httpx.Client, str, str],
) -> None:
    server, client, live, witness = fuzzed
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    ping_headers = {"accept": "application/json, text/event-stream", "mcp-session-id": witness,
                    "mcp-protocol-version": VERSION}  # fmt: skip

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=requests)
    def check(request: dict[str, Any]) -> None:
        status = _send(client, server.url, live, request)
        resumes = request["method"] == "GET" and "last-event-id" in request["headers"]
        assert status != 500 or resumes, f"500 for {request!r}"
        assert server.errors == [], server.errors
        assert client.post(server.url, json=ping, headers=ping_headers).status_code in (200, 404)

    check()
    # The live session may have been DELETEd by a fuzzed request carrying its id; the fake is still serving.
    assert (
        client.post(server.url, json=ping, headers={"accept": "application/json, text/event-stream"}).status_code == 400
    )


DIFFERENTIAL_EXAMPLES = max(EXAMPLES // 4, 10)
_NOT_ON_THE_REFERENCE = ("resources/", "prompts/", "completion/", "logging/")
"""Methods the reference server has no handler for (it serves one tool): a difference of configuration."""


def test_fuzzed_messages_get_the_real_servers_answer(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    # Each generated JSON-RPC message goes, on a live session, to the fake and to a real SDK server of the
    # installed mcp line; status, media type, session header and the JSON-RPC answer must agree.
    from _reference_server import reference_server
    from test_differential import FLAVOUR, Case, _comparable, exchange

    with reference_server() as real_url, fake_mcp_server_factory.lease(flavour=FLAVOUR) as fake:

        @settings(max_examples=DIFFERENTIAL_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(message=messages)
        @example(message={"jsonrpc": "2.0", "id": 0, "method": "\x85"})  # U+0085 inside an SSE data line (a soak run)
        def check(message: dict[str, Any]) -> None:
            assume(not str(message.get("method", "")).startswith(_NOT_ON_THE_REFERENCE))
            case = Case(body=message, message="kind")  # pydantic's wording differs between its versions

            async def both() -> tuple[Any, Any]:
                async with httpx.AsyncClient(timeout=10) as client:
                    real = _comparable(await exchange(client, real_url, case), case)
                    return real, _comparable(await exchange(client, fake.url, case), case)

            real, answered = asyncio.run(both())
            assert answered == real, f"{message!r}:\n  fake {answered}\n  real {real}"

        check()
