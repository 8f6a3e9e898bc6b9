"""The public API is pinned (style.md rule 2): it grows only on purpose, and every export says ``pytest_fake_mcp``."""

from __future__ import annotations

import types

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
    "JSONRPCError",
    "Journal",
    "JournalEvent",
    "LifecycleError",
    "Outcome",
    "ReusingSessionClient",
    "ScriptError",
    "ScriptedFault",
    "ServerFigures",
    "ServerSideError",
    "SessionCache",
    "SessionClosedError",
    "SessionLossShape",
    "SessionLostError",
    "SessionOpenError",
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
        "from pytest_fake_mcp._errors import VerificationError; import pytest_fake_mcp; "
        "before = VerificationError.__module__; pytest_fake_mcp._resolve_public_names(); "
        "print(before, VerificationError.__module__, repr(VerificationError('x')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split(" ", 2) == ["pytest_fake_mcp._errors", "pytest_fake_mcp", "VerificationError('x')\n"]
