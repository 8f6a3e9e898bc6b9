"""JSON-RPC parsing (_protocol.py): a body reads exactly as ``json.loads`` reads it, errors included."""

from __future__ import annotations

import json

import pytest

from pytest_fake_mcp._protocol import Flavour, Incoming, ParseFailure, parse_message

BODIES = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n ',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","id":2}',
    b'{"jsonrpc":"2.0","id":1e400,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized","params":{"s":"\\ud800"}}',
    b' {"jsonrpc":"2.0","id":1,"method":"ping"}',
    b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}x',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","id":1,"method":',
    b'{"jsonrpc":"2.0","id":1,"method":"p\x00"}',
    b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}',
    b'{"',
    b"[1]",
    b"",
]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_a_body_parses_to_what_json_loads_makes_of_it(body: bytes) -> None:
    """The same message, or for a body that is not JSON the same parse error (mcp 1.x quotes json's words)."""
    parsed = parse_message(body, Flavour.MCP1)
    expected: object
    try:
        expected = json.loads(body)
    except ValueError as exc:
        expected = ParseFailure(code=-32700, message=f"Parse error: {exc}")
    if isinstance(parsed, Incoming):
        assert json.dumps(parsed.raw) == json.dumps(expected)
    elif parsed.code == -32700:
        assert parsed == expected
    else:
        assert parsed.code == -32602
        assert parsed.body == expected
