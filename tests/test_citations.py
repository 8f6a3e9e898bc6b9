"""What the package prints and documents cites only what users have: pages of docs/ (and their anchors).

The team's working notes are not shipped; a hint or docstring that points at one sends the reader nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SHIPPED = sorted(
    [
        *ROOT.joinpath("src").rglob("*.py"),
        *DOCS.glob("*.md"),
        ROOT / "README.md",
        *ROOT.joinpath("examples").rglob("*.py"),
    ]
)
MARKDOWN_CITE = re.compile(r"(?<![\w/.-])(?:docs/)?([\w-]+\.md)(?:#([\w-]+))?")
TEAM_NOTES = re.compile(r"§|\bshared/|\b(?:faults|protocol|races|anchors|style|conformance|roadmap)\.md [A-Z§]")
_HEADING = re.compile(r"^#+\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$")


def anchors(page: Path) -> set[str]:
    """The anchors of a docs page: explicit ``{#id}`` ones and mkdocs' slugs of its headings."""
    found = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        match = None if in_code else _HEADING.match(line)
        if match:
            title, explicit = match.groups()
            found.add(explicit or re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower()))
    return found


def citations(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, page, anchor)`` for every ``name.md`` cited in ``path`` (links from docs pages included)."""
    cited = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in MARKDOWN_CITE.finditer(line):
            cited.append((number, match.group(1), match.group(2)))
    return cited


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_page_is_a_docs_page_and_every_anchor_exists(path: Path) -> None:
    bad = []
    for number, page, anchor in citations(path):
        if page == "README.md":
            continue
        target = DOCS / page
        if not target.exists():
            bad.append(f"{path.relative_to(ROOT)}:{number}: cites {page}, which is not a page of docs/")
        elif anchor is not None and anchor not in anchors(target):
            bad.append(f"{path.relative_to(ROOT)}:{number}: cites {page}#{anchor}, which has no such anchor")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_shipped_cites_the_teams_notes(path: Path) -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TEAM_NOTES.search(line)
    ]
    assert not hits, "cite a docs/ page, or say it in plain words:\n" + "\n".join(hits)


def test_the_check_catches_a_team_note_and_a_missing_anchor(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""see faults.md R12 and docs/failure-modes.md#nope and protocol.md §6"""\n', encoding="utf-8")
    assert TEAM_NOTES.search(sample.read_text(encoding="utf-8"))
    assert ("failure-modes.md", "nope") in [(page, anchor) for _, page, anchor in citations(sample)]
    assert "nope" not in anchors(DOCS / "failure-modes.md")
    assert "r12" in anchors(DOCS / "failure-modes.md")
