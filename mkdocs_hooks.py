"""mkdocs hooks for the docs site, and the griffe extension that renders reST literal blocks as code.

``on_page_markdown``: ``docs/reference.md`` documents ``pytest_fake_mcp.races`` with a ``::: pytest_fake_mcp.races``
line; on a branch where that module does not exist yet the line becomes a note instead of failing
``mkdocs build --strict``. Any other missing module still fails the build.

``LiteralBlocks`` (a griffe extension, listed under the python handler's ``extensions`` in ``mkdocs.yml``): the
public docstrings give their examples as reST literal blocks, a paragraph ending in ``::`` and an indented block
(``Example::``), and name other objects with reST roles (``:meth:`wait_fired_sync```). That reads well in
``help()`` and in an editor, so the docstrings keep it; for the API reference the extension rewrites, in the
docstring griffe renders only, each such block to ``Example:`` and a fenced ``python`` block (``text`` when the
block is not Python, e.g. a tree drawn in characters), and each role to inline code, so the page shows
highlighted code instead of a stray ``::`` or ``:meth:``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import Any

try:
    import griffe
except ImportError:  # the hook module is also imported where only mkdocs is installed
    griffe = None  # type: ignore[assignment]

OPTIONAL_MODULES = frozenset({"pytest_fake_mcp.races"})
_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|exc|mod|data|obj|const):`(?P<short>~)?(?P<name>[^`]+)`")
_DIRECTIVE = re.compile(r"^::: (?P<module>[\w.]+)\s*$")


def _exists(root: Path, module: str) -> bool:
    base = root / "src" / Path(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    root = Path(config.config_file_path).parent
    lines: list[str] = []
    skipping = False
    for line in markdown.splitlines():
        directive = _DIRECTIVE.match(line)
        if directive is not None:
            module = directive["module"]
            skipping = module in OPTIONAL_MODULES and not _exists(root, module)
            if skipping:
                lines.append(f"!!! note\n    `{module}` is not part of this build.")
                continue
        elif skipping and (line.startswith("    ") or not line.strip()):
            continue  # the directive's indented options
        else:
            skipping = False
        lines.append(line)
    return "\n".join(lines) + "\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _language(code: str) -> str:
    try:
        compile(code, "<docstring>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return "text"
    return "python"


def roles_to_code(text: str) -> str:
    """``:meth:`Journal.get_requests``` and ``:class:`~pkg.Gate``` become inline code (``~``: the last part only)."""
    return _ROLE.sub(lambda m: f"`{m['name'].rsplit('.', 1)[-1] if m['short'] else m['name']}`", text)


def literal_blocks_to_fences(text: str) -> str:
    """Rewrite each reST literal block (a line ending in ``::``, then an indented block) as a fenced block.

    ``Example::`` becomes ``Example:``; a line that is only ``::`` is dropped. Text outside the blocks is kept.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if not stripped.endswith("::"):
            out.append(line)
            i += 1
            continue
        base = _indent(line)
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j == len(lines) or _indent(lines[j]) <= base:
            out.append(line)  # no indented block follows: not a literal block
            i += 1
            continue
        end = j
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
            end += 1
        while end > j and not lines[end - 1].strip():
            end -= 1
        code = textwrap.dedent("\n".join(lines[j:end]))
        lead = stripped[:-1] if stripped.strip() != "::" else ""
        pad = " " * base
        if lead.strip():
            out.extend([lead, ""])
        out.extend([f"{pad}```{_language(code)}", *(pad + c if c else "" for c in code.splitlines()), f"{pad}```"])
        i = end
    return "\n".join(out)


if griffe is not None:

    class LiteralBlocks(griffe.Extension):
        """Render the reST ``Example::`` blocks of docstrings as fenced code in the API reference."""

        def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
            docstring = obj.docstring
            if docstring is not None and ":" in docstring.value:
                docstring.value = roles_to_code(literal_blocks_to_fences(docstring.value))
