"""The framework recipes' shared preamble (tests/frameworks/test_<name>.py, docs/frameworks/<name>.md).

A recipe runs in a venv of its own (``pip install -e '.[test]' -r tests/frameworks/requirements-<name>.txt``).
Elsewhere its module skips, saying what to install; CI sets ``FAKE_MCP_REQUIRE_FRAMEWORKS=1``, which turns that
skip into the ImportError. What a recipe measured is tests/frameworks/observed/<name>.toml (a row of
docs/verification.md's frameworks table), which its tests hold to the installed release::

    adk = require_framework("google.adk.tools.mcp_tool", "google_adk")  # at module level, before its imports


    def test_the_observed_facts_are_of_the_installed_release() -> None:
        assert_measured("google_adk", "google-adk")
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest

__all__ = ["assert_measured", "install_hint", "observed", "require_framework"]

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
"""tests/frameworks: the recipes, their pins (requirements-<name>.txt) and their measurements (observed/)."""


def install_hint(name: str) -> str:
    """The command that installs recipe ``name``'s venv, from the repository's root."""
    return f"pip install -e '.[test]' -r tests/frameworks/requirements-{name}.txt"


def observed(name: str) -> dict[str, Any]:
    """What recipe ``name``'s tests measured: tests/frameworks/observed/<name>.toml, read anew on each call."""
    with (FRAMEWORKS / "observed" / f"{name}.toml").open("rb") as file:
        return tomllib.load(file)


def require_framework(module_name: str, name: str) -> ModuleType:
    """The framework module ``module_name`` of recipe ``name``, or a skip of the calling test module.

    Call it at module level, before the framework's own imports. Not installed, the module skips, naming the
    distribution (observed/<name>.toml's ``package``) and :func:`install_hint`; under
    ``FAKE_MCP_REQUIRE_FRAMEWORKS=1`` the ImportError is raised instead, so a venv without its framework fails.
    """
    __tracebackhide__ = True  # the skip's location is the recipe's line that called this
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        if os.environ.get("FAKE_MCP_REQUIRE_FRAMEWORKS") == "1":
            raise
        pytest.skip(
            f"{observed(name)['package']} is not installed ({exc}); run: {install_hint(name)}",
            allow_module_level=True,
        )


def assert_measured(
    name: str, distribution: str, *, mcp_line: Literal["major.minor", "major"] = "major.minor"
) -> dict[str, Any]:
    """Assert that observed/<name>.toml names the installed release of ``distribution`` and the installed mcp's line.

    The framework is pinned to a release (``==``), the SDK to a line: ``mcp_line`` is how much of mcp's version
    the pin fixes, ``"major.minor"`` for ``mcp>=2.3,<2.4`` or ``"major"`` for ``mcp<2``. Returns the observed facts,
    for a recipe's own further checks.
    """
    facts = observed(name)
    assert facts["package"] == distribution, (
        f"tests/frameworks/observed/{name}.toml measured {facts['package']}, not {distribution}"
    )
    installed = importlib.metadata.version(distribution)
    assert installed == facts["version"], (
        f"the installed {distribution} {installed} is not the one measured ({facts['version']}): install "
        f"tests/frameworks/requirements-{name}.txt, or measure the new release and update the pin and "
        f"tests/frameworks/observed/{name}.toml"
    )
    parts = 1 if mcp_line == "major" else 2
    installed_mcp = importlib.metadata.version("mcp")
    assert installed_mcp.split(".")[:parts] == facts["mcp"].split(".")[:parts], (
        f"the installed mcp {installed_mcp} is not on the {mcp_line} line measured ({facts['mcp']}): install "
        f"tests/frameworks/requirements-{name}.txt, or measure on this line and update the pin and "
        f"tests/frameworks/observed/{name}.toml"
    )
    return facts
