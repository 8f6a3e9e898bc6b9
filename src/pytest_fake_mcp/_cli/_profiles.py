"""Profiles: what ``fake-mcp serve --profile NAME`` serves, built on the public serving API only.

``default`` is the fake's built-in ``echo`` tool. ``conformance`` adds the tools, resources and
prompts the official MCP conformance suite's server scenarios call, with the notifications and
server-to-client requests they expect (docs/verification.md).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .._wire._errors import ToolError

if TYPE_CHECKING:
    from .._fake._catalog import Context
    from .._host._server import FakeMCPServer
    from .._wire._types import JSONObject

__all__ = ["PROFILES", "install_conformance_profile"]

_PNG: Final = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
"""A 1x1 PNG."""


def _wav() -> str:
    """A short silent 8 kHz mono 16-bit WAV, base64."""
    samples = b"\x00\x00" * 80
    header = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt "
    header += struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16) + b"data" + struct.pack("<I", len(samples))
    return base64.b64encode(header + samples).decode()


_WAV: Final = _wav()
_EMBEDDED: Final[JSONObject] = {
    "type": "resource",
    "resource": {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    },
}
_IMAGE: Final[JSONObject] = {"type": "image", "data": _PNG, "mimeType": "image/png"}
_AUDIO: Final[JSONObject] = {"type": "audio", "data": _WAV, "mimeType": "audio/wav"}

_SEP1034_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}
_SEP1330_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Pick one", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "description": "Pick one (titled)",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Pick one (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Pick several",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Pick several (titled)",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _simple_text() -> str:
    return "This is a simple text response for testing."


def _error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


def _with_logging(ctx: Context) -> str:
    for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        ctx.log("info", step, logger="conformance")
    return "Logging completed: 3 messages sent"


def _with_progress(ctx: Context) -> str:
    for done in (0, 50, 100):
        ctx.progress(done, 100, f"step {done // 50 + 1} of 3")
    return "Progress completed: 3 notifications sent"


async def _sampling(prompt: str, ctx: Context) -> str:
    answer = await ctx.request(
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100},
    )
    content = answer.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return f"LLM response: {text if isinstance(text, str) else answer}"


async def _elicit(ctx: Context, message: str, schema: JSONObject) -> str:
    answer = await ctx.request("elicitation/create", {"message": message, "requestedSchema": schema})
    return f"Elicitation result: action={answer.get('action')}, content={answer.get('content')}"


async def _elicitation(message: str, ctx: Context) -> str:
    schema: JSONObject = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await _elicit(ctx, message, schema)


async def _sep1034_defaults(ctx: Context) -> str:
    return await _elicit(ctx, "Please review and update the form fields with defaults", _SEP1034_SCHEMA)


async def _sep1330_enums(ctx: Context) -> str:
    return await _elicit(ctx, "Please select options from the enum fields", _SEP1330_SCHEMA)


def _schema_2020_12(name: str, address: dict[str, Any] | None = None) -> str:
    return f"Processed: {name}"


def _template_data(id: str) -> JSONObject:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


def _prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


def _prompt_with_embedded_resource(resourceUri: str) -> list[JSONObject]:
    resource = {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


def _prompt_with_image() -> list[JSONObject]:
    return [
        {"role": "user", "content": _IMAGE},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


def install_conformance_profile(server: FakeMCPServer) -> None:
    """Serve what the MCP conformance suite's server scenarios call (on top of what is served already).

    Example::

        install_conformance_profile(fake_mcp_server)
        # tools test_simple_text, test_sampling, ...; resources test://static-text, ...
    """
    tool = server.add_tool
    tool("test_simple_text", _simple_text, description="Tests simple text content response")
    tool("test_image_content", lambda: _IMAGE, description="Tests image content response")
    tool("test_audio_content", lambda: _AUDIO, description="Tests audio content response")
    tool("test_embedded_resource", lambda: _EMBEDDED, description="Tests embedded resource content response")
    tool(
        "test_multiple_content_types",
        lambda: [{"type": "text", "text": "Multiple content types test:"}, _IMAGE, _EMBEDDED],
        description="Tests response with multiple content types (text, image, resource)",
    )
    tool("test_tool_with_logging", _with_logging, description="Tests tool that emits log messages during execution")
    tool("test_error_handling", _error_handling, description="Tests error response handling")
    tool("test_tool_with_progress", _with_progress, description="Tests tool that reports progress notifications")
    tool("test_sampling", _sampling, description="Tests server-initiated sampling (LLM completion request)")
    tool("test_elicitation", _elicitation, description="Tests server-initiated elicitation (user input request)")
    tool(
        "test_elicitation_sep1034_defaults",
        _sep1034_defaults,
        description="Tests elicitation with default values for all primitive types (SEP-1034)",
    )
    tool(
        "test_elicitation_sep1330_enums",
        _sep1330_enums,
        description="Tests elicitation with enum schema improvements (SEP-1330)",
    )
    tool(
        "json_schema_2020_12_tool",
        _schema_2020_12,
        description="Tool with JSON Schema 2020-12 features",
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    )

    server.add_resource(
        "test://static-text",
        "This is the content of the static text resource.",
        name="static-text",
        description="A static text resource for testing",
        mime_type="text/plain",
    )
    server.add_resource(
        "test://static-binary",
        base64.b64decode(_PNG),
        name="static-binary",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
    )
    server.add_resource(
        "test://watched-resource",
        "Watched resource content",
        name="watched-resource",
        description="A resource that can be subscribed to",
        mime_type="text/plain",
    )
    server.add_resource_template(
        "test://template/{id}/data",
        _template_data,
        name="template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    from .._host import app_of

    app_of(server).catalog.subscriptions = True

    server.add_prompt(
        "test_simple_prompt",
        "This is a simple prompt for testing.",
        description="A simple prompt without arguments",
    )
    server.add_prompt(
        "test_prompt_with_arguments", _prompt_with_arguments, description="A prompt with required arguments"
    )
    server.add_prompt(
        "test_prompt_with_embedded_resource",
        _prompt_with_embedded_resource,
        description="A prompt that includes an embedded resource",
    )
    server.add_prompt("test_prompt_with_image", _prompt_with_image, description="A prompt that includes image content")


def _install_nothing(server: FakeMCPServer) -> None:
    """The fake as it is: the built-in ``echo`` tool."""


PROFILES: Final[dict[str, Callable[[FakeMCPServer], None]]] = {
    "default": _install_nothing,
    "conformance": install_conformance_profile,
}
"""What ``fake-mcp serve --profile NAME`` installs, by name."""
