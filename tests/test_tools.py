"""What the fake serves (_tools.py, _handlers.py): tools, resources, prompts and utility methods, via an SDK client."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from typing import Any

import pytest
from mcp.types import PromptReference

from _sdk import MODES, as_json, sdk_session
from pytest_fake_mcp import Context, FakeMCPServer, JSONRPCError, ScriptError, ToolError, ToolResult

# pytester runs in this process and forgets every module first imported during a run. httpx and httpx2
# import their cores lazily and map the cores' exceptions by class, so the cores load here, first.
importlib.import_module("httpcore")
with contextlib.suppress(ImportError):  # httpx2 exists with mcp 2.x only
    importlib.import_module("httpcore2")


MCP2 = int(importlib.metadata.version("mcp").split(".")[0]) >= 2
if MCP2:
    from mcp import MCPError as SDKError
else:
    from mcp import McpError as SDKError


def text(value: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": is_error}


# --- tools --------------------------------------------------------------------------------------


def test_a_handlers_text_becomes_the_result_tool_result_would_build() -> None:
    from pytest_fake_mcp._fake._catalog import tool_result

    built = ToolResult(content=[{"type": "text", "text": "hi"}]).to_json()
    assert tool_result("hi") == built == text("hi")
    assert list(tool_result("hi")) == list(built)  # the same keys in the same order: the same bytes on the wire


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_an_async_handler_answers_on_every_supported_python(fake_mcp_server: FakeMCPServer, mode: str) -> None:
    # Over a socket in SSE mode the method's first step runs on the request's task and the rest in a task of its
    # own: on Python 3.12+ that rest must be a real coroutine (create_task refuses a generator-based one).
    async def slow_echo(text: str) -> str:
        await asyncio.sleep(0)
        return text

    fake_mcp_server.add_tool("slow_echo", slow_echo)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("slow_echo", {"text": "hi"})

    assert as_json(result) == text("hi")
    assert fake_mcp_server.errors == []


@pytest.mark.asyncio
async def test_echo_is_served_by_default(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        tools = await session.list_tools()
        result = await session.call_tool("echo", {"text": "hello"})

    assert as_json(tools)["tools"] == [
        {
            "name": "echo",
            "description": "Echo the text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }
    ]
    assert as_json(result) == text("hello")


@pytest.mark.asyncio
@pytest.mark.fake_mcp_server(echo_tool=False)
async def test_echo_tool_false_serves_no_tools(fake_mcp_server: FakeMCPServer) -> None:
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        tools = await session.list_tools()

    assert tools.tools == []


@pytest.mark.asyncio
async def test_sync_and_async_handlers_get_the_call_arguments(fake_mcp_server: FakeMCPServer) -> None:
    def add(a: int, b: int) -> str:
        return str(a + b)

    async def greet(name: str, punctuation: str = "!") -> str:
        await asyncio.sleep(0)
        return f"hello {name}{punctuation}"

    fake_mcp_server.add_tool("add", add)
    fake_mcp_server.add_tool("greet", greet)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        added = await session.call_tool("add", {"a": 2, "b": 3})
        greeted = await session.call_tool("greet", {"name": "Ada"})
        missing = await session.call_tool("add", {"a": 2})

    assert as_json(added) == text("5")
    assert as_json(greeted) == text("hello Ada!")
    assert as_json(missing)["isError"] is True
    assert as_json(missing)["content"][0]["text"].startswith("Input validation error: ")
    assert fake_mcp_server.figures.tool_executions == {"add": 1, "greet": 1}  # the refused call never ran


@pytest.mark.asyncio
async def test_return_values_are_converted_to_call_tool_results(fake_mcp_server: FakeMCPServer) -> None:
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    returns: dict[str, Any] = {
        "text": "plain",
        "dict": {"answer": 42},
        "content_list": [{"type": "text", "text": "a"}, image],
        "content_item": image,
        "tool_result": ToolResult(
            content=[{"type": "text", "text": "partial"}], structured={"ok": False}, is_error=True, meta={"k": "v"}
        ),
        "none": None,
        "number": 7,
    }
    for name, value in returns.items():
        fake_mcp_server.add_tool(name, lambda value=value: value, input_schema={"type": "object"})

    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        results = {name: as_json(await session.call_tool(name, {})) for name in returns}

    assert results == {
        "text": text("plain"),
        "dict": {**text('{\n  "answer": 42\n}'), "structuredContent": {"answer": 42}},
        "content_list": {"content": [{"type": "text", "text": "a"}, image], "isError": False},
        "content_item": {"content": [image], "isError": False},
        "tool_result": {
            "content": [{"type": "text", "text": "partial"}],
            "structuredContent": {"ok": False},
            "isError": True,
            "_meta": {"k": "v"},
        },
        "none": {"content": [], "isError": False},
        "number": text("7"),
    }


@pytest.mark.asyncio
async def test_tool_error_answers_an_is_error_result(fake_mcp_server: FakeMCPServer) -> None:
    def search(query: str) -> str:
        raise ToolError(f"no index for {query!r}")

    fake_mcp_server.add_tool("search", search)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        result = await session.call_tool("search", {"query": "cats"})

    assert as_json(result) == text("no index for 'cats'", is_error=True)
    assert fake_mcp_server.errors == []


@pytest.mark.asyncio
async def test_jsonrpc_error_answers_a_jsonrpc_error(fake_mcp_server: FakeMCPServer) -> None:
    def search(query: str) -> str:
        raise JSONRPCError(-32099, "index offline", {"retry": True})

    fake_mcp_server.add_tool("search", search)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        with pytest.raises(SDKError) as info:
            await session.call_tool("search", {"query": "cats"})

    assert (info.value.error.code, info.value.error.message, info.value.error.data) == (
        -32099,
        "index offline",
        {"retry": True},
    )
    call = fake_mcp_server.get_request(tool="search")
    assert call is not None
    assert (call.status, call.error_code) == (200, -32099)
    assert fake_mcp_server.errors == []


def test_other_exception_answers_internal_error_and_fails_the_test_at_teardown_at_the_handlers_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import asyncio
        import pytest
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        @pytest.mark.asyncio
        async def test_boom(fake_mcp_server):
            def boom():
                return 1 / 0  # the handler's line

            fake_mcp_server.add_tool("boom", boom)
            async with asyncio.timeout(10), streamable_http_client(fake_mcp_server.url) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    with pytest.raises(Exception) as info:
                        await session.call_tool("boom", {})
            assert info.value.error.code == -32603
            assert info.value.error.message == "Internal error: ZeroDivisionError: division by zero"
            assert len(fake_mcp_server.errors) == 1
        """
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    # The hypothesis plugin costs a pytester run ~2 s and plays no part here.
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_boom*",
            "*The fake MCP server raised 1 error(s) while answering:",
            "*handler of tools/call boom (exchange #*): ZeroDivisionError: division by zero",
            '*File "*/test_other_exception_answers_internal_error_and_fails_the_test_at_teardown_at_the_handlers_'
            'line.py", line 9, in boom',
            "*return 1 / 0  # the handler's line",
        ]
    )
    # Only the handler's frame: the fake's own frames and the loop's say nothing to the reader.
    assert "_fake/_app.py" not in result.stdout.str()


