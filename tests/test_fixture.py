"""The fixtures, the marker and the teardown checks (plugin.py), run as a user runs them: through pytester."""

from __future__ import annotations

import contextlib
import importlib

import pytest

from pytest_fake_mcp import FakeMCPOptions, ScriptError

# pytester runs in this process and forgets every module first imported during a run. httpx and httpx2
# import their cores lazily and map the cores' exceptions by class, so the cores load here, first.
importlib.import_module("httpcore")
with contextlib.suppress(ImportError):  # httpx2 exists with mcp 2.x only
    importlib.import_module("httpcore2")

INNER_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

RAW_CLIENT = """
import json
import httpx

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def call(client, url, session_id, name, arguments):
    headers = {**HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = client.post(url, json=body, headers=headers)
    data = next(line for line in response.text.splitlines() if line.startswith("data: "))
    return json.loads(data[len("data: "):])


def initialize(client, url):
    return client.post(url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run the inner tests in order; the hypothesis plugin costs a run ~2 s and plays no part here."""
    pytester.makeini(INNER_INI)
    return pytester.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest", *args)


# --- teardown checks -------------------------------------------------------------------------------------


def test_an_error_inside_the_fake_fails_the_test_at_teardown_with_the_exchanges(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        RAW_CLIENT
        + """

def test_handler_raises(fake_mcp_server):
    def index(path):
        raise RuntimeError(f"disk on fire under {path}")

    fake_mcp_server.add_tool("index", index)
    with httpx.Client(timeout=5) as client:
        session_id = initialize(client, fake_mcp_server.url)
        answer = call(client, fake_mcp_server.url, session_id, "index", {"path": "/srv"})
    assert answer["error"]["code"] == -32603
"""
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_handler_raises*",
            "E *VerificationError: The fake MCP server raised 1 error(s) while answering:",
            "*  - handler of tools/call index (exchange #2): RuntimeError: disk on fire under /srv",
            "*client ── initialize *200 sid=*",
            "*client ── tools/call index * 200 error -32603*",
            "*Hint: a handler raised; raise ToolError for an isError result or JSONRPCError for a JSON-RPC "
            "error, or set @pytest.mark.fake_mcp_server(fail_on_server_error=False).",
        ]
    )


def test_fail_on_server_error_false_lets_the_test_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        RAW_CLIENT
        + """
import pytest


@pytest.mark.fake_mcp_server(fail_on_server_error=False)
def test_handler_raises(fake_mcp_server):
    fake_mcp_server.add_tool("index", lambda: 1 / 0)
    with httpx.Client(timeout=5) as client:
        session_id = initialize(client, fake_mcp_server.url)
        assert call(client, fake_mcp_server.url, session_id, "index", {})["error"]["code"] == -32603
    assert [type(e.error) for e in fake_mcp_server.errors] == [ZeroDivisionError]
"""
    )
    run(pytester).assert_outcomes(passed=1)


