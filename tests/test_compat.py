"""`_compat`: every private name of another library is an entry, checked against what is installed, and listed
in the module's one-screen table; a changed shape fails with a message naming the library and its version.

Each entry's own changed-shape test is in ``test_compat_asyncio.py``, ``test_compat_http.py`` and
``test_compat_hypothesis.py``.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator

import pytest

from pytest_fake_mcp import _compat
from pytest_fake_mcp._compat import ENTRIES, CompatError, Entry, installed_version, require, usable


def _installed(entry: Entry) -> bool:
    return entry.library == "python" or importlib.util.find_spec(entry.library) is not None


@pytest.fixture
def fresh() -> Iterator[None]:
    _compat.forget()
    yield
    _compat.forget()


@pytest.mark.parametrize("entry", list(ENTRIES.values()), ids=list(ENTRIES))
def test_every_entry_checks_out_against_what_is_installed(entry: Entry) -> None:
    if not _installed(entry):
        pytest.skip(f"{entry.library} is not installed here (the other SDK line)")
    assert entry.check() is None, f"{entry.library} {installed_version(entry.library)}: {entry.name}"
    for field in (entry.what, entry.checked, entry.gain, entry.fallback):
        assert field.strip()


def test_the_table_in_the_docstring_lists_exactly_the_entries() -> None:
    doc = _compat.__doc__ or ""
    listed: set[str] = set()
    for line in doc.split("::", 1)[1].split("\n\n", 2)[1].splitlines()[1:]:
        listed.add(line.split()[0])
    constants = {
        name for name, value in vars(_compat).items() if isinstance(value, Entry) and re.fullmatch(r"[A-Z0-9_]+", name)
    }
    assert {value.name for value in ENTRIES.values()} == {getattr(_compat, n).name for n in constants}
    assert listed == constants


def test_a_changed_shape_names_the_library_its_version_and_the_name(fresh: None) -> None:
    entry = Entry(
        library="pytest",
        name="Item._a_private_name",
        what="an example",
        checked="8.0",
        gain="none",
        fallback="none",
        check=lambda: "Item has no _a_private_name",
    )
    assert not usable(entry)
    with pytest.raises(CompatError) as raised:
        require(entry)
    message = str(raised.value)
    assert f"Item._a_private_name of pytest {installed_version('pytest')}" in message
    assert "its shape has changed: Item has no _a_private_name" in message
    assert "Checked with pytest 8.0" in message
    assert "docs/installation.md" in message


def test_a_check_that_raises_counts_as_a_changed_shape(fresh: None) -> None:
    def check() -> str | None:
        raise AttributeError("'Connection' object has no attribute '_cstate'")

    entry = Entry(library="h11", name="x", what="w", checked="c", gain="g", fallback="none", check=check)
    with pytest.raises(CompatError, match=r"AttributeError: 'Connection' object has no attribute '_cstate'"):
        require(entry)


def test_each_check_runs_once_per_process_until_forgotten(fresh: None) -> None:
    calls: list[int] = []

    def check() -> str | None:
        calls.append(1)
        return None

    entry = Entry(library="python", name="y", what="w", checked="c", gain="g", fallback="none", check=check)
    require(entry)
    assert usable(entry)
    require(entry)
    assert len(calls) == 1
    _compat.forget()
    require(entry)
    assert len(calls) == 2
