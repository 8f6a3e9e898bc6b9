"""JSON-RPC parsing (_protocol.py): a body reads exactly as ``json.loads`` reads it, errors included."""

from __future__ import annotations

import json

import pytest

from pytest_fake_mcp._wire._protocol import Flavour, Incoming, ParseFailure, dumps, parse_message

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


MESSAGES: list[object] = [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}], "isError": False}},
    {"text": 'h\u00e9 \u2028 " \\ \n \x00', "numbers": [1.5, 1e400, -1e400, float("nan"), 10**30, -0.0, True, None]},
    {1: "int key", None: "null key", 2.5: "float key", False: "bool key"},
    {"nested": {"empty": [[], {}], "tuple": (1, 2)}},
    {},
    "a string",
    [1, {"a": 2}],
]


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_a_message_is_encoded_as_the_compact_json_encoder_encodes_it(message: object) -> None:
    expected = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    assert dumps(message) == expected


def test_a_message_json_cannot_encode_fails_as_json_fails_and_the_next_one_encodes() -> None:
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    for bad, error in [({"a": object()}, "is not JSON serializable"), (cyclic, "Circular reference detected")]:
        with pytest.raises((TypeError, ValueError), match=error):
            dumps(bad)
    assert dumps({"ok": [1]}) == b'{"ok":[1]}'


SHAPES: list[tuple[str, str, object, object]] = [
    # body, what it is, its id as the fake keeps it, its params as the fake keeps them
    ('{"jsonrpc":"2.0","id":1,"method":"ping"}', "request", 1, {}),
    ('{"jsonrpc":"2.0","id":"a","method":"ping","params":{"x":1}}', "request", "a", {"x": 1}),
    ('{"jsonrpc":"2.0","id":1,"method":"ping","params":null}', "request", 1, {}),
    ('{"jsonrpc":"2.0","id":true,"method":"ping"}', "notification", None, {}),
    ('{"jsonrpc":"2.0","id":1.0,"method":"ping"}', "notification", None, {}),
    ('{"jsonrpc":"2.0","id":null,"method":"ping"}', "notification", None, {}),
    ('{"jsonrpc":"2.0","method":"notifications/initialized"}', "notification", None, {}),
    ('{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}', "request", 1, {}),
    ('{"jsonrpc":"2.0","id":1,"result":{}}', "response", 1, {}),
    ('{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}', "field 'params' must be an object", None, None),
    ('{"jsonrpc":"2.0","id":1,"method":5}', "field 'method' must be a string", None, None),
    ('{"jsonrpc":"1.0","id":1,"method":"ping"}', "field 'jsonrpc' must be '2.0'", None, None),
    ('{"id":1,"method":"ping"}', "field 'jsonrpc' must be '2.0'", None, None),
]


@pytest.mark.parametrize("flavour", list(Flavour))
@pytest.mark.parametrize(("body", "kind", "request_id", "params"), SHAPES, ids=range(len(SHAPES)))
def test_a_message_is_a_request_notification_or_response_as_the_sdk_models_read_it(
    body: str, kind: str, request_id: object, params: object, flavour: Flavour
) -> None:
    """An id that is not a string or a strict integer makes a method call a notification; a method wins over a
    result; anything else is refused with what is wrong (the same under both flavours)."""
    parsed = parse_message(body.encode(), flavour)
    if isinstance(parsed, ParseFailure):
        assert (parsed.code, parsed.message) == (-32602, f"Validation error: {kind}")
        return
    shape = "request" if parsed.is_request else "notification" if parsed.is_notification else "response"
    assert shape == kind
    assert parsed.is_response == (kind == "response")
    assert (parsed.id, parsed.params, parsed.raw) == (request_id, params, json.loads(body))
    assert type(parsed.id) is type(request_id)  # 1, not True; None, not 1.0