@pytest.mark.asyncio
async def test_input_schema_is_derived_from_the_signature_unless_given(fake_mcp_server: FakeMCPServer) -> None:
    def search(query: str, limit: int = 10, ratio: float = 0.5, exact: bool = False, ctx: Context | None = None) -> str:
        """Search the index."""
        return query

    given = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}, "required": ["q"]}
    output = {"type": "object", "properties": {"n": {"type": "integer"}}}
    fake_mcp_server.add_tool("search", search)
    fake_mcp_server.add_tool("raw", lambda **kw: {"n": 1}, input_schema=given, output_schema=output, description="R")
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        tools = {t["name"]: t for t in as_json(await session.list_tools())["tools"]}
        raw = await session.call_tool("raw", {"q": "x"})

    assert tools["search"] == {
        "name": "search",
        "description": "Search the index.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer"},
                "ratio": {"type": "number"},
                "exact": {"type": "boolean"},
            },
            "required": ["query"],
        },
    }
    assert tools["raw"] == {"name": "raw", "description": "R", "inputSchema": given, "outputSchema": output}
    assert as_json(raw)["structuredContent"] == {"n": 1}


def test_add_tool_with_a_non_callable_handler_names_the_value(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"tool 'search': handler='results' is not callable; pass a function"):
        fake_mcp_server.add_tool("search", "results")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"add_tool\(name=''\): a tool needs a non-empty string name"):
        fake_mcp_server.add_tool("", lambda: "x")


