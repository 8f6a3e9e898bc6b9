"""The fake answers raw HTTP exactly as a real SDK server does (protocol.md §1.4, §1.5, §2; issues 2 and 10).

Every row sends the same raw request to the fake and to a real low-level SDK server of the installed mcp line
(``tests/_reference_server.py``), in SSE and in JSON mode, and compares status, media type, whether an
``mcp-session-id`` comes back, the ``allow`` header, and the JSON-RPC answer: result or error, code, message,
``data`` and ``id``. mcp 2.x is compared with ``flavour="mcp2"``, mcp 1.x with ``flavour="mcp1"``.

The ``modern-*`` rows are 2026-07-28 requests: the real 2.x server and the fake (``era="dual"``, the mcp2 default)
serve them in that era; under mcp 1.x both answer them as session-less handshake requests. Both servers serve
``route(region, shards)`` with the two arguments mirrored into ``Mcp-Param-*`` headers (the fake declares it with
``add_tool(param_headers=...)``); the ``modern-param-*`` rows send those headers right, wrong and absent.

A row the fake answers differently on purpose names the fields that differ, the fake's values, and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import httpx
import pytest

from _reference_server import MCP_MAJOR, ROUTE_SCHEMA, reference_server

if TYPE_CHECKING:
    from pytest_fake_mcp import FakeMCPServerFactory

FLAVOUR = "mcp2" if MCP_MAJOR >= 2 else "mcp1"
VERSION = "2025-11-25"
TIMEOUT = 10.0
BOTH = "application/json, text/event-stream"
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"

Session = Literal["none", "live", "unknown", "deleted", "leaked", "uninitialized", "no-initialized-notification"]
"""Which ``mcp-session-id`` the request carries: none; a live one; one never issued; one ended by DELETE; the
id minted (and, on servers that keep it, leaked) by a failed session-less request; one whose ``initialize`` was
answered with an error; one whose client never sent ``notifications/initialized``."""


def _request(rpc_id: int, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


INITIALIZE = _request(
    1, "initialize", {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "diff", "version": "0"}}
)
TOOLS_LIST = _request(2, "tools/list")
ECHO = _request(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
DISCOVER_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "diff", "version": "0"},
}


MODERN = "2026-07-28"


def _modern(
    rpc_id: int, method: str, params: Mapping[str, Any] | None = None, *, name: str | None = None, **headers: str | None
) -> Case:
    """A well-formed 2026-07-28 request (envelope in ``_meta``, routing headers), with header changes."""
    base: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        base["mcp-name"] = name
    base.update({key.replace("_", "-"): value for key, value in headers.items()})
    return Case(body=_request(rpc_id, method, {**(params or {}), "_meta": DISCOVER_META}), session="none", headers=base)


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """A deliberate difference: the fields where the fake's answer differs from the real one, and why."""

    reason: str
    fake: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One raw HTTP request, and what to compare of its answer."""

    method: str = "POST"
    body: Any = None
    """A JSON value (serialised compactly), raw ``bytes``, or None for no body."""
    session: Session = "live"
    headers: Mapping[str, str | None] = field(default_factory=dict)
    """Changes to the default headers; None removes one."""
    repeated: tuple[tuple[str, str], ...] = ()
    """Header lines added as they are, after the others (a name may repeat)."""
    fake_options: Mapping[str, Any] = field(default_factory=dict)
    """Options of the fake for this row only (the real server keeps its defaults)."""
    hold_get: bool = False
    """Keep a GET stream open on the session while the request is sent."""
    message: Literal["exact", "kind"] = "exact"
    """``kind`` compares only the text before the first ':' (pydantic dumps differ in wording)."""
    differs: Mapping[int, Difference] = field(default_factory=dict)
    """Deliberate differences, by mcp major version."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the comparison looks at in one response."""

    status: int
    content_type: str
    """The media type, or "none" when the header is absent."""
    session_header: bool
    allow: str | None
    shape: Literal["empty", "text", "result", "error", "open-stream", "other"]
    rpc_id: Any = None
    code: int | None = None
    message: str | None = None
    data: Any = None
    result_keys: tuple[str, ...] = ()
    is_error: bool | None = None


