"""The API reference shows the docstrings' reST ``Example::`` blocks as highlighted code (mkdocs_hooks.py)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "src" / "pytest_fake_mcp").rglob("*.py"))
DRAWN = {"render_diagram"}
"""Docstrings whose example is output (a drawn diagram), shown as text."""


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_example_block_becomes_a_fenced_python_block() -> None:
    text = "Forget a session. Example::\n\n    fake_mcp_server.drop_session()\n\nRaises:\n    ScriptError: if ..."
    assert hooks().literal_blocks_to_fences(text).splitlines() == [
        "Forget a session. Example:",
        "",
        "```python",
        "fake_mcp_server.drop_session()",
        "```",
        "",
        "Raises:",
        "    ScriptError: if ...",
    ]


def test_a_block_that_is_not_python_is_text_and_a_plain_colon_is_left_alone() -> None:
    convert = hooks().literal_blocks_to_fences
    assert convert("The tree::\n\n    Base\n    ├── Child\n").splitlines() == [
        "The tree:",
        "",
        "```text",
        "Base",
        "├── Child",
        "```",
    ]
    assert convert("Args:\n    url: the endpoint") == "Args:\n    url: the endpoint"
    assert (
        convert("ends in a literal:: but nothing indented follows")
        == "ends in a literal:: but nothing indented follows"
    )


def _docstrings(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    return [(getattr(n, "name", path.stem), doc) for n in nodes if (doc := ast.get_docstring(n)) and "::" in doc]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_block_in_the_docstrings_is_python(path: Path) -> None:
    convert = hooks().literal_blocks_to_fences
    not_python = [
        name
        for name, doc in _docstrings(path)
        if name not in DRAWN and re.search(r"Examples?::", doc) and "```text" in convert(doc)
    ]
    assert not not_python, f"{path.name}: an Example:: block that does not parse as Python in {not_python}"


def test_a_role_becomes_inline_code() -> None:
    convert = hooks().roles_to_code
    assert convert("see :meth:`wait_fired_sync` and :class:`Journal.get_requests`") == (
        "see `wait_fired_sync` and `Journal.get_requests`"
    )
    assert convert("a :class:`~pytest_fake_mcp.Gate` opens") == "a `Gate` opens"