@pytest.mark.asyncio
async def test_state_is_per_session_and_not_shared(fake_mcp_server: FakeMCPServer) -> None:
    def count(ctx: Context) -> dict[str, Any]:
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1
        return {"session": ctx.session_id, "calls": ctx.state["calls"]}

    fake_mcp_server.add_tool("count", count)
    async with (
        asyncio.timeout(10),
        sdk_session(fake_mcp_server.url) as first,
        sdk_session(fake_mcp_server.url) as other,
    ):
        seen = [
            as_json(await session.call_tool("count", {}))["structuredContent"]
            for session in (first, first, other, first)
        ]

    first_id, other_id = (s.id for s in fake_mcp_server.sessions)
    assert seen == [
        {"session": first_id, "calls": 1},
        {"session": first_id, "calls": 2},
        {"session": other_id, "calls": 1},
        {"session": first_id, "calls": 3},
    ]
    calls = fake_mcp_server.get_requests(tool="count")
    assert [c.session_id for c in calls] == [first_id, first_id, other_id, first_id]


# --- resources and prompts -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_resources_and_templates_are_listed_and_read(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_resource("file:///notes.txt", "hello", description="Notes")
    fake_mcp_server.add_resource("file:///logo.png", b"\x89PNG", mime_type="image/png")
    fake_mcp_server.add_resource("mem://clock", lambda: "12:00", name="clock")
    fake_mcp_server.add_resource_template("file:///docs/{name}", lambda name: f"doc {name}", mime_type="text/markdown")
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        listed = as_json(await session.list_resources())["resources"]
        templates = as_json(await session.list_resource_templates())["resourceTemplates"]
        contents = [
            as_json(await session.read_resource(uri))["contents"]
            for uri in ("file:///notes.txt", "file:///logo.png", "mem://clock", "file:///docs/intro")
        ]
        with pytest.raises(SDKError) as info:
            await session.read_resource("file:///missing")

    assert listed == [
        {"uri": "file:///notes.txt", "name": "notes.txt", "description": "Notes", "mimeType": "text/plain"},
        {"uri": "file:///logo.png", "name": "logo.png", "mimeType": "image/png"},
        {"uri": "mem://clock", "name": "clock"},
    ]
    assert templates == [
        {"uriTemplate": "file:///docs/{name}", "name": "file:///docs/{name}", "mimeType": "text/markdown"}
    ]
    assert contents == [
        [{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hello"}],
        [{"uri": "file:///logo.png", "mimeType": "image/png", "blob": "iVBORw=="}],
        [{"uri": "mem://clock", "text": "12:00"}],
        [{"uri": "file:///docs/intro", "mimeType": "text/markdown", "text": "doc intro"}],
    ]
    assert (info.value.error.code, info.value.error.message) == (-32002, "Resource not found: file:///missing")


@pytest.mark.asyncio
async def test_prompts_are_listed_and_rendered(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_prompt("greet", lambda name, style="plain": f"Greet {name} ({style})", description="Greeting")
    fake_mcp_server.add_prompt("fixed", "Just text")
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        listed = as_json(await session.list_prompts())["prompts"]
        greet = as_json(await session.get_prompt("greet", {"name": "Ada"}))
        fixed = as_json(await session.get_prompt("fixed"))
        with pytest.raises(SDKError) as unknown:
            await session.get_prompt("nope")

    assert listed == [
        {
            "name": "greet",
            "description": "Greeting",
            "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
        },
        {"name": "fixed", "arguments": []},
    ]
    assert greet == {
        "description": "Greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Greet Ada (plain)"}}],
    }
    assert fixed == {"messages": [{"role": "user", "content": {"type": "text", "text": "Just text"}}]}
    assert (unknown.value.error.code, unknown.value.error.message) == (-32602, "Unknown prompt: nope")


