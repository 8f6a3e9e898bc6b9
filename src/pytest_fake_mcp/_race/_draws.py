"""ExampleDraws: the race engine's draws from a Hypothesis example, straight from its choices where it can.

The schedule, the server-side choices and the points a scenario explores all draw from the one example
through it, so an example replays and shrinks as a whole.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final, TypeVar

from hypothesis import strategies as st

from .._compat import choice_draws, reporting_example

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ExampleDraws", "is_reporting"]

T = TypeVar("T")


def is_reporting() -> bool:
    """Is Hypothesis reporting the current example (its final replay, or verbose output)?

    Describing a run (the schedule in words, where each out-of-order step stood, each draw as a note)
    costs as much as a good part of the run: a search does it only for the example it reports.
    """
    return reporting_example()


class ExampleDraws:
    """Draws from the example: straight from its choice sequence where Hypothesis allows, else with strategies.

    A strategy draw opens spans around its choices, and ``data.draw`` also checks that the strategy leaves
    the global random alone and notes the value: three to four times the cost of the choice itself, for the
    schedule's ten-odd numbers and each request's hold. So the engine's own draws take integers and booleans
    from the choice sequence directly (``ConjectureData.draw_integer``/``draw_boolean``); only a reported
    example (its final replay, or verbose output) notes each value, as ``data.draw`` would
    (``Draw 2 (hold request 1): 0``). The choices are the same either way, so an example replays and shrinks
    alike. A Hypothesis whose choice data lacks those methods gets strategies instead (``direct`` is False).
    """

    def __init__(self, data: Any, reporting: bool) -> None:
        self.data = data
        self.reporting = reporting
        draws = choice_draws(data)
        self.direct = draws is not None
        self._integer: Callable[[int, int], int] | None = None
        self._boolean: Callable[[], bool] | None = None
        if draws is not None:
            self._integer, self._boolean = draws

    def integer(self, low: int, high: int, label: str | None = None) -> int:
        """An integer in ``low..high``, shrinking towards ``low``; noted under ``label`` if one is given."""
        if not self.direct:
            return self.data.draw(_integers(low, high), label=label)  # type: ignore[no-any-return]
        value: int = self._integer(low, high)  # type: ignore[misc]
        if label is not None and self.reporting:
            self.note(value, label)
        return value

    def boolean(self, label: str) -> bool:
        """A boolean, shrinking towards False, noted under ``label``."""
        if not self.direct:
            return self.data.draw(_BOOLEANS, label=label)  # type: ignore[no-any-return]
        value: bool = self._boolean()  # type: ignore[misc]
        if self.reporting:
            self.note(value, label)
        return value

    def note(self, value: object, label: str) -> None:
        """In a reported example, note ``value`` as ``data.draw`` notes a draw (``Draw 3 (label): value``)."""
        if self.reporting:
            self.data.draw(st.just(value), label=label)  # no choice: the note alone, numbered with the others

    def draw(self, strategy: st.SearchStrategy[T], label: str) -> T:
        """``data.draw(strategy, label)``: a user's strategy, or the schedule's without direct draws."""
        return self.data.draw(strategy, label=label)  # type: ignore[no-any-return]


# The fallback's strategies, built once each: building a strategy costs about as much as drawing from it.
_BOOLEANS: Final = st.booleans()


@functools.cache
def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)
