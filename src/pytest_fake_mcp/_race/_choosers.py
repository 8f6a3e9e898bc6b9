"""Choosers: the policy of a controlled run, which of the runnable lanes runs next at each choice point.

`ControlledLoop` is the mechanism: it works out the lanes that may run (canonical order, FIFO groups,
fairness) and asks its chooser. A chooser answers with an index into those lanes (0 is FIFO). Two answer
every run the race engine makes: `FifoChooser` (stock asyncio's order: teardowns, and the default) and
`PriorityChooser` (the PCT-style schedule Hypothesis explores). A chooser may offer more, for speed only:
``fifo_at`` (its answer is 0 whatever the lanes) and ``ranking`` (away from its change points its answer is
the lane of highest priority, read from a table the loop may consult in its own pass over the lanes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Chooser", "FifoChooser", "PriorityChooser", "Ranking"]


class Chooser(Protocol):
    """Picks which of ``n`` runnable lanes (canonical order, index 0 is FIFO) runs next.

    A chooser may also offer ``fifo_at(decision) -> bool``: True if its answer to that decision is 0
    whatever the lanes (and asking changes nothing); the loop then skips working out the lanes. And
    ``ranking() -> Ranking | None``: the rule its answers follow away from some decisions, which the loop
    then applies itself instead of asking (see `Ranking`).
    """

    def __call__(self, decision: int, seqs: Sequence[int]) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranking:
    """A chooser's answers as a rule: at any decision not in ``change_points``, the first lane of the highest priority.

    The loop applies it in the pass that filters the lanes (no call to the chooser, no list of lanes built)
    and asks the chooser only at a change point. ``priority_of`` is read live: the chooser may update the
    table behind it (a demotion at a change point does).
    """

    priority_of: Callable[[int, int], int]
    """``priority_of(seq, 0)``: the priority now of the lane of task ``seq`` (the shared lane is -1); absent is 0."""
    change_points: frozenset[int]
    """The decisions at which the chooser must be asked."""
    even: bool
    """Every lane ties (so far): the chooser's ``fifo_at`` may answer True; else it never does."""


class FifoChooser:
    """Always the canonical first lane: the loop then runs callbacks in stock asyncio's order."""

    def __call__(self, decision: int, seqs: Sequence[int]) -> int:
        return 0

    def fifo_at(self, decision: int) -> bool:
        return True


class PriorityChooser:
    """PCT-style: each task has a priority (by creation number), the highest runnable lane runs.

    Ties keep the canonical order, so ``PriorityChooser((), ())`` is FIFO. At each decision number in
    ``change_points`` the lane about to run is demoted below every other lane. The shared callback lane
    has priority 0, like a task with no priority given.
    """

    def __init__(self, priorities: Sequence[int] = (), change_points: Sequence[int] = ()) -> None:
        self.priorities = tuple(priorities)
        self.change_points = frozenset(change_points)
        self._demoted: dict[int, int] = {}
        self._priority_of = dict(enumerate(self.priorities))
        """Creation number -> priority now (a demotion overrides the given one); absent is 0."""
        self._flat = not any(self.priorities)  # every lane ties: the canonical first runs, until a demotion

    def _best(self, seqs: Sequence[int]) -> int:
        """The index of the first lane of the highest priority."""
        get = self._priority_of.get
        best, best_priority = 0, get(seqs[0], 0)
        for j in range(1, len(seqs)):
            priority = get(seqs[j], 0)
            if priority > best_priority:
                best, best_priority = j, priority
        return best

    def fifo_at(self, decision: int) -> bool:
        return self._flat and decision not in self.change_points

    def set_priority(self, seq: int, priority: int) -> None:
        """Give task ``seq`` a priority during the run (the session-cache machine: its operations' draws).

        The loop reads priorities live, and ``fifo_at`` stops answering True once any is raised.
        """
        self._priority_of[seq] = priority
        if priority:
            self._flat = False

    def ranking(self) -> Ranking | None:
        """This chooser's answers away from its change points, as a rule the loop applies itself.

        None for a subclass that answers otherwise (it overrides ``__call__``): the loop then asks it at every
        decision.
        """
        if type(self).__call__ is not PriorityChooser.__call__:
            return None
        return Ranking(priority_of=self._priority_of.get, change_points=self.change_points, even=self._flat)

    def __call__(self, decision: int, seqs: Sequence[int]) -> int:
        if decision not in self.change_points:
            if self._flat:
                return 0
            return self._best(seqs)
        self._flat = False
        demoted = seqs[self._best(seqs)]
        self._demoted[demoted] = self._priority_of[demoted] = -1 - len(self._demoted)
        return self._best(seqs)