def test_a_failing_test_reports_the_exchanges(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        RAW_CLIENT
        + """

def test_fails(fake_mcp_server):
    with httpx.Client(timeout=5) as client:
        initialize(client, fake_mcp_server.url)
    assert fake_mcp_server.figures.initialize_count == 2
"""
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*- fake MCP server exchanges -*", "*client ── initialize *▶ server   200 sid=*"])


# --- the fixture between tests ------------------------------------------------------------------------------


def test_fixture_resets_the_server_between_tests_and_reuses_its_listener(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        RAW_CLIENT
        + """
import pytest

seen = {}


def test_first_leaves_a_mess(fake_mcp_server, fake_mcp_server_factory):
    fake_mcp_server.add_tool("extra", lambda: "x")
    with httpx.Client(timeout=5) as client:
        session_id = initialize(client, fake_mcp_server.url)
        assert call(client, fake_mcp_server.url, session_id, "extra", {})["result"]["content"][0]["text"] == "x"
        # A GET stream still open when the test ends (no DELETE, as the TypeScript SDK client does).
        headers = {**HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
        with client.stream("GET", fake_mcp_server.url, headers=headers) as stream:
            assert stream.status_code == 200
    seen["url"] = fake_mcp_server.url
    assert fake_mcp_server_factory.started == 1


@pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)  # the call of the forgotten tool is the point
def test_second_starts_clean(fake_mcp_server, fake_mcp_server_factory):
    assert fake_mcp_server.url == seen["url"]
    assert fake_mcp_server_factory.started == 1
    assert fake_mcp_server.journal.exchanges == ()
    assert fake_mcp_server.sessions == ()
    assert fake_mcp_server.figures.tool_executions == {}
    assert fake_mcp_server.errors == []
    assert list(fake_mcp_server._app.catalog.tools) == ["echo"]
    with httpx.Client(timeout=5) as client:
        session_id = initialize(client, fake_mcp_server.url)
        answer = call(client, fake_mcp_server.url, session_id, "extra", {})
    assert answer["result"]["content"][0]["text"] == "Unknown tool: extra"
    assert [e.seq for e in fake_mcp_server.journal.exchanges] == [1, 2]


@pytest.mark.fake_mcp_server(flavour="mcp1", json_response=True, echo_tool=False)
def test_third_other_options_same_listener(fake_mcp_server, fake_mcp_server_factory):
    assert fake_mcp_server.url == seen["url"]
    assert fake_mcp_server_factory.started == 1
    assert fake_mcp_server.options.flavour == "mcp1"
    assert list(fake_mcp_server._app.catalog.tools) == []
"""
    )
    run(pytester).assert_outcomes(passed=3)


# --- options, the marker and the ini --------------------------------------------------------------------------


def test_marker_typo_fails_with_pythons_type_error_at_the_users_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest


        @pytest.mark.fake_mcp_server(json_respons=True)
        def test_typo(fake_mcp_server):
            pass


        @pytest.mark.fake_mcp_server(True)
        def test_positional(fake_mcp_server):
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_typo*",
            # Python 3.13 adds "Did you mean 'json_response'?"
            "E *TypeError: FakeMCPOptions.__init__() got an unexpected keyword argument 'json_respons'*",
            "*in @pytest.mark.fake_mcp_server at test_marker_typo_fails_*.py:4",
            "*ERROR at setup of test_positional*",
            "E *TypeError: @pytest.mark.fake_mcp_server takes keyword options only, got positional (True,) "
            "(in @pytest.mark.fake_mcp_server at *.py:9)",
        ]
    )


def test_unknown_flavour_names_the_known_ones() -> None:
    with pytest.raises(
        ScriptError, match=r"^flavour='mcp3' is not known; use flavour='mcp2' \(default\) or flavour='mcp1'$"
    ):
        FakeMCPOptions(flavour="mcp3")
    with pytest.raises(ValueError, match="flavour='mcp3'"):  # ScriptError is a ValueError
        FakeMCPOptions(flavour="mcp3")
    with pytest.raises(TypeError, match="unexpected keyword argument 'json_respons'"):
        FakeMCPOptions(json_respons=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        FakeMCPOptions("mcp1")  # type: ignore[misc]  # keyword-only


def test_options_come_from_the_ini_then_the_closest_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.fake_mcp_server(json_response=True)


        def test_ini_and_module(fake_mcp_server):
            assert fake_mcp_server.options.flavour == "mcp1"
            assert fake_mcp_server.options.json_response is True


        @pytest.mark.fake_mcp_server(flavour="mcp2", json_response=False)
        def test_function_marker_wins(fake_mcp_server):
            assert fake_mcp_server.options.flavour == "mcp2"
            assert fake_mcp_server.options.json_response is False
        """
    )
    pytester.makeini(INNER_INI + "fake_mcp_flavour = mcp1\n")
    pytester.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest").assert_outcomes(passed=2)


def test_fake_mcp_options_can_be_overridden_in_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_fake_mcp import FakeMCPOptions


        @pytest.fixture
        def fake_mcp_options():
            return FakeMCPOptions(server_name="overridden", echo_tool=False)
        """
    )
    pytester.makepyfile(
        """
        def test_uses_conftest_options(fake_mcp_server):
            assert fake_mcp_server.options.server_name == "overridden"
            assert list(fake_mcp_server._app.catalog.tools) == []
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_marker_is_registered_with_its_signature(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.fake_mcp_server(*, flavour='mcp2', json_response=False, *"])
