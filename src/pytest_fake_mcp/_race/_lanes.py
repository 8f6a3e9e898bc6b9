"""Lanes: what may run at a step of a controlled run (a task, or the shared callback lane), in canonical order.

A lane's order never depends on an object's address or a set's order, so a run is a pure function of its
chooser's answers: the callbacks one step makes ready are put in canonical order when that step wakes
several tasks (`canonical_batch`), and so are the lanes shown to a chooser (`canonical`). `Lane` and
`Deviation` name what ran out of FIFO order in a failure report.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections import deque

__all__ = ["Deviation", "Lane", "ReadyLane", "canonical", "canonical_batch", "describe_deviations"]

ReadyLane = tuple[int, int, bool]
"""Of a ready callback: the step it became ready in, its lane (task creation number, -1 shared), is it a wake-up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lane:
    """One runnable lane at a choice point: a task's next step, or the shared callback lane."""

    seq: int
    """The task's creation number in this run (0 is the main task); -1 for the shared callback lane."""
    name: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.name} ({self.where})" if self.where else self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class Deviation:
    """A step at which the chosen lane was not the canonical first one."""

    step: int
    ran: Lane
    ahead_of: tuple[Lane, ...]
    between_callers: bool = False
    """A task of one caller (an operation, or a task the scenario started) ran ahead of another caller's task: the
    kind of step that can change an outcome (a task running ahead of its own caller's other tasks rarely does)."""

    def __str__(self) -> str:
        skipped = ", ".join(str(lane) for lane in self.ahead_of)
        return f"step {self.step}: {self.ran} ran ahead of {skipped}"


def describe_deviations(deviations: list[Deviation], count: int, steps: int, shown: int = 6) -> list[str]:
    """A report's lines on the out-of-order steps: those between callers first, in step order, then the others."""
    if not deviations:
        return [f"  every one of {steps} steps ran in FIFO order"] if not count else []
    between = [d for d in deviations if d.between_callers]
    others = [d for d in deviations if not d.between_callers]
    if not between:
        lines = [f"  {count} step(s) of {steps} ran out of FIFO order; the first ones (task, where it stood):"]
        return lines + [f"    {d}" for d in others[:shown]]
    lines = [
        f"  {count} step(s) of {steps} ran out of FIFO order. Where one caller's task ran ahead of another caller's "
        "(the steps that can change an outcome; the first is where the run first left stock order between callers):"
    ]
    lines += [f"    {d}" for d in between[:shown]]
    if others and len(between) < shown:
        lines.append("  and the others:")
        lines += [f"    {d}" for d in others[: shown - len(between)]]
    return lines


def canonical(heads: list[int], ready_lanes: deque[ReadyLane]) -> tuple[list[int], list[int]]:
    """FIFO, except that task wake-ups made ready in the same step run in task-creation order.

    ``heads``: the index in the queue of each lane's first callback, in queue order; returns the heads and
    their lanes in canonical order. One step can wake several tasks in an order that depends on object
    addresses (anyio cancels the tasks of a scope by iterating a set); ordering those by creation number
    keeps runs replayable. Everything else keeps stock asyncio's order.
    """
    lanes = [ready_lanes[i] for i in heads]
    out = list(heads)
    seqs = [lane[1] for lane in lanes]
    start, count = 0, len(out)
    while start < count:
        stamp = lanes[start][0]
        end = start + 1
        while end < count and lanes[end][0] == stamp:
            end += 1
        if end - start > 1:
            slots = [j for j in range(start, end) if lanes[j][2]]
            if len(slots) > 1:  # lanes differ, so sorting by (lane, index) is sorting by lane
                for j, (seq, i) in zip(slots, sorted([(seqs[j], out[j]) for j in slots]), strict=True):
                    out[j], seqs[j] = i, seq
        start = end
    return out, seqs


def canonical_batch(ready: deque[asyncio.Handle], lanes: deque[ReadyLane], start: int) -> None:
    """Reorder the callbacks made ready in one step (``ready[start:]``) so their order depends on no set or address.

    A future that completes readies its done callbacks together, in the order they were added: a task's
    wake-up and, beside it, plain callbacks on the same future (``asyncio.shield``'s ``_outer_done_callback``
    sits on the future the shielded task waits on). Such a run of callbacks on one future is kept whole and
    the runs holding a wake-up are put in the creation order of the first task they wake; every other
    callback keeps its slot. One step can complete several futures in an order that depends on object
    addresses (anyio cancels the tasks of a scope by iterating a set): this way a plain callback follows
    the task whose cancellation readied it, wherever the set put that task.
    """
    count = len(ready) - start
    handles = [ready.pop() for _ in range(count)]
    stamps = [lanes.pop() for _ in range(count)]
    handles.reverse()
    stamps.reverse()
    runs: list[list[int]] = []  # indices into the batch, one list per run of callbacks on the same future
    keys: list[int] = []  # per run: the creation number of the first task it wakes, -1 if it wakes none
    previous: object = None
    for i, handle in enumerate(handles):
        args = handle._args
        future = args[0] if args and isinstance(args[0], asyncio.Future) else None
        if future is None or future is not previous:
            runs.append([])
            keys.append(-1)
        previous = future
        runs[-1].append(i)
        if stamps[i][2] and keys[-1] < 0:
            keys[-1] = stamps[i][1]
    slots = [j for j, key in enumerate(keys) if key >= 0]
    runs_before = list(runs)
    for j, k in zip(slots, sorted(slots, key=keys.__getitem__), strict=True):
        runs[j] = runs_before[k]
    for run in runs:
        for i in run:
            ready.append(handles[i])
            lanes.append(stamps[i])