ANSWER_TYPE = "<the mode's answer type>"
"""In ``Difference.fake``: ``application/json`` in JSON mode, ``text/event-stream`` in SSE mode."""

# flavour="mcp1" imitates mcp 1.27.2, as measured in protocol.md §1.4-1.5 and §5; mcp 1.30 (the mcp1 venv) took
# three session-manager changes from 2.x. Following them is a decision on the flavour, not a wire fix.
_V1_DELETE = (
    "mcp1 flavour = 1.27.2, which keeps a DELETEd transport registered: 404 'Not Found: Session has been "
    "terminated' with the session id (protocol.md §1.4, §5); 1.30 forgets it at once, as 2.x does"
)
_V1_LEAK = (
    "mcp1 flavour = 1.27.2, which keeps the session a failed session-less request minted (protocol.md §6 item 1); "
    "1.30 discards it, as 2.x does"
)
_V1_BODY_LIMIT = (
    "mcp1 flavour = 1.27.2, which has no body limit (protocol.md §1.5); 1.30 has 2.x's 4 MiB 413. "
    "max_body_size=4 * 1024 * 1024 opts in (row body-over-4-mib-with-limit)"
)
_V1_AFTER_DELETE = Difference(
    reason=_V1_DELETE, fake={"session_header": True, "message": "Not Found: Session has been terminated"}
)

ECHO_HI = {"name": "echo", "arguments": {"text": "hi"}}
ROUTE_EU = {"name": "route", "arguments": {"region": "eu", "shards": 2}}
ROUTE_EU_ONLY = {"name": "route", "arguments": {"region": "eu"}}


def _route(region: str, shards: int = 1) -> str:
    """Say where the call was routed."""
    return f"{region}/{shards}"


def _param(arguments: Mapping[str, Any], **headers: str | None) -> Case:
    """A modern ``tools/call`` of ``route`` with these ``Mcp-Param-*`` headers (``mcp_param_region="eu"``)."""
    return _modern(3, "tools/call", arguments, name="route", **headers)


