"""run_example: one example of a race scenario, run on a fresh loop and a clean fake, and judged (`RaceFailure`).

One example draws a schedule, renews the in-process fake behind the server-choices middleware, runs the
scenario on a fresh controlled loop (`run_controlled`), and raises `RaceFailure` with the schedule in words,
what failed and the sequence diagram of the run.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, TypeVar

from hypothesis import note
from hypothesis import strategies as st

from .._host._inprocess import InProcessFake
from .._record._analysis import CROSSED_TASKS_HINT, crossed_tasks
from .._record._counters import HTTPClientCounter
from .._record._report import diagram_legend, diagram_shown
from .._wire._options import FakeMCPOptions
from ._draws import ExampleDraws, is_reporting
from ._example import Race
from ._lanes import describe_deviations
from ._run import is_skip, run_controlled
from ._schedule import draw_schedule
from ._server_choices import ServerChoices, ServerChoicesMiddleware

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._host._server import FakeMCPServer
    from ._run import RunResult
    from ._schedule import Schedule

__all__ = ["RaceFailure", "run_example"]

T = TypeVar("T")


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


class RaceFailure(AssertionError):
    """A race example failed: the message has the schedule in words, what failed, and the diagram (once: when the
    exception that failed the scenario already draws it, the report points there)."""

    def __repr__(self) -> str:
        """The class and the headline only: the whole report (with its diagram) is the message, shown once."""
        return f"{type(self).__name__}({_headline(self)!r})"


def _headline(error: BaseException) -> str:
    """The first line of ``error``'s message, as ``repr`` shows an exception's class and message."""
    text = str(error)
    return text.splitlines()[0] if text else ""


def _raised(error: BaseException) -> str:
    """``Kind: headline`` of the exception the scenario raised (its whole message is shown as its own)."""
    headline = _headline(error)
    more = " …" if len(str(error).splitlines()) > 1 else ""
    return f"{type(error).__name__}: {headline}{more}" if headline else f"{type(error).__name__}()"


def _report(
    what: str,
    schedule: Schedule,
    result: RunResult,
    server: FakeMCPServer,
    cause: BaseException | None,
    points: list[str] | None = None,
    logs: list[str] | None = None,
) -> str:
    lines = [what, "", f"Schedule: {schedule}", f"  in words: {schedule.describe(result.task_names)}"]
    if result.deviations:
        lines += describe_deviations(result.deviations, result.deviation_count, result.steps)
    elif result.deviation_count:
        lines.append(
            f"  {result.deviation_count} step(s) of {result.steps} ran out of FIFO order (described when "
            "Hypothesis reports the example)"
        )
    else:
        lines.append(f"  every one of {result.steps} steps ran in FIFO order")
    digest = hashlib.sha256(repr(result.trace).encode()).hexdigest()[:16]
    lines.append(f"  trace: {len(result.trace)} steps, digest {digest} (identical whenever this example replays)")
    if points:
        lines += ["", "Explored points reached:"] + [f"  - {p}" for p in points]
    if cause is not None:
        lines += ["", f"Raised: {_raised(cause)}"]
    if result.loop_errors:
        lines += ["", "Errors the loop reported:"] + [f"  - {e}" for e in result.describe_errors()]
    if result.leftover_tasks:
        lines += ["", "Tasks left pending after the run:"] + [f"  - {t}" for t in result.leftover_tasks]
    if logs:
        lines += ["", *logs]
    if diagram_shown(cause, server.url):
        lines += ["", f"The failing run on the wire: drawn in the {type(cause).__name__} above.", ""]
    else:
        exchanges = server.journal.exchanges
        legend = f" {diagram_legend(exchanges)}" if exchanges else ""
        lines += ["", f"The failing run on the wire.{legend}", str(server.journal), ""]
    if crossed_tasks(cause) or any(crossed_tasks(e.get("exception")) for e in result.loop_errors):
        lines.append(f"Hint: {CROSSED_TASKS_HINT}.")
    lines.append(
        "Hint: rerunning the test replays this example first (Hypothesis database); to pin it in a regression "
        "test, see docs/races.md."
    )
    return "\n".join(lines)


def run_example(
    data: Any,
    scenario: Callable[[Race], Awaitable[Any]],
    *,
    options: FakeMCPOptions | None = None,
    choices: ServerChoices | None = None,
    schedule_strategy: st.SearchStrategy[Schedule] | None = None,
    allow_leftover_tasks: bool = False,
    allow_loop_errors: bool = False,
    fake: InProcessFake | None = None,
    remarks: Callable[[], list[str]] | None = None,
    logs: Callable[[], list[str]] | None = None,
) -> Any:
    """One example: draw a schedule, run ``scenario`` on a fresh loop and a clean fake, fail with a report.

    ``fake``: an open in-process fake to renew for this example (`explore` shares one between its
    examples); by default the example builds its own. ``remarks()``: notes the failure gets (how the search came
    to this example: replayed from the database as stored, shrinking cut short); ``logs()``: the log
    records the report shows beside the diagram.
    """
    __tracebackhide__ = True
    reporting = is_reporting()
    drawing = ExampleDraws(data, reporting)
    schedule = draw_schedule(drawing, schedule_strategy)
    with HTTPClientCounter() as counter:
        own_fake = fake is None
        if fake is None:
            fake = InProcessFake(options or FakeMCPOptions())
            server = fake.open()
        else:
            server = fake.renew()
        try:
            race = Race(server, counter, drawing)
            fake.asgi = ServerChoicesMiddleware(fake.app, race, choices or ServerChoices())
            result = run_controlled(lambda: _as_coroutine(scenario(race)), schedule.chooser(), describe=reporting)
        finally:
            if own_fake:
                fake.close()
    if race.stop is not None:
        raise race.stop
    if is_skip(result.error):
        raise result.error  # type: ignore[misc]  # a scenario that skips (RaceSuite's refusals): Hypothesis re-raises it
    if reporting:
        note(f"schedule in words: {schedule.describe(result.task_names)}")
    failure = None
    if result.error is not None:
        kind = type(result.error).__name__
        failure = f"The race scenario failed under this schedule ({kind})."
    elif result.loop_errors and not allow_loop_errors:
        failure = "The run left errors nobody handled (an exception never retrieved, a callback that raised)."
    elif result.leftover_tasks and not allow_leftover_tasks:
        failure = "The run ended with tasks still pending (nothing may be left running once the scenario ends)."
    if failure is not None:
        logged = logs() if logs is not None else None
        error = RaceFailure(_report(failure, schedule, result, server, result.error, race.points, logged))
        for remark in remarks() if remarks is not None else []:
            error.add_note(remark)  # how the search came to it: the report itself is the same on every replay
        raise error from result.error
    return result.value
