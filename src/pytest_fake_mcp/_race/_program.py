"""Program: the session-cache machine's record of a reported run, and its shortening to the steps the failure needs.

Hypothesis shrinks a failing program rule by rule, and two things stop it short: it cannot delete a rule whose
result a later rule takes (a key from the ``keys`` bundle), and a race's three operations go or stay together.
So the failing run Hypothesis reports keeps steps its failure does not need. `shorten` takes them out: it replays
the run's `Program` outside Hypothesis (the rule calls with the arguments Hypothesis drew, the schedule, and each
server answer's hold under the operation whose request it was), with steps left out, first each rule's steps
together, then each step alone, earliest first. A step stays out when the run without it still fails the same
way (`Outcome.same_as`: the same headline and first problem, operation names, ids and numbers aside). Every
replay is deterministic, so the shortened program is the same whenever the example replays, and the number of
replays is bounded by the number of steps (no clock), so a loaded machine gives the same report as an idle one.

A program whose only steps left out would be settles is reported whole: the run checks at its end anyway.

Leaving a step out keeps the loop turns an operation's rule lets pass, so the other operations start where they
did; what a left-out step would have started does not run, and the schedule's priorities by creation number may
then land on other tasks. A replay that fails another way (or passes) keeps the step in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from hypothesis import strategies as st

    from ._draws import ExampleDraws

__all__ = ["KeyedDraws", "Outcome", "Program", "Step", "shorten"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a program (a line of the report): an operation, a cancel, an expiry or a settle."""

    ordinal: int
    """Its line number in the whole program, left-out steps counted."""
    call: int
    """The rule call that issued it (0: the first rule after ``start``)."""
    label: str
    """``use-3``, ``cancel-4``, ``expire-5``, or ``settle``."""
    text: str


@dataclass(slots=True)
class Program:
    """What replays a reported run outside Hypothesis: its rule calls, schedule and draws, and its steps."""

    schedule: Any = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Each rule Hypothesis called, with the arguments it drew (keys as values, not bundle references)."""
    steps: list[Step] = field(default_factory=list)
    """The steps the rule calls issued (those of the example's end, after the last rule, are not listed)."""
    draws: dict[tuple[str, int], Any] = field(default_factory=dict)
    """Each draw of the run, by (the task it served, as the operation or task that started it: its n-th draw)."""
    cancelled: dict[int, str | None] = field(default_factory=dict)
    """Cancel step -> the operation it cancelled (None: it had ended); a replay cancels the same one."""
    race_cancels: set[int] = field(default_factory=set)
    """The race calls whose last operation was cancelled (a replay keeps that step, even if the operation ended)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run failed: the failure raised, its headline and problems, and the error that stopped it, if any."""

    failure: AssertionError
    what: str
    problems: tuple[str, ...]
    cause: BaseException | None = None

    def same_as(self, other: Outcome) -> bool:
        """Does this run fail as ``other`` did: the same headline, and ``other``'s first problem among its own?"""
        if _gist(self.what) != _gist(other.what) or type(self.cause) is not type(other.cause):
            return False
        if not other.problems:
            return True
        return _gist(other.problems[0]) in {_gist(p) for p in self.problems}


_RAISED: Final = re.compile(r"\braised (\w+)\(.*", re.DOTALL)
_OPERATION: Final = re.compile(r"\b(get|use|cleanup|cancel|expire)-\d+\b")
_SESSION_ID: Final = re.compile(r"\b[0-9a-f]{8,}\b")
"""A session id, as a report shows one (its first eight hexadecimal digits): random per run."""
_NUMBER: Final = re.compile(r"\d+")


def _gist(text: str) -> str:
    """``text`` without what varies between runs failing alike: error messages, operation numbers, ids, numbers."""
    text = _RAISED.sub(r"raised \1", text)
    text = _OPERATION.sub(r"\1", text)
    text = _SESSION_ID.sub("…", text)
    return _NUMBER.sub("#", text)


class KeyedDraws:
    """``ExampleDraws``'s interface, each value kept under the task it served (recording), or taken from there.

    Recording (``inner`` given): every draw comes from the example and is kept in ``kept`` under ``where()`` (the
    operation the drawing task works for) and its count there. Replaying (``replay`` given): a draw takes the
    value kept under the same key, or the lowest value when the key is new or the value does not fit, so a run
    with steps left out holds each remaining operation's answers as its recorded run did.
    """

    def __init__(
        self,
        where: Callable[[], str],
        *,
        inner: ExampleDraws | None = None,
        replay: dict[tuple[str, int], Any] | None = None,
    ) -> None:
        self.where = where
        self.inner = inner
        self.replay = replay
        self.kept: dict[tuple[str, int], Any] = {}
        self.direct = True if inner is None else inner.direct
        self.reporting = False if inner is None else inner.reporting
        self._counts: dict[str, int] = {}

    def _key(self) -> tuple[str, int]:
        owner = self.where()
        n = self._counts[owner] = self._counts.get(owner, 0) + 1
        return (owner, n)

    def integer(self, low: int, high: int, label: str | None = None) -> int:
        key = self._key()
        if self.inner is None:
            value = self._replayed(key)
            return value if type(value) is int and low <= value <= high else low
        self.kept[key] = drawn = self.inner.integer(low, high, label)
        return drawn

    def boolean(self, label: str) -> bool:
        key = self._key()
        if self.inner is None:
            return self._replayed(key) is True
        self.kept[key] = drawn = self.inner.boolean(label)
        return drawn

    def note(self, value: object, label: str) -> None:
        if self.inner is not None:
            self.inner.note(value, label)

    def draw(self, strategy: st.SearchStrategy[Any], label: str) -> Any:
        key = self._key()
        if self.inner is None:
            if key not in (self.replay or {}):
                raise LookupError(f"the replayed run drew {label!r} where its recorded run did not")
            return self._replayed(key)
        self.kept[key] = drawn = self.inner.draw(strategy, label)
        return drawn

    def _replayed(self, key: tuple[str, int]) -> Any:
        return (self.replay or {}).get(key)


def shorten(
    program: Program, original: Outcome, replay: Callable[[frozenset[int]], Outcome | None]
) -> tuple[frozenset[int], Outcome] | None:
    """The steps of ``program`` its failure does not need, and the run without them; None if every step matters.

    ``replay(left_out)`` runs the program without those steps and says how it failed (None: it passed, or
    failed otherwise than by the machine's report). Each rule's steps are tried out together, then each step
    alone, earliest first: at most one replay per rule and one per step. Settles alone left out are not worth
    a report of their own (the run checks at its end anyway): None then too.
    """
    left_out: frozenset[int] = frozenset()
    shortest: Outcome | None = None
    by_call: dict[int, list[int]] = {}
    for step in program.steps:
        by_call.setdefault(step.call, []).append(step.ordinal)
    tries = [frozenset(group) for group in by_call.values()]
    tries += [frozenset((step.ordinal,)) for step in program.steps if len(by_call[step.call]) > 1]
    for steps in tries:
        if steps <= left_out:
            continue
        outcome = replay(left_out | steps)
        if outcome is not None and outcome.same_as(original):
            left_out, shortest = left_out | steps, outcome
    labels = {step.ordinal: step.label for step in program.steps}
    if shortest is None or all(labels[number] == "settle" for number in left_out):
        return None
    return left_out, shortest
