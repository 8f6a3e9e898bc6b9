"""Write docs/verification.md's table "What popular frameworks do when the server forgets the session".

The rows are tests/frameworks/observed/*.toml: what each framework's recipe test measured, which that test holds
to the installed framework (its pinned version, its SDK line, its behaviour). Run it after re-measuring::

    python tests/frameworks/table.py

``tests/test_frameworks_table.py`` fails while the page's table differs from what this writes.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OBSERVED = ROOT / "tests" / "frameworks" / "observed"
PAGE = ROOT / "docs" / "verification.md"
START = "<!-- frameworks-table: start (written by tests/frameworks/table.py from tests/frameworks/observed/) -->"
END = "<!-- frameworks-table: end -->"
COLUMNS = (
    ("framework", "framework (recipe)"),
    ("client", "its MCP client"),
    ("reuse", "across calls"),
    ("on_loss", "the call that meets the 404"),
    ("next_call", "the next call"),
    ("close", "closing"),
    ("contract", "contract suite"),
)


def rows() -> list[dict[str, str]]:
    """Every observed file, by framework name."""
    found = []
    for path in sorted(OBSERVED.glob("*.toml")):
        with path.open("rb") as file:
            data = {key: str(value) for key, value in tomllib.load(file).items()}
        data["page"] = f"frameworks/{path.stem}.md"
        found.append(data)
    return sorted(found, key=lambda row: row["framework"].lower())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table() -> str:
    """The table, with its markers."""
    lines = [START, "", "| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows():
        cells = []
        for key, _ in COLUMNS:
            if key == "framework":
                cells.append(
                    f"[{_cell(row['framework'])}]({row['page']}) `{row['package']}=={row['version']}`, mcp {row['mcp']}"
                )
            else:
                cells.append(_cell(row[key]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", END])


def current(page: str) -> str | None:
    """The table now on ``page`` (with its markers), or None if it has none."""
    if START not in page or END not in page:
        return None
    _, _, rest = page.partition(START)
    body, _, _ = rest.partition(END)
    return START + body + END


def write() -> bool:
    """Rewrite the page's table; True if it changed."""
    page = PAGE.read_text(encoding="utf-8")
    now = current(page)
    if now is None:
        raise SystemExit(f"{PAGE}: no {START!r} ... {END!r} markers to write the table between")
    fresh = page.replace(now, table())
    if fresh == page:
        return False
    PAGE.write_text(fresh, encoding="utf-8")
    return True


if __name__ == "__main__":
    changed = write()
    print(f"{PAGE.relative_to(ROOT)}: {'table rewritten' if changed else 'table already current'}")
    sys.exit(0)