MODERN_CASES: dict[str, Case] = dict(
    {
        "discover": _modern(7, "server/discover"),
        "tools-list": _modern(2, "tools/list"),
        "tools-call-echo": _modern(3, "tools/call", ECHO_HI, name="echo"),
        "tools-call-unknown-tool": _modern(3, "tools/call", {"name": "nope", "arguments": {}}, name="nope"),
        "tools-call-name-base64": _modern(3, "tools/call", ECHO_HI, name="=?base64?ZWNobw==?="),
        "param-headers-valid": _param(ROUTE_EU, mcp_param_region="eu", mcp_param_shards="2"),
        "param-header-missing": _param(ROUTE_EU, mcp_param_region="eu"),
        "param-headers-none": _param(ROUTE_EU),
        "param-header-mismatched": _param(ROUTE_EU, mcp_param_region="us", mcp_param_shards="2"),
        "param-header-base64": _param(ROUTE_EU, mcp_param_region="=?base64?ZXU=?=", mcp_param_shards="2"),
        "param-header-bad-sentinel": _param(ROUTE_EU, mcp_param_region="=?base64?ZXU?=", mcp_param_shards="2"),
        "param-header-without-argument": _param(ROUTE_EU_ONLY, mcp_param_region="eu", mcp_param_shards="2"),
        "param-header-decimal-integer": _param(ROUTE_EU, mcp_param_region="eu", mcp_param_shards="2.0"),
        "param-header-fraction": _param(ROUTE_EU, mcp_param_region="eu", mcp_param_shards="2.5"),
        "param-header-repeated": replace(
            _param(ROUTE_EU, mcp_param_region="eu", mcp_param_shards="2"), repeated=(("mcp-param-region", "eu"),)
        ),
        "param-header-on-unmarked-tool": _modern(3, "tools/call", ECHO_HI, name="echo", mcp_param_text="hi"),
        "ping-gone": _modern(4, "ping"),
        "initialize-gone": _modern(5, "initialize", dict(INITIALIZE["params"])),
        "logging-set-level-gone": _modern(8, "logging/setLevel", {"level": "info"}),
        "unknown-method": _modern(6, "foo/bar"),
        "session-header-ignored": _modern(2, "tools/list", mcp_session_id=UNKNOWN_ID),
        "method-header-missing": _modern(2, "tools/list", mcp_method=None),
        "method-header-mismatch": _modern(2, "tools/list", mcp_method="prompts/list"),
        "name-header-missing": _modern(3, "tools/call", ECHO_HI),
        "name-header-mismatch": _modern(3, "tools/call", ECHO_HI, name="other"),
        "version-header-mismatch": _modern(2, "tools/list", mcp_protocol_version="2099-01-01"),
        "version-unsupported": Case(
            body=_request(
                2,
                "tools/list",
                {"_meta": {**DISCOVER_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            ),
            session="none",
            headers={"mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"},
        ),
        "version-not-a-string": Case(
            body=_request(2, "tools/list", {"_meta": {**DISCOVER_META, "io.modelcontextprotocol/protocolVersion": 7}}),
            session="none",
            headers={"mcp-protocol-version": "7", "mcp-method": "tools/list"},
        ),
        "envelope-missing": Case(
            body=TOOLS_LIST, session="none", headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
        ),
        "envelope-without-capabilities": Case(
            body=_request(2, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
            session="none",
            headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
        ),
        "duplicated-method-header": Case(
            body=_request(2, "tools/list", {"_meta": DISCOVER_META}),
            session="none",
            headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
            repeated=(("mcp-method", "tools/list"),),
        ),
        "tools-call-without-name": _modern(3, "tools/call", {}),
        "tools-call-arguments-not-object": _modern(3, "tools/call", {"name": "echo", "arguments": [1]}, name="echo"),
        "tools-list-bad-cursor": _modern(2, "tools/list", {"cursor": 5}),
        "null-id": Case(
            body={"jsonrpc": "2.0", "id": None, "method": "tools/list", "params": {"_meta": DISCOVER_META}},
            session="none",
            headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
        ),
        "posted-response": Case(
            body={"jsonrpc": "2.0", "id": 9, "result": {}}, session="none", headers={"mcp-protocol-version": MODERN}
        ),
        "notification-unsupported-version": Case(
            body={"jsonrpc": "2.0", "method": "notifications/cancelled"},
            session="none",
            headers={"mcp-protocol-version": "2099-01-01"},
        ),
        "notification-cancelled-202": Case(
            body={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
            session="none",
            headers={"mcp-protocol-version": MODERN},
        ),
        "notification-malformed": Case(
            body={"method": "x"}, session="none", headers={"mcp-protocol-version": MODERN}, message="kind"
        ),
        "get-405": Case(method="GET", session="none", headers={"mcp-protocol-version": MODERN}),
        "delete-405": Case(method="DELETE", session="none", headers={"mcp-protocol-version": MODERN}),
        "put-405": Case(method="PUT", body=TOOLS_LIST, session="none", headers={"mcp-protocol-version": MODERN}),
        "accept-sse-only": _modern(2, "tools/list", accept="text/event-stream"),
        "content-type-missing": _modern(2, "tools/list", content_type=None),
        "bad-host": _modern(2, "tools/list", host="evil.example"),
        "unparseable-body": Case(body=b"{not json", session="none", headers={"mcp-protocol-version": MODERN}),
        "batch-of-one": Case(
            body=[_request(2, "tools/list", {"_meta": DISCOVER_META})],
            session="none",
            headers={"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
            message="kind",
        ),
    }
)

CASES: dict[str, Case] = {
    # --- the well-formed handshake --------------------------------------------------------------------------
    "initialize": Case(body=INITIALIZE, session="none"),
    "initialize-again-on-live-session": Case(body=INITIALIZE),
    "tools-list": Case(body=TOOLS_LIST),
    "tools-call-echo": Case(body=ECHO),
    "tools-call-unknown-tool": Case(body=_request(4, "tools/call", {"name": "nope", "arguments": {}})),
    "unknown-method": Case(body=_request(5, "foo/bar")),
    "unknown-method-bad-meta": Case(body=_request(5, "foo/bar", {"_meta": [1]})),  # found by fuzzing
    "ping": Case(body=_request(5, "ping")),
    "notification-202": Case(body={"jsonrpc": "2.0", "method": "notifications/initialized"}),
    "response-202": Case(body={"jsonrpc": "2.0", "id": 99, "result": {}}),
    "response-error-202": Case(body={"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}}),
    "no-version-header": Case(body=TOOLS_LIST, headers={"mcp-protocol-version": None}),
    "older-version-header": Case(body=TOOLS_LIST, headers={"mcp-protocol-version": "2024-11-05"}),
    "allowed-origin": Case(body=TOOLS_LIST, headers={"origin": "http://localhost:3000"}),
    "extra-fields": Case(body={**TOOLS_LIST, "extra": 1}),
    "logging-set-level": Case(body=_request(8, "logging/setLevel", {"level": "info"})),
    # --- params the request models reject (-32602 "Invalid request parameters") --------------------------------
    "tools-call-without-name": Case(body=_request(4, "tools/call", {})),
    "tools-call-arguments-not-object": Case(body=_request(4, "tools/call", {"name": "echo", "arguments": [1]})),
    "tools-call-without-params": Case(body=_request(4, "tools/call")),
    "ping-with-extra-params": Case(body=_request(5, "ping", {"x": 1})),
    "bad-meta": Case(body=_request(2, "tools/list", {"_meta": 5})),
    "logging-set-level-unknown": Case(body=_request(8, "logging/setLevel", {"level": "loud"})),
    "tools-list-bad-cursor": Case(body=_request(2, "tools/list", {"cursor": 5})),
    "initialize-without-params": Case(body=_request(1, "initialize"), session="none"),
    "initialize-bad-params": Case(
        body=_request(1, "initialize", {"protocolVersion": 5, "capabilities": {}}), session="none"
    ),
    "initialize-again-without-params": Case(body=_request(1, "initialize")),
    # --- sessions ---------------------------------------------------------------------------------------------
    "post-missing-session": Case(body=TOOLS_LIST, session="none"),
    "notification-missing-session": Case(
        body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session="none"
    ),
    "post-unknown-session": Case(body=TOOLS_LIST, session="unknown"),
    "initialize-stale-session": Case(body=INITIALIZE, session="unknown"),
    "post-after-delete": Case(body=TOOLS_LIST, session="deleted", differs={1: _V1_AFTER_DELETE}),
    "initialize-after-delete": Case(body=INITIALIZE, session="deleted", differs={1: _V1_AFTER_DELETE}),
    "post-on-uninitialized-session": Case(body=TOOLS_LIST, session="uninitialized"),
    "ping-on-uninitialized-session": Case(body=_request(5, "ping"), session="uninitialized"),
    "unknown-method-on-uninitialized-session": Case(body=_request(5, "foo/bar"), session="uninitialized"),
    "notification-on-uninitialized-session": Case(
        body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session="uninitialized"
    ),
    "post-without-initialized-notification": Case(body=TOOLS_LIST, session="no-initialized-notification"),
    "post-on-leaked-session": Case(
        body=TOOLS_LIST,
        session="leaked",
        differs={
            1: Difference(
                reason=_V1_LEAK,
                fake={
                    "status": 200,
                    "content_type": ANSWER_TYPE,
                    "session_header": True,
                    "rpc_id": 2,
                    "code": -32602,
                    "message": "Invalid request parameters",
                    "data": "",
                },
            )
        },
    ),
    "initialize-on-leaked-session": Case(
        body=INITIALIZE,
        session="leaked",
        differs={
            1: Difference(
                reason=_V1_LEAK,
                fake={
                    "status": 200,
                    "content_type": ANSWER_TYPE,
                    "session_header": True,
                    "shape": "result",
                    "rpc_id": 1,
                    "code": None,
                    "message": None,
                    "result_keys": ("capabilities", "protocolVersion", "serverInfo"),
                },
            )
        },
    ),
    # --- Accept -----------------------------------------------------------------------------------------------
    "accept-json-only": Case(body=TOOLS_LIST, headers={"accept": "application/json"}),
    "accept-sse-only": Case(body=TOOLS_LIST, headers={"accept": "text/event-stream"}),
    "accept-missing": Case(body=TOOLS_LIST, headers={"accept": None}),
    "accept-wildcard": Case(body=TOOLS_LIST, headers={"accept": "*/*"}),
    "accept-type-wildcards": Case(body=TOOLS_LIST, headers={"accept": "application/*, text/*"}),
    "accept-upper-case": Case(body=TOOLS_LIST, headers={"accept": "Application/JSON, Text/Event-Stream"}),
    "accept-split-over-two-lines": Case(
        body=TOOLS_LIST, headers={"accept": "application/json"}, repeated=(("accept", "text/event-stream"),)
    ),
    "accept-second-line-ignored": Case(body=TOOLS_LIST, repeated=(("accept", "nothing/useful"),)),
    "accept-with-parameters": Case(
        body=TOOLS_LIST, headers={"accept": "application/json;q=0.9, text/event-stream;q=0.8"}
    ),
    "initialize-accept-missing": Case(body=INITIALIZE, session="none", headers={"accept": None}),
    # --- Content-Type -----------------------------------------------------------------------------------------
    "content-type-missing": Case(body=TOOLS_LIST, headers={"content-type": None}),
    "content-type-text-plain": Case(body=TOOLS_LIST, headers={"content-type": "text/plain"}),
    "content-type-json-patch": Case(body=TOOLS_LIST, headers={"content-type": "application/json-patch+json"}),
    "content-type-charset": Case(body=TOOLS_LIST, headers={"content-type": "application/json; charset=utf-8"}),
    "content-type-upper-case": Case(body=TOOLS_LIST, headers={"content-type": "Application/JSON"}),
    "content-type-list": Case(
        body=TOOLS_LIST, headers={"content-type": "application/json-patch+json, application/json"}
    ),
    "content-type-split-over-two-lines": Case(body=TOOLS_LIST, repeated=(("content-type", "text/plain"),)),
    "initialize-content-type-missing": Case(body=INITIALIZE, session="none", headers={"content-type": None}),
    # --- bodies -----------------------------------------------------------------------------------------------
    "body-not-json": Case(body=b"{not json"),
    "body-empty": Case(body=b""),
    "body-not-json-without-session": Case(body=b"{not json", session="none"),
    "body-json-not-jsonrpc": Case(body={"hello": "world"}, message="kind"),
    "body-json-scalar": Case(body=42, message="kind"),
    "body-wrong-jsonrpc-version": Case(body={"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, message="kind"),
    "body-null-id": Case(body={"jsonrpc": "2.0", "id": None, "method": "tools/list"}, message="kind"),
    "body-float-id": Case(body={"jsonrpc": "2.0", "id": 1.0, "method": "tools/list"}, message="kind"),
    "body-bool-id": Case(body={"jsonrpc": "2.0", "id": True, "method": "tools/list"}, message="kind"),
    "body-params-array": Case(body={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, message="kind"),
    "body-method-not-string": Case(body={"jsonrpc": "2.0", "id": 1, "method": 5}, message="kind"),
    "body-jsonrpc-missing": Case(body={"id": 1, "method": "tools/list"}, message="kind"),
    "body-result-and-error": Case(
        body={"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}, message="kind"
    ),
    "body-response-without-id": Case(body={"jsonrpc": "2.0", "result": {}}, message="kind"),
    "body-response-bool-id": Case(body={"jsonrpc": "2.0", "id": True, "result": {}}, message="kind"),
    "body-response-result-not-object": Case(body={"jsonrpc": "2.0", "id": 1, "result": [1]}, message="kind"),
    "body-error-null-id": Case(
        body={"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}}, message="kind"
    ),
    "body-error-float-id": Case(
        body={"jsonrpc": "2.0", "id": 1.0, "error": {"code": 1, "message": "x"}}, message="kind"
    ),
    "body-error-code-string": Case(
        body={"jsonrpc": "2.0", "id": 1, "error": {"code": "7", "message": "x"}}, message="kind"
    ),
    "body-error-code-fraction": Case(
        body={"jsonrpc": "2.0", "id": 1, "error": {"code": 1.5, "message": "x"}}, message="kind"
    ),
    "body-method-not-string-with-result": Case(
        body={"jsonrpc": "2.0", "id": 1, "method": 5, "result": {}}, message="kind"
    ),
    "body-batch": Case(body=[TOOLS_LIST, ECHO], message="kind"),
    "body-over-4-mib": Case(
        body=_request(6, "tools/call", {"name": "echo", "arguments": {"text": "x" * (4 * 1024 * 1024)}}),
        differs={
            1: Difference(
                reason=_V1_BODY_LIMIT,
                fake={
                    "status": 200,
                    "content_type": ANSWER_TYPE,
                    "session_header": True,
                    "shape": "result",
                    "rpc_id": 6,
                    "result_keys": ("content", "isError"),
                    "is_error": False,
                },
            )
        },
    ),
    "body-over-4-mib-with-limit": Case(
        body=_request(6, "tools/call", {"name": "echo", "arguments": {"text": "x" * (4 * 1024 * 1024)}}),
        fake_options={"max_body_size": 4 * 1024 * 1024},
    ),
    # --- protocol version -------------------------------------------------------------------------------------
    "bad-version-header": Case(body=TOOLS_LIST, headers={"mcp-protocol-version": "1999-01-01"}),
    "modern-version-header-without-envelope": Case(body=TOOLS_LIST, headers={"mcp-protocol-version": "2026-07-28"}),
    "empty-version-header": Case(body=TOOLS_LIST, headers={"mcp-protocol-version": ""}),
    "initialize-modern-version-header": Case(
        body=INITIALIZE, session="none", headers={"mcp-protocol-version": "2026-07-28"}
    ),
    "get-bad-version-header": Case(method="GET", headers={"mcp-protocol-version": "1999-01-01"}),
    "delete-bad-version-header": Case(method="DELETE", headers={"mcp-protocol-version": "1999-01-01"}),
    "modern-body-not-json": Case(body=b"{not json", session="none", headers={"mcp-protocol-version": "2026-07-28"}),
    "modern-notification": Case(
        body={"jsonrpc": "2.0", "method": "notifications/initialized"},
        session="none",
        headers={"mcp-protocol-version": "2026-07-28"},
    ),
    "modern-batch": Case(
        body=[TOOLS_LIST], session="none", headers={"mcp-protocol-version": "2026-07-28"}, message="kind"
    ),
    "modern-accept-json-only": Case(
        body=TOOLS_LIST, session="none", headers={"mcp-protocol-version": "2026-07-28", "accept": "application/json"}
    ),
    # --- the 2026-07-28 era (served beside the handshake, routed by MCP-Protocol-Version) ----------------------
    **{f"modern-{name}": case for name, case in MODERN_CASES.items()},
    # --- DNS-rebinding protection -----------------------------------------------------------------------------
    "bad-host": Case(body=TOOLS_LIST, headers={"host": "evil.example:80"}),
    "bad-origin": Case(body=TOOLS_LIST, headers={"origin": "http://evil.example"}),
    "bad-host-without-session": Case(body=INITIALIZE, session="none", headers={"host": "evil.example"}),
    "empty-origin": Case(body=TOOLS_LIST, headers={"origin": ""}),
    "host-without-port": Case(body=TOOLS_LIST, headers={"host": "127.0.0.1"}),
    "bad-host-and-content-type-missing": Case(body=TOOLS_LIST, headers={"host": "evil.example", "content-type": None}),
    "bad-origin-and-content-type-text": Case(
        body=TOOLS_LIST, headers={"origin": "http://evil.example", "content-type": "text/plain"}
    ),
    "bad-host-on-delete": Case(method="DELETE", headers={"host": "evil.example"}),
    "bad-origin-on-get": Case(method="GET", headers={"origin": "http://evil.example"}),
    # --- other HTTP methods -----------------------------------------------------------------------------------
    "put-405": Case(method="PUT", body=TOOLS_LIST),
    "patch-405": Case(method="PATCH", body=TOOLS_LIST),
    "options-405": Case(method="OPTIONS"),
    "put-405-without-session": Case(method="PUT", body=TOOLS_LIST, session="none"),
    # --- GET --------------------------------------------------------------------------------------------------
    "get-with-session": Case(method="GET"),
    "get-without-session": Case(method="GET", session="none"),
    "get-unknown-session": Case(method="GET", session="unknown"),
    "get-after-delete": Case(method="GET", session="deleted", differs={1: _V1_AFTER_DELETE}),
    "get-accept-json-only": Case(method="GET", headers={"accept": "application/json"}),
    "get-accept-wildcard": Case(method="GET", headers={"accept": "*/*"}),
    "get-second-concurrent-409": Case(method="GET", hold_get=True),
    "get-last-event-id-500": Case(method="GET", headers={"last-event-id": "0"}),
    "get-last-event-id-empty": Case(method="GET", headers={"last-event-id": ""}),
    "get-accept-missing": Case(method="GET", headers={"accept": None}),
    "get-modern-version-header": Case(method="GET", headers={"mcp-protocol-version": "2026-07-28"}),
    # --- DELETE -----------------------------------------------------------------------------------------------
    "delete-valid": Case(method="DELETE"),
    "delete-unknown": Case(method="DELETE", session="unknown"),
    "delete-missing": Case(method="DELETE", session="none"),
    "delete-twice": Case(method="DELETE", session="deleted", differs={1: _V1_AFTER_DELETE}),
}


# --- talking to a server --------------------------------------------------------------------------------------


def _base_headers(method: str) -> dict[str, str]:
    if method == "GET":
        return {"accept": BOTH, "cache-control": "no-store"}
    if method == "DELETE":
        return {}
    return {"accept": BOTH, "content-type": "application/json"}


async def _read_all(response: httpx.Response) -> bytes:
    async with asyncio.timeout(TIMEOUT):
        return await response.aread()


async def _open_session(
    client: httpx.AsyncClient, url: str, initialize: dict[str, Any] = INITIALIZE, *, notify: bool = True
) -> str:
    """A raw initialize (+ notifications/initialized); returns the session id."""
    async with client.stream("POST", url, json=initialize, headers=_base_headers("POST")) as response:
        await _read_all(response)
        assert response.status_code == 200, response.status_code
        session_id = response.headers["mcp-session-id"]
    if not notify:
        return session_id
    headers = {**_base_headers("POST"), "mcp-session-id": session_id, "mcp-protocol-version": VERSION}
    response = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert response.status_code == 202, response.status_code
    return session_id


async def _session_id(client: httpx.AsyncClient, url: str, kind: Session) -> str | None:
    if kind == "none":
        return None
    if kind == "unknown":
        return UNKNOWN_ID
    if kind == "leaked":
        response = await client.post(url, json=TOOLS_LIST, headers=_base_headers("POST"))
        assert response.status_code == 400, response.status_code
        return response.headers["mcp-session-id"]
    if kind == "uninitialized":
        return await _open_session(client, url, _request(1, "initialize"), notify=False)
    session_id = await _open_session(client, url, notify=kind != "no-initialized-notification")
    if kind == "deleted":
        response = await client.delete(url, headers={"mcp-session-id": session_id, "mcp-protocol-version": VERSION})
        assert response.status_code == 200, response.status_code
    return session_id


def _first_message(body: bytes, content_type: str) -> Any:
    """The JSON-RPC message of a JSON body, or of the first ``data:`` line of an SSE body."""
    if content_type == "text/event-stream":
        for line in re.split(r"\r\n|\r|\n", body.decode()):  # SSE's line ends only: not str.splitlines()'s \x85
            if line.startswith("data:"):
                return json.loads(line[len("data:") :])
        return None
    if content_type == "application/json" and body:
        return json.loads(body)
    return None


def _answer(response: httpx.Response, body: bytes | None) -> Answer:
    raw_type = response.headers.get("content-type")
    content_type = raw_type.split(";")[0].strip().lower() if raw_type else "none"
    common: dict[str, Any] = {
        "status": response.status_code,
        "content_type": content_type,
        "session_header": "mcp-session-id" in response.headers,
        "allow": response.headers.get("allow"),
    }
    if body is None:
        return Answer(**common, shape="open-stream")
    message = _first_message(body, content_type)
    if not isinstance(message, dict):
        return Answer(**common, shape="empty" if not body else "text")
    if isinstance(message.get("error"), dict):
        error = message["error"]
        return Answer(
            **common,
            shape="error",
            rpc_id=message.get("id"),
            code=error.get("code"),
            message=error.get("message"),
            data=error.get("data"),
        )
    if isinstance(message.get("result"), dict):
        result = message["result"]
        is_error = result.get("isError")
        return Answer(
            **common,
            shape="result",
            rpc_id=message.get("id"),
            # The result's top-level keys only: server names, tool lists and capabilities are configuration.
            result_keys=tuple(sorted(result)),
            is_error=is_error if isinstance(is_error, bool) else None,
        )
    return Answer(**common, shape="other")


async def exchange(client: httpx.AsyncClient, url: str, case: Case) -> Answer:
    """Send ``case`` to the server at ``url`` (after any session setup it needs) and describe the answer."""
    session_id = await _session_id(client, url, case.session)
    headers = _base_headers(case.method)
    if session_id is not None:
        headers.update({"mcp-session-id": session_id, "mcp-protocol-version": VERSION})
    for name, value in case.headers.items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    content = case.body if isinstance(case.body, bytes) or case.body is None else _compact(case.body)
    async with contextlib.AsyncExitStack() as stack:
        if case.hold_get:
            held = await stack.enter_async_context(
                client.stream("GET", url, headers={**_base_headers("GET"), **_session_headers(session_id)})
            )
            assert held.status_code == 200, held.status_code
        request = client.build_request(case.method, url, headers=[*headers.items(), *case.repeated], content=content)
        # httpx always sends Accept and Content-Type defaults; a removed header must really be absent.
        for name, value in case.headers.items():
            if value is None and name in request.headers:
                del request.headers[name]
        response = await client.send(request, stream=True)
        try:
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            # An open GET stream never ends on its own: compare its head only.
            held_open = case.method == "GET" and response.status_code == 200 and streaming
            return _answer(response, None if held_open else await _read_all(response))
        finally:
            await response.aclose()


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _session_headers(session_id: str | None) -> dict[str, str]:
    return {} if session_id is None else {"mcp-session-id": session_id, "mcp-protocol-version": VERSION}


def _comparable(answer: Answer, case: Case) -> Answer:
    if case.message == "kind" and answer.message is not None:
        return replace(answer, message=answer.message.split(":")[0])
    return answer


# --- fixtures -------------------------------------------------------------------------------------------------


class ReferenceServers:
    """The real SDK servers of this module, one per ``json_response``, started on first use."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._urls: dict[bool, str] = {}

    def url(self, json_response: bool) -> str:
        if json_response not in self._urls:
            self._urls[json_response] = self._stack.enter_context(reference_server(json_response=json_response))
        return self._urls[json_response]


@pytest.fixture(scope="module")
def reference_servers() -> Iterator[ReferenceServers]:
    with contextlib.ExitStack() as stack:
        yield ReferenceServers(stack)


@pytest.fixture(params=[False, True], ids=["sse", "json"])
def json_response(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


# --- the test -------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("name", list(CASES))
async def test_fake_answers_like_the_real_server(
    name: str,
    reference_servers: ReferenceServers,
    fake_mcp_server_factory: FakeMCPServerFactory,
    json_response: bool,
) -> None:
    case = CASES[name]
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        real = _comparable(await exchange(client, reference_servers.url(json_response), case), case)
        # The lease fails the test if the fake raised inside (its teardown check).
        with fake_mcp_server_factory.lease(
            flavour=FLAVOUR, json_response=json_response, **case.fake_options
        ) as fake_server:
            route = fake_server.add_tool("route", _route, param_headers={"region": "Region", "shards": "Shards"})
            assert route.input_schema == ROUTE_SCHEMA  # the real server's tool, declared the fake's way
            fake = _comparable(await exchange(client, fake_server.url, case), case)
    difference = case.differs.get(MCP_MAJOR)
    if difference is not None:
        assert fake != real, f"{name}: documented as a deliberate difference ({difference.reason}), but they agree"
        answer_type = "application/json" if json_response else "text/event-stream"
        changes = {key: answer_type if value == ANSWER_TYPE else value for key, value in difference.fake.items()}
        expected = replace(real, **changes)
        assert fake == expected, (
            f"{name}: differs beyond the documented difference ({difference.reason}):\n"
            f"  fake     {fake}\n  expected {expected}\n  real     {real}"
        )
    else:
        assert fake == real, f"{name}: the fake answers\n  {fake}\nthe real mcp {MCP_MAJOR}.x server answers\n  {real}"
