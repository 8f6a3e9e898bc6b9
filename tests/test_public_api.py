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


def test_the_package_root_exports_nothing_else() -> None:
    exported = {
        name
        for name, value in vars(pytest_fake_mcp).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules, public (contract, races) or not
        and name != "annotations"  # from __future__ import annotations
    }
    assert exported == set(PUBLIC_NAMES)


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_export_names_the_package_as_its_module(name: str) -> None:
    assert getattr(pytest_fake_mcp, name).__module__ == "pytest_fake_mcp"
