"""mkdocs hook: render an optional public module's API only when its source is in the tree.

``docs/reference.md`` documents ``pytest_fake_mcp.races`` with a ``::: pytest_fake_mcp.races`` line; on a branch
where that module does not exist yet the line becomes a note instead of failing ``mkdocs build --strict``.
Any other missing module still fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

OPTIONAL_MODULES = frozenset({"pytest_fake_mcp.races"})
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
