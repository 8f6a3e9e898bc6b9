"""The tree is the architecture (docs/architecture.md): a package per layer, its modules listed, no private name
crossing a package, and the map naming every package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_fake_mcp

PACKAGE = Path(pytest_fake_mcp.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
PACKAGES = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
ROOT = PACKAGE.parent.parent


def _unit(path: Path, root: Path) -> str:
    """The package a module belongs to (the root's own modules: the root package)."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else "."


def _target(path: Path, node: ast.ImportFrom) -> Path:
    base = path.parent
    for _ in range(node.level - 1):
        base = base.parent
    return base.joinpath(*(node.module or "").split(".")) if node.module else base


def _private_crossings(path: Path, root: Path = PACKAGE) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        target = _target(path, node)
        module = target.with_suffix(".py") if not target.is_dir() else target / "__init__.py"
        if not module.exists() or _unit(module, root) == _unit(path, root):
            continue
        for alias in node.names:
            is_module = (target / f"{alias.name}.py").exists() or (target / alias.name).is_dir()
            if alias.name.startswith("_") and not is_module:
                found.append(f"line {node.lineno}: {alias.name} from {module.relative_to(root).as_posix()}")
    return found


def test_the_scan_finds_a_private_name_crossing_a_package(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "_low").mkdir(parents=True)
    (package / "_low" / "_mod.py").write_text("_secret = 1\npublic = 2\n")
    user = package / "_high.py"
    user.write_text("from ._low._mod import _secret, public\nfrom ._low import _mod\n")
    assert _private_crossings(user, package) == ["line 1: _secret from _low/_mod.py"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_private_name_crosses_a_package(path: Path) -> None:
    """What two packages share is public within the project, in the lower one (a private module is fine)."""
    assert _private_crossings(path) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_each_module_states_its_idea_in_its_first_line(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring, f"{path.relative_to(PACKAGE)}: no docstring"
    assert docstring.splitlines()[0].strip()
    assert "TODO" not in docstring


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_each_package_lists_each_of_its_modules_in_one_line(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    listed = {line.split("``")[1] for line in docstring.splitlines() if line.startswith("- ``")}
    assert listed == {p.stem for p in package.glob("*.py") if p.stem != "__init__"}


def test_the_map_names_every_package_and_every_public_face() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for package in PACKAGES:
        assert f"`{package.name}/`" in text, package.name
    for face in ("plugin", "contract", "races", "client"):
        assert f"`{face}`" in text, face
