"""pytest's log capture, set aside while a test measures what a run leaves behind.

pytest keeps every log record of a test until the test ends (an SDK's error records hold tracebacks, and with them
the frames, loops and fakes of the runs): memory and objects it frees then, not ours. Its handlers are added around
the test's call, after the fixtures, so a test sets them aside itself, around what it measures.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def no_log_capture() -> Iterator[None]:
    """Remove the root logger's handlers inside the block; put them back after it."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    for handler in handlers:
        root.removeHandler(handler)
    try:
        yield
    finally:
        for handler in handlers:
            root.addHandler(handler)
