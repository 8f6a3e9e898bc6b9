"""Schedule: the PCT-style encoding of a run's interleaving, its Hypothesis strategy, and its draw from an example."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from hypothesis import strategies as st

from ._choosers import PriorityChooser

if TYPE_CHECKING:
    from ._draws import ExampleDraws

__all__ = ["Schedule", "draw_schedule", "schedules"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A PCT-style schedule: a priority per task (by creation number) and decisions that demote the runner.

    ``Schedule()`` is FIFO, stock asyncio's order; Hypothesis shrinks towards it.
    """

    priorities: tuple[int, ...] = ()
    change_points: tuple[int, ...] = ()

    def chooser(self) -> PriorityChooser:
        return PriorityChooser(self.priorities, self.change_points)

    def describe(self, names: dict[int, str]) -> str:
        """The schedule in words, naming tasks as the run named them."""
        parts = []
        raised = [(seq, p) for seq, p in enumerate(self.priorities) if p > 0]
        if raised:
            ranks = ", ".join(f"{names.get(seq, f'task #{seq}')} = {p}" for seq, p in raised)
            parts.append(f"priorities {ranks} (the highest runnable task runs first; others 0)")
        if self.change_points:
            points = ", ".join(str(c) for c in self.change_points)
            parts.append(f"at scheduling decision(s) {points} the task about to run was set aside")
        return "; ".join(parts) if parts else "FIFO (stock asyncio order)"

    def __str__(self) -> str:
        return f"Schedule(priorities={list(self.priorities)}, change_points={list(self.change_points)})"


_MAX_TASKS: Final = 8
_MAX_PRIORITY: Final = 3
_MAX_CHANGES: Final = 2
_HORIZON: Final = 300


def schedules(
    *,
    max_tasks: int = _MAX_TASKS,
    max_priority: int = _MAX_PRIORITY,
    max_changes: int = _MAX_CHANGES,
    horizon: int = _HORIZON,
) -> st.SearchStrategy[Schedule]:
    """Hypothesis strategy for `Schedule`: shrinks towards FIFO, then to the fewest non-zero numbers.

    Race tests draw their default schedule straight from the example's choices, with these bounds and the
    same shrinking (`explore`'s ``schedule_strategy`` takes this strategy, or any other, instead).

    Example::

        @given(schedules())
        def test_schedule(schedule): ...
    """
    return st.builds(
        Schedule,
        priorities=st.lists(st.integers(0, max_priority), max_size=max_tasks).map(tuple),
        change_points=st.lists(st.integers(0, horizon - 1), max_size=max_changes, unique=True).map(
            lambda xs: tuple(sorted(xs))
        ),
    )


def draw_schedule(choices: ExampleDraws, strategy: st.SearchStrategy[Schedule] | None = None) -> Schedule:
    """The default schedule, straight from the example's choices: a count, then that many numbers, twice.

    The same `Schedule` as `schedules()` with its default bounds, without a strategy around each number (a
    strategy draw of the whole costs about eight times these ten-odd choices). Each count and each number
    shrinks towards 0, so a failing schedule shrinks towards FIFO, then to the fewest non-zero numbers.
    ``strategy`` (a user's) replaces it.
    """
    if strategy is not None or not choices.direct:
        return choices.draw(_default_schedules() if strategy is None else strategy, "schedule")
    integer = choices.integer
    priorities = tuple(integer(0, _MAX_PRIORITY) for _ in range(integer(0, _MAX_TASKS)))
    change_points = tuple(sorted({integer(0, _HORIZON - 1) for _ in range(integer(0, _MAX_CHANGES))}))
    schedule = Schedule(priorities=priorities, change_points=change_points)
    choices.note(schedule, "schedule")
    return schedule


@functools.cache
def _default_schedules() -> st.SearchStrategy[Schedule]:
    return schedules()  # built once: building the strategy costs as much as drawing from it