# --- notifications and utility methods ------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", MODES)
async def test_progress_and_log_notifications_reach_the_client_in_sse_mode_only(
    fake_mcp_server: FakeMCPServer, fmt: str
) -> None:
    async def index(ctx: Context) -> str:
        ctx.progress(1, 2, "half way")
        ctx.log("info", {"indexed": 1}, logger="indexer")
        ctx.progress(2, 2)
        return "done"

    logs: list[dict[str, Any]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: Any) -> None:
        logs.append(as_json(params))

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    fake_mcp_server.add_tool("index", index)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url, logging_callback=on_log) as session:
        await session.list_tools()
        result = await session.call_tool("index", {}, progress_callback=on_progress)

    assert as_json(result) == text("done")
    call = fake_mcp_server.get_request(tool="index")
    assert call is not None
    sent = [m.get("method", "result") for m in call.response_messages]
    if fmt == "sse":
        assert sent == ["notifications/progress", "notifications/message", "notifications/progress", "result"]
        assert progress == [(1, 2, "half way"), (2, 2, None)]
        assert logs == [{"level": "info", "logger": "indexer", "data": {"indexed": 1}}]
    else:  # JSON mode has no stream to carry them: dropped, as the SDK server drops them
        assert sent == ["result"]
        assert (progress, logs) == ([], [])


def _sync_progress(ctx: Context) -> str:
    ctx.progress(1, 2, "half way")
    return "done"


def _sync_returning_awaitable(ctx: Context) -> Any:
    async def later() -> str:
        ctx.progress(1, 2, "half way")
        await asyncio.sleep(0)
        return "done"

    return later()


async def _async_with_timeout(ctx: Context) -> str:
    # A task-bound context held across a wait: the handler's code must run on one task from start to end.
    async with asyncio.timeout(10):
        entered = asyncio.current_task()
        ctx.progress(1, 2, "half way")
        await asyncio.sleep(0.01)
        if asyncio.current_task() is not entered:
            raise AssertionError("the handler was moved to another task while it waited")
    return "done"


