"""LogWatch: the WARNING+ log records of a search's reported run that no passing example of the search logged.

A client's libraries (the MCP SDK, httpx/httpx2, anyio, this package) log warnings on every run, most of them
harmless (a GET stream cut at close, a DELETE refused). The one that explains a failure ("Session termination
failed: Cannot send a request, as the client has been closed") is lost in that flood. The rule: a record of the
reported run is shown unless a passing example of the same search logged the same (logger, level, message
template); the shown ones are deduplicated with counts and capped (the report says how many it left out). A
record passing runs log too cannot be what made the difference, so the rule hides nothing that can explain the
failure; every record only failing runs log is kept.

The message template is the record's format string when it has arguments (``"DELETE of %s failed: %r"``), else
its text with the run's variable parts (hexadecimal ids, numbers) blanked, as f-strings leave them in the text.
"""

from __future__ import annotations

import logging
import re
from typing import Final

__all__ = ["LogWatch"]

SHOWN: Final = 8
"""The most distinct records a report shows."""
_VARIABLE: Final = re.compile(r"[0-9a-fA-F]{8,}|[0-9a-fA-F-]{36}|\d+")


def _template(record: logging.LogRecord) -> tuple[str, int, str]:
    text = str(record.msg) if record.args else record.getMessage()
    return (record.name, record.levelno, _VARIABLE.sub("#", text))


class LogWatch(logging.Handler):
    """Keeps the current example's WARNING+ records; learns the templates passing examples logged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.current: list[logging.LogRecord] = []
        self.harmless: set[tuple[str, int, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.current.append(record)

    def begin(self, previous_passed: bool) -> None:
        """A new example begins; the previous one (if it passed) taught which records are harmless."""
        if previous_passed:
            self.harmless.update(_template(r) for r in self.current)
        self.current = []

    def __enter__(self) -> LogWatch:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)
        self.current = []

    def lines(self) -> list[str]:
        """The report's section: the current run's records no passing example logged (empty: none)."""
        counts: dict[tuple[str, int, str], int] = {}
        first: dict[tuple[str, int, str], logging.LogRecord] = {}
        left_out = 0
        for record in self.current:
            key = _template(record)
            if key in self.harmless:
                left_out += 1
                continue
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, record)
        if not counts:
            return []
        shown = list(counts)[:SHOWN]
        heading = (
            f"Log records of the failing run (WARNING and above) that no passing example logged ({len(shown)} of "
            f"{len(counts)} distinct shown"
            + (f"; {left_out} record(s) passing examples logged too left out" if left_out else "")
            + "):"
        )
        lines = [heading]
        for key in shown:
            record = first[key]
            times = f" (×{counts[key]})" if counts[key] > 1 else ""
            lines.append(f"  {record.name} {record.levelname}: {_one_line(record.getMessage())}{times}")
        return lines


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
