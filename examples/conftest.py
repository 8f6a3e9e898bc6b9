"""Puts ``examples/`` on ``sys.path`` so the example tests can ``import clients``."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = str(Path(__file__).resolve().parent)
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
