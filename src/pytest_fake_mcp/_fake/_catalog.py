"""What the fake serves: tools, resources, resource templates and prompts the test registers.

Handlers may be sync or async. A handler gets the call's arguments as keyword arguments, and a
:class:`Context` if it declares a parameter named ``ctx`` (or annotated ``Context``).
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import inspect
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._wire._errors import JSONRPCError, ScriptError, ToolError
from .._wire._mcp_param import X_MCP_HEADER, invalid_annotation
from .._wire._types import JSONObject, JSONValue, SessionId

__all__ = ["Catalog", "Context", "Prompt", "Resource", "ResourceTemplate", "ServerRequests", "Tool", "ToolResult"]

_T = TypeVar("_T")

_PLAIN = frozenset({str, dict, list, tuple, int, float, bool, type(None)})
"""Types a handler's value can be that are never awaitable: no ``inspect.isawaitable`` for them (issue 11)."""


def _pending(result: Any, own_task: bool) -> Awaitable[Any] | None:
    """What to await for a handler's ``result``: None for a plain value, else the awaitable it returned (in a task
    of its own if ``own_task``, so none of its code runs on the caller's task)."""
    if type(result) in _PLAIN or not inspect.isawaitable(result):
        return None
    return asyncio.ensure_future(result) if own_task else result


_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A tool's answer in full: return one from a handler to control every field.

    Example::

        fake_mcp_server.add_tool("flaky", lambda: ToolResult(content=[{"type": "text", "text": "no"}],
                                                           is_error=True))
    """

    content: list[JSONObject] = field(default_factory=list)
    structured: JSONObject | None = None
    is_error: bool = False
    meta: JSONObject | None = None

    def to_json(self) -> JSONObject:
        result: JSONObject = {"content": list(self.content), "isError": self.is_error}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.meta is not None:
            result["_meta"] = self.meta
        return result


class ServerRequests:
    """Requests the fake sent to clients, each waiting for the client's answer (matched by session and id)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[tuple[SessionId | None, JSONValue], asyncio.Future[JSONObject]] = {}

    def open(self, session_id: SessionId | None) -> tuple[int, asyncio.Future[JSONObject]]:
        """A new request id and the future its answer will complete (on the running loop)."""
        request_id = next(self._ids)
        future: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._pending[(session_id, request_id)] = future
        return request_id, future

    def close(self, session_id: SessionId | None, request_id: JSONValue) -> None:
        self._pending.pop((session_id, request_id), None)

    def deliver(self, session_id: SessionId | None, message: Mapping[str, Any]) -> bool:
        """Complete the request ``message`` answers; False if nothing in ``session_id`` waits for its id."""
        request_id = message.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return False
        future = self._pending.pop((session_id, request_id), None)
        if future is None or future.done():
            return False
        future.set_result(dict(message))
        return True