@pytest.mark.asyncio
@pytest.mark.parametrize("handler", [_sync_progress, _sync_returning_awaitable, _async_with_timeout])
async def test_a_handler_of_any_shape_streams_its_progress_before_its_answer(
    fake_mcp_server: FakeMCPServer, handler: Any
) -> None:
    """Sync, sync returning an awaitable, async holding a timeout across a wait: each answers over SSE."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    fake_mcp_server.add_tool("index", handler)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.list_tools()
        result = await session.call_tool("index", {}, progress_callback=on_progress)

    assert as_json(result) == text("done")
    assert progress == [(1, 2, "half way")]
    call = fake_mcp_server.get_request(tool="index")
    assert call is not None
    assert [m.get("method", "result") for m in call.response_messages] == ["notifications/progress", "result"]
    assert fake_mcp_server.errors == []


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # 2.x client, SEP-2577
async def test_ping_set_level_and_completion_are_answered(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_prompt("greet", lambda name: f"hi {name}")
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        ping = await session.send_ping()
        level = await session.set_logging_level("warning")
        completion = await session.complete(
            PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "A"}
        )

    assert as_json(ping) == as_json(level) == {}
    assert as_json(completion) == {"completion": {"values": [], "total": 0, "hasMore": False}}
    answered = [(e.rpc_method, e.status, e.error_code) for e in fake_mcp_server.get_requests(kind="request")][1:]
    assert answered == [("ping", 200, None), ("logging/setLevel", 200, None), ("completion/complete", 200, None)]
    set_level = fake_mcp_server.get_request(method="logging/setLevel")
    assert set_level is not None
    assert set_level.request_body["params"] == {"level": "warning"}


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ("string", "is a JSON Schema object (a dict)"),
        ({"type": "string"}, "MCP requires input_schema to describe an object ('type': 'object')"),
        ({"type": "object", "properties": {"text": "string"}}, "'properties' maps each argument name to its schema"),
        ({"type": "object", "properties": {"text": True}}, "'properties' maps each argument name to its schema"),
        ({"type": "object", "required": "text"}, "'required' is a list of distinct argument names"),
        ({"type": "object", "default": object()}, "must be JSON-serialisable"),
        ({"type": "strng"}, "not a valid schema under JSON Schema 2020-12 (MCP's default dialect)"),
        ({"type": "object", "required": ["q", "q"]}, "['q', 'q'] has non-unique elements"),
        ({"type": "object", "properties": {"n": {"type": "integer", "minimum": "0"}}}, "'0' is not of type 'number'"),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"q": {"type": 1}}},
            "not a valid schema under $schema='http://json-schema.org/draft-07/schema#'",
        ),
    ],
)
def test_add_tool_refuses_a_schema_a_client_would_reject_naming_the_fix(
    fake_mcp_server: FakeMCPServer, schema: Any, says: str
) -> None:
    with pytest.raises(ScriptError, match="add_tool") as caught:
        fake_mcp_server.add_tool("search", lambda text: text, input_schema=schema)
    assert says in str(caught.value)
    assert '{"type": "object", "properties"' in str(caught.value) or "properties" not in says
    assert "search" not in fake_mcp_server._app.catalog.tools


@pytest.mark.parametrize("argument", ["input_schema", "output_schema"])
def test_a_bad_schema_is_named_by_its_path_and_shown_whole(fake_mcp_server: FakeMCPServer, argument: str) -> None:
    long_name = "an argument whose name is long enough that an echo of the schema cut at 80 characters ends in it"
    schema = {"type": "object", "properties": {long_name: {"type": "string"}}, "required": long_name}
    with pytest.raises(ScriptError) as caught:
        fake_mcp_server.add_tool("search", lambda **kw: kw, **{argument: schema})
    assert str(caught.value) == (
        f"add_tool('search', {argument}={{...}}): not a valid schema under JSON Schema 2020-12 (MCP's default "
        f"dialect): '{long_name}' is not of type 'array'\n"
        f"  {argument}['required'] = \"{long_name}\"\n"
        "  Hint: 'required' is a list of distinct argument names, e.g. ['text']"
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"q": {"type": ["string", "null"], "minLength": 1}}, "required": ["q"]},
        {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
        {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False},
        # A dialect the validator does not know is served as written: not knowing it is no reason to refuse it.
        {"$schema": "https://example.com/our-dialect", "type": "object", "properties": {"q": {"kind": "text"}}},
    ],
)
def test_add_tool_accepts_a_valid_schema_as_written(fake_mcp_server: FakeMCPServer, schema: dict[str, Any]) -> None:
    tool = fake_mcp_server.add_tool("search", lambda **kw: kw, input_schema=schema, output_schema=schema)
    assert tool.input_schema == schema
    assert tool.output_schema == schema


@pytest.mark.asyncio
async def test_a_valid_object_schema_is_served_as_given(fake_mcp_server: FakeMCPServer) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    fake_mcp_server.add_tool("shout", lambda text: text.upper(), input_schema=schema, output_schema=None)
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        result = await session.call_tool("shout", {"text": "hi"})
    assert as_json(listed["shout"])["inputSchema"] == schema
    assert result.content[0].text == "HI"  # type: ignore[union-attr]


def test_a_bad_schema_fails_at_the_tests_own_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_bad_schema(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: query, input_schema="string")
        """
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>*fake_mcp_server.add_tool("search", lambda query: query, input_schema="string")',
            "E*pytest_fake_mcp.ScriptError: add_tool('search', input_schema='string'): a tool's input_schema is a "
            "JSON Schema object*",
        ]
    )
    assert "_tools.py" not in result.stdout.str()


@pytest.mark.asyncio
async def test_a_call_refused_by_input_validation_is_not_a_run(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.add_tool("add", lambda a, b: str(a + b))
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        refused = await session.call_tool("add", {"a": 1})  # b missing: the SDK's "Input validation error"
        good = await session.call_tool("add", {"a": 1, "b": 2})
    assert as_json(refused)["isError"] is True
    assert as_json(good)["content"] == [{"type": "text", "text": "3"}]
    assert fake_mcp_server.figures.tool_executions == {"add": 1}
    fake_mcp_server.assert_tool_ran("add", times=1)
    with pytest.raises(AssertionError, match=r"assert_tool_ran\('add', times=2\): the handler ran 1 time"):
        fake_mcp_server.assert_tool_ran("add", times=2)


@pytest.mark.asyncio
async def test_a_tool_run_is_recorded_once_and_read_as_the_same_record(fake_mcp_server: FakeMCPServer) -> None:
    """The ledger keeps a run as its fields and makes the record when first read; later reads return it."""
    async with asyncio.timeout(10), sdk_session(fake_mcp_server.url) as session:
        await session.call_tool("echo", {"text": "a"})
        await session.call_tool("echo", {"text": "b"})
    first, again = fake_mcp_server.executions("echo"), fake_mcp_server.executions("echo")
    assert [run.arguments for run in first] == [{"text": "a"}, {"text": "b"}]
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert first[0].session_id == fake_mcp_server.sessions[0].id
