"""The code samples in README.md and docs/**/*.md are the how-to tests here and the framework recipes' tests
(tests/frameworks/), verbatim.

In a page, a sample is a fenced ``python`` block right after a marker line naming its source::

    <!-- snippet: tests/examples/test_howto_quickstart.py#first-test -->

The block must equal the lines between ``# --8<-- [start:first-test]`` and ``# --8<-- [end:first-test]``
in that file (dedented, blank lines at either end dropped); without ``#name``, the whole file. Every
region in a how-to file must appear in some page, so no sample is tested but never shown.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
HOWTO_FILES = [
    *sorted(Path(__file__).parent.glob("*howto*.py")),
    *sorted((ROOT / "tests" / "frameworks").glob("test_*.py")),
]

_MARKER = re.compile(r"^<!-- snippet: (?P<path>[^#\s]+)(?:#(?P<region>[\w-]+))? -->$")
_REGION = re.compile(r"^\s*# --8<-- \[(?P<edge>start|end):(?P<name>[\w-]+)\]$")


@dataclass(frozen=True)
class Sample:
    page: Path
    line: int
    path: str
    region: str | None
    code: str | None  # None: no fenced python block follows the marker

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line} {self.path}{'#' + self.region if self.region else ''}"


def samples(page: Path) -> list[Sample]:
    """Every marked sample of a page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        marker = _MARKER.match(line.strip())
        if marker is None:
            continue
        rest = iter(enumerate(lines[number + 1 :], number + 1))
        code = None
        for _, following in rest:
            if not following.strip():
                continue
            if following.strip() == "```python":
                body = []
                for _, inner in rest:
                    if inner.strip() == "```":
                        break
                    body.append(inner)
                code = _trim("\n".join(body))
            break
        found.append(Sample(page, number + 1, marker["path"], marker["region"], code))
    return found


def regions(path: Path) -> dict[str, str]:
    """The named regions of a source file, dedented and trimmed."""
    result: dict[str, str] = {}
    open_regions: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        edge = _REGION.match(line)
        if edge is None:
            for body in open_regions.values():
                body.append(line)
        elif edge["edge"] == "start":
            open_regions[edge["name"]] = []
        else:
            result[edge["name"]] = _trim(textwrap.dedent("\n".join(open_regions.pop(edge["name"]))))
    assert not open_regions, f"{path}: regions never ended: {sorted(open_regions)}"
    return result


def _trim(text: str) -> str:
    return text.strip("\n").rstrip()


def source_of(sample: Sample) -> str:
    path = ROOT / sample.path
    assert path.is_file(), f"{sample}: no file {sample.path}"
    if sample.region is None:
        return _trim(path.read_text(encoding="utf-8"))
    found = regions(path)
    assert sample.region in found, f"{sample}: no region {sample.region!r} in {sample.path}; it has {sorted(found)}"
    return found[sample.region]


ALL_SAMPLES = [sample for page in PAGES for sample in samples(page)]


@pytest.mark.parametrize("sample", ALL_SAMPLES, ids=str)
def test_sample_is_the_tested_code(sample: Sample) -> None:
    assert sample.code is not None, f"{sample}: the marker must be followed by a ```python block"
    expected = source_of(sample)
    if sample.code != expected:
        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(),
                sample.code.splitlines(),
                sample.path,
                str(sample.page.relative_to(ROOT)),
                lineterm="",
            )
        )
        pytest.fail(f"{sample}: the page's sample differs from the tested code; copy it from the file:\n{diff}")


def test_every_howto_region_is_shown_in_the_docs() -> None:
    shown = {(sample.path, sample.region) for sample in ALL_SAMPLES}
    missing = [
        f"{path.relative_to(ROOT)}#{name}"
        for path in HOWTO_FILES
        for name in regions(path)
        if (str(path.relative_to(ROOT)), name) not in shown
    ]
    assert not missing, f"how-to regions no page shows (add a <!-- snippet: ... --> marker and block): {missing}"


def test_the_pages_have_samples() -> None:
    assert len(ALL_SAMPLES) >= len(HOWTO_FILES), [str(s) for s in ALL_SAMPLES]