class Context:
    """What a handler can see and do besides its arguments.

    ``session_id`` and ``state`` (a dict kept per session) let a test show that two sessions do
    not share state; ``progress()`` and ``log()`` send notifications on the request's SSE stream,
    before the response (a JSON-mode server drops them, as the SDK does); ``request()`` sends the
    client a request there (``sampling/createMessage``, ``elicitation/create``) and waits for its answer.
    """

    def __init__(
        self,
        *,
        session_id: SessionId | None,
        state: dict[str, Any],
        request_id: JSONValue,
        progress_token: JSONValue,
        emit: Callable[[JSONObject], None],
        log_level: str | None = None,
        seq: int = 0,
    ) -> None:
        self.session_id = session_id
        self.seq = seq
        """The journal number of the exchange this call arrived in."""
        self.state = state
        self.request_id = request_id
        self._progress_token = progress_token
        self._emit = emit
        self._log_level = log_level
        self._server_requests: ServerRequests | None = None
        self._own_task = False
        """A handler's awaitable runs in a task of its own (the call is answered on the request's task)."""

    def bind_server_requests(self, registry: ServerRequests) -> None:
        """Where :meth:`request` waits for answers (the server's registry)."""
        self._server_requests = registry

    async def request(
        self, method: str, params: JSONObject | None = None, *, answer_within: float = 30.0
    ) -> JSONObject:
        """Send the client a request on this call's SSE stream and return its ``result``.

        The client answers in a POST of its own; the fake (fixture or ``fake-mcp serve``) routes that answer back here.

        Raises:
            JSONRPCError: if the client answered with an error.
            TimeoutError: if no answer came within ``answer_within`` seconds.

        Example::

            async def ask(ctx):
                answer = await ctx.request("elicitation/create", {"message": "Name?", "requestedSchema": schema})
                return answer["action"]
        """
        registry = self._server_requests
        if registry is None:
            raise ScriptError(f"ctx.request({method!r}): this context cannot send requests to the client")
        request_id, future = registry.open(self.session_id)
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._emit(message)
            async with asyncio.timeout(answer_within):
                answer = await future
        except TimeoutError:
            raise TimeoutError(
                f"the client did not answer {method} (id {request_id}) within {answer_within}s"
            ) from None
        finally:
            registry.close(self.session_id, request_id)
        error = answer.get("error")
        if isinstance(error, dict):
            raise JSONRPCError(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` (only if the client asked, with a progress token)."""
        if self._progress_token is None:
            return
        params: JSONObject = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    def log(self, level: str, data: JSONValue, logger: str | None = None) -> None:
        """Send ``notifications/message`` at ``level`` (e.g. ``"info"``)."""
        params: JSONObject = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._emit({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def _wants_context(parameter: inspect.Parameter) -> bool:
    annotation = parameter.annotation
    return parameter.name == "ctx" or annotation is Context or annotation == "Context"


def _schema_from_signature(signature: inspect.Signature) -> JSONObject:
    properties: JSONObject = {}
    required: list[str] = []
    for name, parameter in signature.parameters.items():
        if _wants_context(parameter) or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = parameter.annotation
        if isinstance(annotation, str):
            annotation = {
                "str": str,
                "int": int,
                "float": float,
                "bool": bool,
                "dict": dict,
                "list": list,
            }.get(annotation.split("[")[0])
        prop: JSONObject = {}
        json_type = _JSON_TYPES.get(annotation) or _JSON_TYPES.get(getattr(annotation, "__origin__", None))
        if json_type:
            prop["type"] = json_type
        properties[name] = prop
        if parameter.default is parameter.empty:
            required.append(name)
    schema: JSONObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


class _Callable:
    """A user handler with its signature read once."""

    def __init__(self, kind: str, name: str, handler: Callable[..., Any]) -> None:
        if not callable(handler):
            raise ScriptError(f"{kind} {name!r}: handler={handler!r} is not callable; pass a function or lambda")
        self.handler = handler
        try:
            self.signature = inspect.signature(handler)
        except (TypeError, ValueError):
            self.signature = inspect.Signature([inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
        self.context_param = next((p.name for p in self.signature.parameters.values() if _wants_context(p)), None)
        parameters = self.signature.parameters.values()
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        # A signature of plain named parameters (most handlers) is checked with two set tests; ``Signature.bind``
        # was a sixth of a tools/call (issue 11). Any other signature, or arguments that do not fit, go to it.
        self._names: frozenset[str] | None = (
            frozenset(p.name for p in parameters) if all(p.kind in keyword for p in parameters) else None
        )
        self._required = frozenset(p.name for p in parameters if p.default is p.empty)

    def bind(self, arguments: Mapping[str, Any], ctx: Context) -> dict[str, Any]:
        """The handler's keyword arguments; TypeError if the call's arguments do not fit its signature."""
        kwargs = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        names = self._names
        if names is None or not (kwargs.keys() <= names and self._required <= kwargs.keys()):
            self.signature.bind(**kwargs)  # the signature's own TypeError, as the SDK reports it
        return kwargs

    async def run(self, kwargs: Mapping[str, Any], *, own_task: bool = False) -> Any:
        """Enter the handler with arguments :meth:`bind` accepted (``own_task``: its awaitable in a task of its
        own, so none of its code runs on the caller's task)."""
        result = self.handler(**kwargs)
        pending = _pending(result, own_task)
        return result if pending is None else await pending

    async def invoke(self, arguments: Mapping[str, Any], ctx: Context) -> Any:
        # TypeError: wrong arguments, reported to the client
        return await self.run(self.bind(arguments, ctx), own_task=ctx._own_task)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    name: str
    description: str | None
    input_schema: JSONObject
    output_schema: JSONObject | None
    call: _Callable

    def to_json(self) -> JSONObject:
        entry: JSONObject = {"name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        entry["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        return entry


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    uri: str
    name: str
    description: str | None
    mime_type: str | None
    read: _Callable

    def to_json(self) -> JSONObject:
        entry: JSONObject = {"uri": self.uri, "name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        if self.mime_type is not None:
            entry["mimeType"] = self.mime_type
        return entry


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceTemplate:
    uri_template: str
    name: str
    description: str | None
    mime_type: str | None
    pattern: re.Pattern[str]
    read: _Callable

    def to_json(self) -> JSONObject:
        entry: JSONObject = {"uriTemplate": self.uri_template, "name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        if self.mime_type is not None:
            entry["mimeType"] = self.mime_type
        return entry


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    name: str
    description: str | None
    arguments: list[JSONObject]
    render: _Callable

    def to_json(self) -> JSONObject:
        entry: JSONObject = {"name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        entry["arguments"] = self.arguments
        return entry


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _content_item(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in _CONTENT_TYPES


def tool_result(value: Any) -> JSONObject:
    """Turn a handler's return value into a ``CallToolResult``."""
    if type(value) is str:  # the commonest answer, built as ToolResult(content=[text]).to_json() builds it
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, ToolResult):
        return value.to_json()
    if value is None:
        return ToolResult().to_json()
    if isinstance(value, str):
        return ToolResult(content=[{"type": "text", "text": value}]).to_json()
    if _content_item(value):
        return ToolResult(content=[value]).to_json()
    if isinstance(value, dict):
        text = json.dumps(value, indent=2, default=str)
        return ToolResult(content=[{"type": "text", "text": text}], structured=value).to_json()
    if isinstance(value, list | tuple) and value and all(_content_item(v) for v in value):
        return ToolResult(content=list(value)).to_json()
    return ToolResult(content=[{"type": "text", "text": json.dumps(value, default=str)}]).to_json()


class Catalog:
    """The tools, resources and prompts one fake server serves."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        self.subscriptions = False
        """Answer ``resources/subscribe`` and ``resources/unsubscribe`` (and say so in the capabilities)."""

    def clear(self) -> None:
        self.tools = {}
        self.resources = {}
        self.templates = {}
        self.prompts = {}
        self.subscriptions = False

    def add_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: JSONObject | None = None,
        output_schema: JSONObject | None = None,
        description: str | None = None,
        param_headers: Mapping[str, str] | None = None,
    ) -> Tool:
        __tracebackhide__ = True
        if not isinstance(name, str) or not name:
            raise ScriptError(f"add_tool(name={name!r}): a tool needs a non-empty string name")
        if description is not None and not isinstance(description, str):
            raise ScriptError(f"add_tool({name!r}, description={description!r}): the description must be a str")
        for argument, schema in (("input_schema", input_schema), ("output_schema", output_schema)):
            if schema is not None:
                _check_object_schema(name, argument, schema)
        call = _Callable("tool", name, handler)
        if description is None:
            description = inspect.getdoc(handler) if not _is_lambda(handler) else None
        schema = input_schema if input_schema is not None else _schema_from_signature(call.signature)
        if param_headers is not None:
            schema = _with_param_headers(name, schema, param_headers)
        tool = Tool(name=name, description=description, input_schema=schema, output_schema=output_schema, call=call)
        self.tools[name] = tool
        return tool

    def add_resource(
        self,
        uri: str,
        content: str | bytes | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Resource:
        reader = content if callable(content) else _constant(content)
        if mime_type is None and isinstance(content, str):
            mime_type = "text/plain"
        resource = Resource(
            uri=uri,
            name=name or uri.rsplit("/", 1)[-1] or uri,
            description=description,
            mime_type=mime_type,
            read=_Callable("resource", uri, reader),
        )
        self.resources[uri] = resource
        return resource

    def add_resource_template(
        self,
        uri_template: str,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> ResourceTemplate:
        names = re.findall(r"\{(\w+)\}", uri_template)
        if not names:
            raise ScriptError(
                f"add_resource_template({uri_template!r}): no {{variable}} in the template; "
                "use add_resource() for a fixed URI"
            )
        regex = "".join(
            f"(?P<{part[1:-1]}>[^/]+)" if re.fullmatch(r"\{\w+\}", part) else re.escape(part)
            for part in re.split(r"(\{\w+\})", uri_template)
            if part
        )
        template = ResourceTemplate(
            uri_template=uri_template,
            name=name or uri_template,
            description=description,
            mime_type=mime_type,
            pattern=re.compile(regex),
            read=_Callable("resource template", uri_template, handler),
        )
        self.templates[uri_template] = template
        return template

    def add_prompt(
        self,
        name: str,
        handler: str | Callable[..., Any],
        *,
        description: str | None = None,
    ) -> Prompt:
        render = handler if callable(handler) else _constant(handler)
        call = _Callable("prompt", name, render)
        arguments = [
            {"name": p.name, "required": p.default is p.empty}
            for p in call.signature.parameters.values()
            if not _wants_context(p) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        prompt = Prompt(name=name, description=description, arguments=arguments, render=call)
        self.prompts[name] = prompt
        return prompt

    def remove_tool(self, name: str) -> Tool:
        """Stop serving tool ``name`` (a later call is answered ``Unknown tool``, as the SDK's ``remove_tool``)."""
        __tracebackhide__ = True
        return _pop(self.tools, name, "remove_tool", "tool", "add_tool")

    def remove_resource(self, uri: str) -> Resource | ResourceTemplate:
        """Stop serving the resource at ``uri`` (or the template ``uri`` names)."""
        __tracebackhide__ = True
        if uri in self.templates and uri not in self.resources:
            return self.templates.pop(uri)
        known: dict[str, Resource | ResourceTemplate] = {**self.templates, **self.resources}
        removed = _pop(known, uri, "remove_resource", "resource", "add_resource")
        self.resources.pop(uri)
        return removed

    def remove_prompt(self, name: str) -> Prompt:
        """Stop serving prompt ``name``."""
        __tracebackhide__ = True
        return _pop(self.prompts, name, "remove_prompt", "prompt", "add_prompt")

    # --- answering -------------------------------------------------------------------------

    async def call_tool(
        self, params: JSONObject, ctx: Context, on_run: Callable[[str], None] | None = None
    ) -> JSONObject:
        """Run a tool; unknown tools and bad arguments are ``isError`` results, as in the SDK.

        ``on_run(name)`` is called as the handler is entered: a call refused before (unknown tool,
        arguments that do not fit) did not run.
        """
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return ToolResult(content=[{"type": "text", "text": f"Unknown tool: {name}"}], is_error=True).to_json()
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise JSONRPCError(-32602, "Invalid params: 'arguments' must be an object")
        try:
            kwargs = tool.call.bind(arguments, ctx)
        except TypeError as exc:
            text = f"Input validation error: {exc}"
            return ToolResult(content=[{"type": "text", "text": text}], is_error=True).to_json()
        if on_run is not None:
            on_run(tool.name)
        try:  # run()'s steps, without its coroutine for a handler that answers a plain value (issue 11)
            value = tool.call.handler(**kwargs)
            pending = _pending(value, ctx._own_task)
            if pending is not None:
                value = await pending
        except ToolError as exc:
            return ToolResult(content=[{"type": "text", "text": str(exc)}], is_error=True).to_json()
        return tool_result(value)

    def list_tools(self) -> JSONObject:
        return {"tools": [t.to_json() for t in self.tools.values()]}

    def list_resources(self) -> JSONObject:
        return {"resources": [r.to_json() for r in self.resources.values()]}

    def list_templates(self) -> JSONObject:
        return {"resourceTemplates": [t.to_json() for t in self.templates.values()]}

    def list_prompts(self) -> JSONObject:
        return {"prompts": [p.to_json() for p in self.prompts.values()]}

    async def read_resource(self, params: JSONObject, ctx: Context) -> JSONObject:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise JSONRPCError(-32602, "Invalid params: 'uri' must be a string")
        mime_type: str | None
        resource = self.resources.get(uri)
        if resource is not None:
            value = await resource.read.invoke({}, ctx)
            mime_type = resource.mime_type
        else:
            for template in self.templates.values():
                match = template.pattern.fullmatch(uri)
                if match:
                    value = await template.read.invoke(match.groupdict(), ctx)
                    mime_type = template.mime_type
                    break
            else:
                raise JSONRPCError(-32002, f"Resource not found: {uri}", {"uri": uri})
        return {"contents": _resource_contents(uri, value, mime_type)}

    async def get_prompt(self, params: JSONObject, ctx: Context) -> JSONObject:
        name = params.get("name")
        prompt = self.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise JSONRPCError(-32602, f"Unknown prompt: {name}")
        arguments = params.get("arguments") or {}
        try:
            value = await prompt.render.invoke(arguments, ctx)
        except TypeError as exc:
            if _binding_error(prompt.render, arguments, ctx):
                raise JSONRPCError(-32602, f"Invalid arguments for prompt {name}: {exc}") from None
            raise
        result: JSONObject = {}
        if prompt.description is not None:
            result["description"] = prompt.description
        result["messages"] = _prompt_messages(value)
        return result


def _pop(entries: dict[str, _T], name: str, method: str, kind: str, adder: str) -> _T:
    """Remove ``entries[name]``, or refuse at the test's line naming what is served."""
    __tracebackhide__ = True
    if not isinstance(name, str) or name not in entries:
        served = ", ".join(map(repr, entries)) or "nothing"
        close = difflib.get_close_matches(name, list(entries), n=1) if isinstance(name, str) else []
        hint = f"did you mean {close[0]!r}?" if close else f"register it first with {adder}()"
        raise ScriptError(f"{method}({name!r}): the fake serves no {kind} by that name (it serves {served}); {hint}")
    return entries.pop(name)


def _is_lambda(handler: Callable[..., Any]) -> bool:
    return getattr(handler, "__name__", "") == "<lambda>"


def _check_object_schema(tool: str, argument: str, schema: Any) -> None:
    """Refuse, at the test's line, a schema an MCP client would reject when it lists the tool.

    A validator checks it against its dialect's meta-schema (``$schema``, else JSON Schema 2020-12, the MCP
    default: SEP-1613), as the mcp 2.x client does before it checks a result; the checks around it are what
    MCP asks beyond JSON Schema (an object, named fields).
    """
    __tracebackhide__ = True
    example = '{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}'
    shown = repr(schema)
    where = f"add_tool({tool!r}, {argument}={shown if len(shown) <= 80 else '{...}'})"
    if not isinstance(schema, Mapping):
        raise ScriptError(f"{where}: a tool's {argument} is a JSON Schema object (a dict), e.g. {example}")
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"{where}: the schema must be JSON-serialisable ({exc})") from None
    invalid = _meta_schema_error(schema)
    if invalid is not None:
        keys, part, reason, dialect = invalid
        path = argument + "".join(f"[{key!r}]" for key in keys)
        raise ScriptError(
            f"{where}: not a valid schema under {dialect}: {reason}\n  {path} = {json.dumps(part)}\n"
            f"  Hint: {_hint(keys, example)}"
        )
    if schema.get("type") != "object":
        raise ScriptError(
            f"{where}: MCP requires {argument} to describe an object ('type': 'object'); the arguments are "
            f"named fields of it, e.g. {example}"
        )
    # Past the meta-schema (or under a dialect it cannot read): what MCP clients need to name the arguments.
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not all(isinstance(v, Mapping) for v in properties.values()):
        raise ScriptError(
            f"{where}: 'properties' maps each argument name to its schema (a dict), e.g. {example}\n"
            f"  {argument}['properties'] = {json.dumps(properties)}"
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ScriptError(
            f"{where}: 'required' is a list of argument names, e.g. ['text']\n"
            f"  {argument}['required'] = {json.dumps(required)}"
        )


def _hint(keys: tuple[Any, ...], example: str) -> str:
    """The fix for the keyword the meta-schema refused, by where it sits."""
    if len(keys) >= 2 and keys[-2] == "properties":
        return f"'properties' maps each argument name to its schema (a dict), e.g. {example}"
    if keys and keys[-1] == "type":
        return "'type' is one of array, boolean, integer, null, number, object, string, or a list of them"
    if keys and keys[-1] == "required":
        return "'required' is a list of distinct argument names, e.g. ['text']"
    return "see https://json-schema.org/draft/2020-12/json-schema-validation for each keyword's values"


def _meta_schema_error(schema: Mapping[str, Any]) -> tuple[tuple[Any, ...], Any, str, str] | None:
    """Where ``schema`` breaks its dialect's meta-schema: (the keys to it, the part, why, the dialect), or None.

    A ``$schema`` the validator does not know is not checked: a dialect we cannot read is not an error.
    """
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]  # loaded only when used

    dialect = schema.get("$schema", _DEFAULT_DIALECT)
    validator = validators.validator_for({"$schema": dialect}, default=None)
    if validator is None:
        return None
    error = exceptions.best_match(validator(validator.META_SCHEMA).iter_errors(schema))
    if error is None:
        return None
    name = "JSON Schema 2020-12 (MCP's default dialect)" if dialect == _DEFAULT_DIALECT else f"$schema={dialect!r}"
    return tuple(error.absolute_path), error.instance, error.message, name


_DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _with_param_headers(tool: str, schema: JSONObject, param_headers: Any) -> JSONObject:
    """``schema`` with each named argument marked ``x-mcp-header``, refused at the test's line if a server would."""
    __tracebackhide__ = True
    where = f"add_tool({tool!r}, param_headers={param_headers!r:.80})"
    if not isinstance(param_headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in param_headers.items()
    ):
        raise ScriptError(f"{where}: map argument names to header names, e.g. {{'region': 'Region'}}")
    properties = dict(schema.get("properties") or {})
    for argument, token in param_headers.items():
        prop = properties.get(argument)
        if not isinstance(prop, Mapping):
            known = ", ".join(map(repr, properties)) or "none"
            raise ScriptError(f"{where}: {argument!r} is not an argument of the tool (its arguments: {known})")
        if prop.get("type") not in ("string", "integer", "boolean"):
            raise ScriptError(
                f"{where}: argument {argument!r} has type {prop.get('type')!r}; a header mirrors only a string, "
                f"integer or boolean: annotate the handler's parameter ({argument}: str) or give input_schema"
            )
        properties[argument] = {**prop, X_MCP_HEADER: token}
    marked: JSONObject = {**schema, "properties": properties}
    reason = invalid_annotation(marked)
    if reason is not None:
        raise ScriptError(f"{where}: {reason}")
    return marked


def _binding_error(call: _Callable, arguments: Mapping[str, Any], ctx: Context) -> bool:
    kwargs = dict(arguments)
    if call.context_param is not None:
        kwargs[call.context_param] = ctx
    try:
        call.signature.bind(**kwargs)
    except TypeError:
        return True
    return False


def _resource_contents(uri: str, value: Any, mime_type: str | None) -> list[JSONObject]:
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return list(value)
    entry: JSONObject = {"uri": uri}
    if isinstance(value, bytes):
        entry["mimeType"] = mime_type or "application/octet-stream"
        entry["blob"] = base64.b64encode(value).decode()
        return [entry]
    if mime_type is not None:
        entry["mimeType"] = mime_type
    entry["text"] = value if isinstance(value, str) else json.dumps(value, default=str)
    return [entry]


def _prompt_messages(value: Any) -> list[JSONObject]:
    if isinstance(value, str):
        return [{"role": "user", "content": {"type": "text", "text": value}}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [{"role": "user", "content": {"type": "text", "text": v}} if isinstance(v, str) else v for v in value]
    return [{"role": "user", "content": {"type": "text", "text": json.dumps(value, default=str)}}]
