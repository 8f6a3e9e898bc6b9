"""``Mcp-Param-*`` headers: tool arguments mirrored into HTTP headers, and the modern era's check of them.

A tool's input schema marks an argument with ``"x-mcp-header": "<Token>"``. A 2026-07-28 client then sends that
argument's value in a ``Mcp-Param-<Token>`` header on each ``tools/call`` (wrapped as ``=?base64?...?=`` when it
would not survive as a header value), so a proxy can route on it without reading the body. The mcp 2.3.0 server
compares the headers with the arguments before it runs the tool and answers a disagreement 400, -32020.

Pure: no I/O. The app calls :func:`param_header_mismatch`; ``add_tool(param_headers=...)`` calls
:func:`invalid_annotation` so a test declares only what a real server would accept.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

__all__ = [
    "PARAM_HEADER_PREFIX",
    "X_MCP_HEADER",
    "annotated_arguments",
    "decode_header_value",
    "encode_header_value",
    "invalid_annotation",
    "param_header_mismatch",
]

X_MCP_HEADER: Final = "x-mcp-header"
"""The input-schema keyword that marks an argument as mirrored into a header."""
PARAM_HEADER_PREFIX: Final = "Mcp-Param-"

_SENTINEL: Final = re.compile(r"=\?base64\?(?P<payload>.*)\?=")
_PRINTABLE: Final = re.compile(r"[\x20-\x7e]*")
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field-name token (RFC 9110): the characters a header name may use."""
_DECIMAL: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_HEADER_TYPES: Final = ("string", "integer", "boolean")
"""The argument types a header may mirror (a float's text differs between languages)."""

# JSON Schema 2020-12 keywords whose values are schemas, by the shape of the value. Only a chain of plain
# ``properties`` keeps an argument's path; a position reached through any other is not an argument.
_ONE_SCHEMA: Final = frozenset(
    {
        "items",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_LIST_OF_SCHEMAS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP_OF_SCHEMAS: Final = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, Mapping[str, Any]]]:
    """Every sub-schema with its ``properties`` path (None off that chain), last-declared first as the SDK walks."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, Mapping):
                stack.extend(((*path, name) if path is not None else None, sub) for name, sub in value.items())
            elif keyword in _ONE_SCHEMA:
                stack.append((None, value))
            elif keyword in _LIST_OF_SCHEMAS and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _MAP_OF_SCHEMAS and isinstance(value, Mapping):
                stack.extend((None, sub) for sub in value.values())


def invalid_annotation(schema: Any) -> str | None:
    """Why the schema's ``x-mcp-header`` marks are not valid, as a clause; None if they are (or there are none).

    A mark is valid on an argument reached through ``properties`` only, of type string, integer or boolean,
    naming a header token not used by another argument (case does not count). A server with an invalid mark
    validates no header of that tool, and an mcp 2.x client drops the tool from its listing.
    """
    seen: dict[str, str] = {}
    for path, node in _positions(schema):
        if X_MCP_HEADER not in node:
            continue
        if not path:
            return f"{X_MCP_HEADER} sits where no argument is (only under a chain of 'properties')"
        where = ".".join(path)
        token = node[X_MCP_HEADER]
        if not isinstance(token, str):
            return f"argument {where!r}: {X_MCP_HEADER} must be a string, not {type(token).__name__}"
        if _TOKEN.fullmatch(token) is None:
            return f"argument {where!r}: {X_MCP_HEADER} {token!r} is not a header name token (letters, digits, -)"
        kind = node.get("type")
        if kind not in _HEADER_TYPES:
            return f"argument {where!r}: {X_MCP_HEADER} needs 'type' string, integer or boolean, not {kind!r}"
        other = seen.setdefault(token.lower(), where)
        if other != where:
            return f"{X_MCP_HEADER} {token!r} on argument {where!r} is already used by argument {other!r}"
    return None


def annotated_arguments(schema: Any) -> list[tuple[tuple[str, ...], str, Mapping[str, Any]]]:
    """``(path, token, property schema)`` of every marked argument, in the order the server checks them."""
    return [
        (path, node[X_MCP_HEADER], node)
        for path, node in _positions(schema)
        if path and isinstance(node.get(X_MCP_HEADER), str)
    ]


def encode_header_value(value: str) -> str:
    """``value`` as a header carries it: as it is when printable ASCII with no edge spaces, else the sentinel."""
    plain = _PRINTABLE.fullmatch(value) is not None and value == value.strip()
    if plain and _SENTINEL.fullmatch(value) is None:
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def decode_header_value(value: str | None) -> str | None:
    """A header's value with the ``=?base64?...?=`` sentinel undone; None for None or a malformed sentinel.

    Malformed: not base64, base64 with stray bits (not what an encoder writes), or not UTF-8 inside.
    """
    if value is None:
        return None
    sentinel = _SENTINEL.fullmatch(value)
    if sentinel is None:
        return value
    payload = sentinel["payload"]
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:
            return None
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _rendered(value: Any) -> str | None:
    """The text a client mirrors for an argument value; None for one it cannot (objects, lists, huge ints)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float):
        return None
    try:
        return str(value)
    except ValueError:  # an int past the interpreter's digit limit
        return None


def _agrees(kind: Any, value: Any, rendered: str, decoded: str) -> bool:
    """An integer argument also matches the same number written as a decimal (``42.0``); else the text must."""
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "integer" and integral and not isinstance(value, bool) and _DECIMAL.fullmatch(decoded):
        whole, _, fraction = decoded.partition(".")
        try:
            return not fraction.strip("0") and int(whole) == int(value)
        except ValueError:  # more digits than the interpreter converts
            return False
    return decoded == rendered


def _value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def param_header_mismatch(
    schema: Any, arguments: Mapping[str, Any], header_list: Iterable[tuple[str, str]]
) -> str | None:
    """The first way the request's ``Mcp-Param-*`` headers disagree with its arguments (the -32020 message).

    Each marked argument and its header come together, equal after the sentinel is undone, or not at all
    (``null`` counts as absent); a header sent twice is refused. None when they agree, or when the schema's
    marks are invalid (then nothing is checked).
    """
    if invalid_annotation(schema) is not None:
        return None
    values: dict[str, str] = {}
    repeated: set[str] = set()
    for name, value in header_list:
        key = name.lower()
        if key in values:
            repeated.add(key)
        values[key] = value
    for path, token, node in annotated_arguments(schema):
        header = f"{PARAM_HEADER_PREFIX}{token}"
        key = header.lower()
        raw = values.get(key)
        value = _value_at(arguments, path)
        argument = ".".join(path)
        if raw is not None and key in repeated:
            return f"{header} header appears more than once"
        if value is None:
            if raw is not None:
                return f"{header} header is present but the request body's {argument!r} argument is absent"
            continue
        rendered = _rendered(value)
        if rendered is None:
            if raw is not None:
                return f"{header} header does not match the request body's {argument!r} argument"
            continue
        if raw is None:
            return f"{header} header is missing but the request body's {argument!r} argument is present"
        decoded = decode_header_value(raw)
        if decoded is None:
            return f"{header} header carries a malformed base64 sentinel value"
        if not _agrees(node.get("type"), value, rendered, decoded):
            return f"{header} header does not match the request body's {argument!r} argument"
    return None
