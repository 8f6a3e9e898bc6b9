"""SearchBudget: one race search's bound on shrinking, its stored replays, and its telling log records.

Every entry point (`explore`, `race_test`, `RaceSuite`, `explore_session_cache`) asks it before each example
(`SearchBudget.check`) and tells it when one fails (`SearchBudget.failed`):

* Shrinking is bounded in wall-clock time: ``shrink_seconds`` after the first failure, the next example stops
  Hypothesis (`ShrinkingTimeUp`); the entry point then replays the smallest failing example seen so far as
  ``reproduce=`` would (`SearchBudget.best`), and that run's report says shrinking was cut short and how to give
  it longer. (Rejecting the examples past the bound instead would trip Hypothesis's flaky-generation check.)
* A failure replayed from the Hypothesis database (one of the stored examples the search fetched, which
  Hypothesis runs first) is reported as it was stored, not shrunk again, unless ``shrink_again`` asks for it: a
  rerun reports the same schedule and trace digest.
* The reported run's WARNING+ log records that no passing example of the search logged (`LogWatch`).

The defaults come from pytest's ``--race-shrink-seconds`` and ``--race-shrink-again`` (the plugin sets them with
`configure`); arguments win over them. This module imports neither Hypothesis nor pytest.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from .._compat import example_blob, example_choices
from ._logs import LogWatch

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_SHRINK_SECONDS", "SearchBudget", "ShrinkingTimeUp", "configure"]

DEFAULT_SHRINK_SECONDS: Final = 20.0
"""How long a search may shrink once it has found a failure, by default (wall-clock seconds)."""

_defaults: dict[str, float | bool] = {"shrink_seconds": DEFAULT_SHRINK_SECONDS, "shrink_again": False}


def configure(*, shrink_seconds: float | None = None, shrink_again: bool | None = None) -> Callable[[], None]:
    """The defaults of every search in this process (pytest's ``--race-shrink-seconds``, ``--race-shrink-again``).

    Returns what puts the previous defaults back: a pytest run inside this process (pytester) sets its own and,
    when it ends, leaves the outer run's as they were.
    """
    previous = dict(_defaults)
    if shrink_seconds is not None:
        if shrink_seconds < 0:
            raise ValueError(f"shrink_seconds={shrink_seconds!r} must be >= 0")
        _defaults["shrink_seconds"] = float(shrink_seconds)
    if shrink_again is not None:
        _defaults["shrink_again"] = bool(shrink_again)
    return lambda: _defaults.update(previous)


class ShrinkingTimeUp(KeyboardInterrupt):
    """Stops Hypothesis's search at once, recording nothing (it re-raises a ``KeyboardInterrupt`` untouched);
    the entry point catches it and replays `SearchBudget.best`."""


class SearchBudget:
    """One search's shrinking bound, replay state and log watch (see the module docstring)."""

    def __init__(self, *, shrink_seconds: float | None = None, shrink_again: bool | None = None) -> None:
        if shrink_seconds is not None and shrink_seconds < 0:
            raise ValueError(f"shrink_seconds={shrink_seconds!r} must be >= 0")
        self.shrink_seconds = float(_defaults["shrink_seconds"] if shrink_seconds is None else shrink_seconds)
        self.shrink_again = bool(_defaults["shrink_again"] if shrink_again is None else shrink_again)
        self.stored = 0
        """How many examples the database held for this search (fetched, and run first)."""
        self.examples = 0
        """Examples run so far, the reported one excluded."""
        self.first_failure: float | None = None
        self.failed_at: int | None = None
        """The example (1-based) that failed first."""
        self.replayed = False
        """The first failure was a stored example replayed from the database."""
        self.cut_short = False
        """Hypothesis was stopped at the bound; the smallest failing example so far is replayed."""
        self.best: tuple[str, bytes] | None = None
        """``reproduce=``'s ``(version, blob)`` of the smallest failing example so far."""
        self._best_order: tuple[Any, ...] | None = None
        self.logs = LogWatch()
        """Install it (``with budget.logs:``) for the search: the reported run's telling log records."""
        self.data: Any = None
        """``st.data()``'s object of the example running (the entry point sets it)."""
        self._failing: Any = None
        self._saved_best = False
        self._running = False
        self._running_failed = False

    def release(self) -> None:
        """The search is over: let go of its last examples (their data reach the run's loop, fakes and cache, and
        Hypothesis keeps a state machine's class, which reaches this budget, in a cache of its own)."""
        self.data = None
        self._failing = None

    def fetched(self, count: int) -> None:
        """The search fetched ``count`` stored examples of its own (its database's primary key)."""
        self.stored += count

    def hides_stored(self) -> bool:
        """Should the database offer the stored failures as mere candidates, so Hypothesis shrinks them again?"""
        return self.shrink_again

    def check(self, reporting: bool) -> None:
        """A new example begins. Raises `ShrinkingTimeUp` (never for the reported example) once a stored replay
        has failed (unless ``shrink_again``), or ``shrink_seconds`` after the first failure."""
        self._take_best()
        self.logs.begin(previous_passed=self._running and not self._running_failed)
        self._running, self._running_failed = True, False
        if reporting:
            return
        if self.first_failure is not None and self.examples >= self.stored and self.best is not None:
            # every stored example has run
            if self.replayed and not self.shrink_again:
                raise ShrinkingTimeUp
            if time.monotonic() - self.first_failure > self.shrink_seconds:
                self.cut_short = True
                raise ShrinkingTimeUp
        self.examples += 1

    def failed(self) -> None:
        """The example running failed."""
        self._running_failed = True
        self._failing = self.data
        if self.first_failure is None:
            self.first_failure = time.monotonic()
            self.failed_at = self.examples
            self.replayed = 0 < self.examples <= self.stored

    def saved(self) -> None:
        """Hypothesis stored an example as the search's failure (its database's primary key): the one that just
        failed, its new smallest. A rerun replays that one, so it is the one reported when the bound cuts in."""
        if self._failing is not None and (blob := example_blob(self._failing)) is not None:
            self.best = blob
            self._saved_best = True

    def _take_best(self) -> None:
        """The example that just failed (now finished): the best so far if it is the smallest. With a database,
        the one Hypothesis stored (`saved`); without, by Hypothesis's order as near as it is known here (fewer
        choices, then smaller ones)."""
        data, self._failing = self._failing, None
        if data is None or self._saved_best:
            return
        choices = example_choices(data)
        if choices is None:
            return
        order = (len(choices), tuple(_choice_order(c) for c in choices))
        if self._best_order is None or order <= self._best_order:
            self._best_order = order
            self.best = example_blob(data)

    def remarks(self, setting: Callable[[str, str], str]) -> list[str]:
        """What the report says about how this example was found; ``setting(name, value)`` words an option
        (``shrink_seconds=60 on explore()``, a `RaceSuite`'s class attribute)."""
        if self.replayed and not self.shrink_again:
            return [
                "Replayed from the Hypothesis database as it was stored, not shrunk again ("
                f"{setting('shrink_again', 'True')}, or pytest --race-shrink-again, shrinks it further)."
            ]
        if self.cut_short:
            return [
                f"Shrinking was cut short {self.shrink_seconds:g} s after the first failure (found at example "
                f"{self.failed_at}; {self.examples} examples run): this is the smallest failing example found by "
                f"then. To shrink longer, set {setting('shrink_seconds', '60')} or run pytest "
                "--race-shrink-seconds=60. A rerun replays it from the database as it is, unless asked to shrink "
                f"it again ({setting('shrink_again', 'True')}, or pytest --race-shrink-again)."
            ]
        return []


def _choice_order(choice: object) -> tuple[int, Any, Any]:
    """A choice's place in Hypothesis's shrinking order, near enough to compare two failing examples."""
    if isinstance(choice, bool | int):
        return (0, abs(int(choice)), int(choice) < 0)
    if isinstance(choice, float):
        return (1, abs(choice), choice < 0)
    if isinstance(choice, str | bytes):
        return (2, len(choice), str(choice))
    return (3, 0, repr(choice))
