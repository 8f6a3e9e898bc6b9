"""``_mcp_param``: the ``x-mcp-header`` marks of a schema, the header-value sentinel and the modern era's check.

Under mcp 2.x each function is also compared with the SDK's own (``mcp.shared.inbound``) on generated schemas,
arguments and headers: the fake must refuse exactly what the 2.3.0 server refuses, with the same message.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _sdk import MCP2
from pytest_fake_mcp._wire._mcp_param import (
    annotated_arguments,
    decode_header_value,
    encode_header_value,
    invalid_annotation,
    param_header_mismatch,
)

needs_mcp2 = pytest.mark.skipif(not MCP2, reason="compares with mcp 2.x's own check (mcp.shared.inbound)")


def _marked(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# --- the sentinel -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "on_the_wire"),
    [
        ("eu-west", "eu-west"),
        ("a b", "a b"),
        (" padded", "=?base64?IHBhZGRlZA==?="),
        ("ünïcode", "=?base64?w7xuw69jb2Rl?="),
        ("=?base64?eA==?=", "=?base64?PT9iYXNlNjQ/ZUE9PT89?="),  # a value that looks like the sentinel is wrapped
        ("", ""),
    ],
)
def test_a_value_travels_plain_when_it_can_and_wrapped_when_not(value: str, on_the_wire: str) -> None:
    assert encode_header_value(value) == on_the_wire
    assert decode_header_value(on_the_wire) == value


@pytest.mark.parametrize(
    "malformed",
    ["=?base64?not base64?=", "=?base64?ZXV?=", "=?base64?ZXU?=", "=?base64?/w==?="],
    ids=["not-base64", "stray-bits", "unpadded", "not-utf8"],
)
def test_a_malformed_sentinel_decodes_to_nothing(malformed: str) -> None:
    assert decode_header_value(malformed) is None


# --- the marks ----------------------------------------------------------------------------------------------------


def test_marks_are_found_along_properties_chains_only() -> None:
    schema = _marked(
        region={"type": "string", "x-mcp-header": "Region"},
        target={"type": "object", "properties": {"zone": {"type": "integer", "x-mcp-header": "Zone"}}},
    )
    assert invalid_annotation(schema) is None
    assert sorted((path, token) for path, token, _ in annotated_arguments(schema)) == [
        (("region",), "Region"),
        (("target", "zone"), "Zone"),
    ]


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "x-mcp-header": "Root"}, "sits where no argument is"),
        (_marked(items={"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}), "no argument is"),
        (_marked(region={"type": "string", "x-mcp-header": 7}), "must be a string, not int"),
        (_marked(region={"type": "string", "x-mcp-header": "Re:gion"}), "is not a header name token"),
        (_marked(ratio={"type": "number", "x-mcp-header": "Ratio"}), "needs 'type' string, integer or boolean"),
        (
            _marked(a={"type": "string", "x-mcp-header": "Same"}, b={"type": "string", "x-mcp-header": "same"}),
            "is already used by argument",
        ),
    ],
    ids=["root", "inside-items", "not-a-string", "not-a-token", "number", "case-insensitive-duplicate"],
)
def test_an_invalid_mark_is_named_and_disables_the_check(schema: dict[str, Any], reason: str) -> None:
    found = invalid_annotation(schema)
    assert found is not None
    assert reason in found
    assert param_header_mismatch(schema, {"region": "x"}, [("mcp-param-region", "y")]) is None


def test_a_nested_argument_is_checked_by_its_path() -> None:
    schema = _marked(target={"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}})
    assert param_header_mismatch(schema, {"target": {"zone": "z1"}}, [("Mcp-Param-Zone", "z1")]) is None
    assert param_header_mismatch(schema, {"target": {"zone": "z1"}}, []) == (
        "Mcp-Param-Zone header is missing but the request body's 'target.zone' argument is present"
    )


# --- the same answers as the SDK's own check ----------------------------------------------------------------------

_TOKENS = st.sampled_from(["Region", "region", "Zone", "N", "Dry-Run", "bad token", "x:y"])
_TYPES = st.sampled_from(["string", "integer", "boolean", "number", "object", None])
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2.0, 2.5, -0.0, 1e20]),
    st.sampled_from(["eu", " eu", "ü", "2", "2.0", "true", ""]),
    st.just(["eu"]),
)
_RAW_VALUES = st.one_of(
    st.sampled_from(["eu", "2", "2.0", "2.50", "-0", "true", "false", "", " eu"]),
    st.sampled_from(["=?base64?ZXU=?=", "=?base64?ZXU?=", "=?base64?IGV1?=", "=?base64?w7w=?=", "=?base64?!!?="]),
)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]]]:
    names = draw(st.lists(st.sampled_from(["region", "n", "flag"]), min_size=1, max_size=3, unique=True))
    properties: dict[str, Any] = {}
    for name in names:
        prop: dict[str, Any] = {}
        kind = draw(_TYPES)
        if kind is not None:
            prop["type"] = kind
        if draw(st.booleans()):
            prop["x-mcp-header"] = draw(_TOKENS)
        properties[name] = prop
    arguments = {name: draw(_VALUES) for name in names if draw(st.booleans())}
    header_names = [f"Mcp-Param-{t}" for t in ("Region", "region", "Zone", "N", "Dry-Run")]
    headers = draw(st.lists(st.tuples(st.sampled_from(header_names), _RAW_VALUES), max_size=4))
    return {"type": "object", "properties": properties}, arguments, [(k.lower(), v) for k, v in headers]


@needs_mcp2
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_the_check_answers_as_the_sdk_server_does(
    case: tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]]],
) -> None:
    from mcp.shared.inbound import find_invalid_x_mcp_header, validate_mcp_param_headers
    from starlette.datastructures import Headers

    schema, arguments, headers = case
    raw = Headers(raw=[(name.encode(), value.encode()) for name, value in headers])
    rejection = validate_mcp_param_headers(schema, arguments, raw)
    assert param_header_mismatch(schema, arguments, headers) == (None if rejection is None else rejection.message)
    assert (invalid_annotation(schema) is None) == (find_invalid_x_mcp_header(schema) is None)


@needs_mcp2
@given(value=st.text(max_size=12))
def test_the_sentinel_agrees_with_the_sdk(value: str) -> None:
    from mcp.shared.inbound import decode_header_value as sdk_decode
    from mcp.shared.inbound import encode_header_value as sdk_encode

    assert encode_header_value(value) == sdk_encode(value)
    assert decode_header_value(value) == sdk_decode(value)
