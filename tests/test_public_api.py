"""The public API is pinned (style.md rule 2): it grows only on purpose, and every export says ``pytest_fake_mcp``."""

from __future__ import annotations

import types
from typing import Any

import pytest

import pytest_fake_mcp

PUBLIC_NAMES = [
    "Context",
    "EndReason",
    "Exchange",
    "FakeMCPError",
    "FakeMCPOptions",
    "FakeMCPServer",
    "FakeMCPServerFactory",
    "Flavour",
    "Gate",
    "HTTPClientCounter",
    "HTTPClientRecord",
    "HeadlessOAuth",
    "JSONRPCError",
    "Journal",
    "JournalEvent",
    "LifecycleError",
    "Outcome",
    "ScriptError",
    "ScriptedFault",
    "ServerFigures",
    "ServerSideError",
    "SessionLossShape",
    "SessionRecord",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "VerificationError",
]
"""Add a new export here, in sorted order."""


def test_all_is_the_pinned_sorted_list() -> None:
    assert sorted(PUBLIC_NAMES) == PUBLIC_NAMES
    assert pytest_fake_mcp.__all__ == PUBLIC_NAMES
    assert sorted(pytest_fake_mcp._EXPORTS) == PUBLIC_NAMES


def test_the_package_root_exports_nothing_else() -> None:
    for name in PUBLIC_NAMES:  # exports load on first use
        getattr(pytest_fake_mcp, name)
    exported = {
        name
        for name, value in vars(pytest_fake_mcp).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules, public (contract, races) or not
        and name not in ("annotations", "TYPE_CHECKING", "Any")  # the module's own typing imports
    }
    assert exported == set(PUBLIC_NAMES)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'FakeMcpServer'"):
        pytest_fake_mcp.FakeMcpServer  # noqa: B018


def test_loading_the_plugin_imports_no_server_or_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pytest_fake_mcp.plugin; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx', 'httpx2', 'mcp', 'hypothesis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_export_names_the_package_as_its_module(name: str) -> None:
    assert getattr(pytest_fake_mcp, name).__module__ == "pytest_fake_mcp"


def test_version_is_the_installed_distributions() -> None:
    import importlib.metadata

    assert pytest_fake_mcp.__version__ == importlib.metadata.version("pytest-fake-mcp")


