"""``python -m pytest_fake_mcp serve``: the same as the ``fake-mcp`` command."""

from __future__ import annotations

import sys

from ._cli._main import main

if __name__ == "__main__":
    sys.exit(main())
