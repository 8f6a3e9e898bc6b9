"""Schedule: which of the matching requests a scripted fault fires on (once, n times, the n-th, after n, always)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Schedule"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """Which matching requests a scripted fault fires on: skip the first ``skip``, then ``count`` (None: all)."""

    skip: int = 0
    count: int | None = 1
    nth: bool = False
    explicit: bool = False
    """The test chose the count (else a barrier may set it)."""

    def covers(self, index: int) -> bool:
        """Does the fault fire on the ``index``-th (1-based) matching request?"""
        if index <= self.skip:
            return False
        return self.count is None or index - self.skip <= self.count

    @property
    def required(self) -> int:
        """How many firings make the script done (an ``always`` fault: at least one)."""
        return 1 if self.count is None else self.count

    def __str__(self) -> str:
        if self.nth:
            return f"on the {_ordinal(self.skip + 1)} matching request"
        count = "always" if self.count is None else "once" if self.count == 1 else f"{self.count} times"
        if not self.skip:
            return count
        return f"after {self.skip} matching request{'s' if self.skip > 1 else ''}, {count}"