def test_errors_met_through_a_private_module_print_their_public_path() -> None:
    """The plugin resolves every public name when its server fixture starts, so a report never says ``_errors``."""
    import subprocess
    import sys

    code = (
        "from pytest_fake_mcp._wire._errors import VerificationError; import pytest_fake_mcp; "
        "before = VerificationError.__module__; pytest_fake_mcp._resolve_public_names(); "
        "print(before, VerificationError.__module__, repr(VerificationError('x')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split(" ", 2) == ["pytest_fake_mcp._wire._errors", "pytest_fake_mcp", "VerificationError('x')\n"]


# --- the public faces beside the root ------------------------------------------------------------

CLIENT_NAMES = ["ReusingSessionClient", "SessionCache", "SessionClosedError", "SessionLostError", "SessionOpenError"]
"""``pytest_fake_mcp.client``: the reference client and cache, apart from the fake."""

CONTRACT_NAMES = [
    "IS_ERROR_TOOL",
    "LOSS_404_SHAPES",
    "RPC_ERROR_TOOL",
    "STRICT_LOSS_SHAPES",
    "ClientOpener",
    "ContractCaller",
    "ContractClient",
    "SessionReuseSuite",
]
RACES_NAMES = [
    "Deadlock",
    "Livelock",
    "NondeterminismError",
    "Race",
    "RaceFailure",
    "RaceSuite",
    "Schedule",
    "ServerChoices",
    "SessionCacheUnderTest",
    "explore",
    "explore_session_cache",
    "race_settings",
    "race_test",
    "schedules",
]


@pytest.mark.parametrize(
    ("module", "names"),
    [("client", CLIENT_NAMES), ("contract", CONTRACT_NAMES), ("races", RACES_NAMES)],
)
def test_each_public_submodule_exports_its_pinned_sorted_list(module: str, names: list[str]) -> None:
    import importlib

    face = importlib.import_module(f"pytest_fake_mcp.{module}")
    assert sorted(names, key=lambda n: (not n.isupper(), n)) == names  # constants first, as ruff sorts
    assert face.__all__ == names
    for name in names:
        getattr(face, name)


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_the_client_names_print_as_the_client_module(name: str) -> None:
    import pytest_fake_mcp.client

    assert getattr(pytest_fake_mcp.client, name).__module__ == "pytest_fake_mcp.client"


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_the_client_names_still_import_from_the_root_with_a_warning(name: str) -> None:
    import pytest_fake_mcp.client

    with pytest.warns(
        DeprecationWarning, match=rf"pytest_fake_mcp\.{name} moved: import it from pytest_fake_mcp\.client"
    ):
        old = getattr(pytest_fake_mcp, name)
    assert old is getattr(pytest_fake_mcp.client, name)
    assert name not in pytest_fake_mcp.__all__
    assert name not in dir(pytest_fake_mcp)


def test_the_moved_names_warn_at_the_importing_line() -> None:
    with pytest.warns(DeprecationWarning, match="moved") as caught:
        from pytest_fake_mcp import ReusingSessionClient  # noqa: F401
    assert caught[0].filename == __file__


def test_the_plugin_resolving_public_names_warns_of_nothing() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pytest_fake_mcp._resolve_public_names()


@pytest.mark.asyncio
async def test_the_client_module_example_runs_as_written(fake_mcp_server: pytest_fake_mcp.FakeMCPServer) -> None:
    import textwrap

    import pytest_fake_mcp.client

    doc = pytest_fake_mcp.client.__doc__ or ""
    source = textwrap.dedent(doc.split("Example::\n", 1)[1].split("\nIn 0.1", 1)[0])
    assert source.strip().startswith("from pytest_fake_mcp.client import ReusingSessionClient")
    namespace: dict[str, Any] = {}
    exec(compile(source, "pytest_fake_mcp.client example", "exec"), namespace)
    await namespace["test_one_session"](fake_mcp_server)


# --- the members of the objects a test holds ---------------------------------------------------------

SERVER_MEMBERS = [
    "add_prompt",
    "add_resource",
    "add_resource_template",
    "add_tool",
    "advance_idle_clock",
    "assert_all_sessions_closed",
    "assert_concurrent",
    "assert_discover_once",
    "assert_initialize_count",
    "assert_list_results_cached",
    "assert_no_refused_token_reused",
    "assert_no_removed_tool_calls",
    "assert_no_requests_after_close",
    "assert_no_reregistration",
    "assert_no_session_ids",
    "assert_no_stale_session_ids",
    "assert_relisted_after_changes",
    "assert_resumed",
    "assert_session_kept_across_auth",
    "assert_session_reused",
    "assert_sessions",
    "assert_single_flight_refresh",
    "assert_stopped_after_era_refusal",
    "assert_tool_ran",
    "cap_sessions",
    "down",
    "drop_session",
    "errors",
    "executions",
    "expire_tokens",
    "figures",
    "gate",
    "get_request",
    "get_requests",
    "issue_token",
    "journal",
    "latency",
    "live_sessions",
    "mark_client_closed",
    "on",
    "options",
    "origin",
    "remove_prompt",
    "remove_resource",
    "remove_tool",
    "restart",
    "revoke_refresh_tokens",
    "scripted_faults",
    "sessions",
    "sessions_expired",
    "strict_initialize",
    "url",
    "wait_for_get_streams",
]
"""``FakeMCPServer``'s public members; add a new one here, in sorted order."""

SERVER_DEPRECATED = ["connections", "exchanges", "initialize_count", "max_in_flight", "tool_executions"]
"""Readers that duplicate ``journal`` / ``figures``: they warn for one release, then go."""

SCRIPTED_FAULT_MEMBERS = [
    "after",
    "always",
    "barrier",
    "bogus_session_id",
    "cache_hint",
    "close_connection",
    "cut_after_events",
    "cut_stream",
    "delay",
    "delay_refresh",
    "discover_versions",
    "drop_session",
    "end_stream",
    "expire_tokens",
    "hang",
    "hold_stream",
    "insufficient_scope",
    "malformed",
    "nth",
    "once",
    "optional",
    "partial_replay",
    "refuse_initialize",
    "refuse_refresh",
    "refuse_registration",
    "refuse_replay",
    "reset_connection",
    "respond",
    "switch_era",
    "times",
    "unauthorized",
    "wait_fired",
    "wait_fired_sync",
]
"""``ScriptedFault``'s builder (counts and actions) and its waits: the runner's side of it is private."""


def test_the_server_a_test_holds_has_the_pinned_members() -> None:
    public = sorted(name for name in dir(pytest_fake_mcp.FakeMCPServer) if not name.startswith("_"))
    assert sorted(SERVER_MEMBERS) == SERVER_MEMBERS
    assert public == sorted(SERVER_MEMBERS + SERVER_DEPRECATED)


def test_a_scripted_fault_has_the_pinned_members() -> None:
    public = sorted(name for name in dir(pytest_fake_mcp.ScriptedFault) if not name.startswith("_"))
    assert public == SCRIPTED_FAULT_MEMBERS
