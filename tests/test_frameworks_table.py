"""docs/verification.md's frameworks table is what tests/frameworks/table.py writes from the recipes' measurements
(tests/frameworks/observed/*.toml), and every recipe has its files (issue 22)."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ROOT / "tests" / "frameworks"
KEYS = {"framework", "package", "version", "mcp", "client", "reuse", "on_loss", "next_call", "close", "contract"}


def _table_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("frameworks_table", FRAMEWORKS / "table.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_verification_page_shows_the_table_the_measurements_write() -> None:
    table = _table_module()
    page = (ROOT / "docs" / "verification.md").read_text(encoding="utf-8")
    assert table.current(page) == table.table(), (
        "docs/verification.md's frameworks table is stale: run `python tests/frameworks/table.py`"
    )


def test_a_stale_table_is_seen() -> None:
    table = _table_module()
    page = (ROOT / "docs" / "verification.md").read_text(encoding="utf-8")
    stale = page.replace("| [Pydantic AI]", "| [Pydantic AI (old)]")
    assert stale != page
    assert table.current(stale) != table.table()


def test_every_recipe_has_its_venv_pins_its_page_and_its_measured_facts() -> None:
    names = {path.stem.removeprefix("requirements-") for path in FRAMEWORKS.glob("requirements-*.txt")}
    assert names, "no framework recipes"
    for test in FRAMEWORKS.glob("test_*.py"):  # test_<name>.py, or test_<name>_<aspect>.py beside it
        stem = test.stem.removeprefix("test_")
        assert any(stem == name or stem.startswith(f"{name}_") for name in names), f"{test.name}: no recipe"
    for name in names:
        assert (FRAMEWORKS / f"test_{name}.py").is_file(), f"requirements-{name}.txt: no test_{name}.py"
        requirements = (FRAMEWORKS / f"requirements-{name}.txt").read_text(encoding="utf-8")
        with (FRAMEWORKS / "observed" / f"{name}.toml").open("rb") as file:
            observed = tomllib.load(file)
        assert set(observed) == KEYS, f"{name}.toml: {sorted(set(observed) ^ KEYS)}"
        assert f"{observed['package']}" in requirements.replace("[", " ").replace("=", " ").split(), name
        assert f"=={observed['version']}" in requirements, f"{name}: the observed version is the pinned one"
        assert (ROOT / "docs" / "frameworks" / f"{name}.md").is_file(), name
