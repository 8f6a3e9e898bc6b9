"""The quickstart says what a test inside this checkout inherits, and how to test sessions with a modern client.

docs/quickstart.md lists the project's pytest configuration (``[tool.pytest.ini_options]`` in pyproject.toml),
which every test written inside the checkout runs under; this keeps the list equal to the file.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
CONFIG: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
    "ini_options"
]


def page() -> str:
    return QUICKSTART.read_text(encoding="utf-8")


@pytest.mark.parametrize("key", sorted(k for k in CONFIG if k != "filterwarnings"))
def test_the_quickstart_shows_each_setting_with_its_value(key: str) -> None:
    shown = f"`{key} = {json.dumps(CONFIG[key])}`"
    assert shown in page(), f"docs/quickstart.md does not show {shown} (pyproject.toml's [tool.pytest.ini_options])"


def test_the_quickstart_names_each_warning_the_configuration_makes_an_error() -> None:
    entries = CONFIG["filterwarnings"]
    assert isinstance(entries, list)
    assert all(entry.startswith("error::") for entry in entries), f"the page says 'into errors': {entries}"
    categories = [entry.removeprefix("error::") for entry in entries]
    missing = [category for category in categories if f"`{category}`" not in page()]
    assert not missing, f"docs/quickstart.md does not name these filterwarnings errors: {missing}"


def test_the_quickstart_says_how_to_test_sessions_with_a_client_of_the_modern_era() -> None:
    text = page()
    assert '@pytest.mark.fake_mcp_server(era="handshake")' in text
    assert re.search(r"\]\(eras\.md#choosing-what-the-fake-serves\)", text)
    assert "## Choosing what the fake serves" in (ROOT / "docs" / "eras.md").read_text(encoding="utf-8")
