"""The race engine: a controlled asyncio loop whose interleavings Hypothesis explores, behind ``races``.

The mechanism, free of Hypothesis:

- ``_loop``: :class:`ControlledLoop`, one ready callback per step on virtual time, and its verdicts
  (:class:`Deadlock`, :class:`Livelock`, :class:`NondeterminismError`);
- ``_lanes``: what may run at a step (a task or the shared callback lane), in canonical order;
- ``_choosers``: the policy, which lane runs (:class:`FifoChooser`, :class:`PriorityChooser`);
- ``_fifo_groups``: which tasks keep their order among themselves, and ``CODE_UNDER_TEST``, the registry of
  this package's modules that are code under test rather than the fake;
- ``_run``: :func:`run_controlled`, one run on a fresh loop torn down deterministically, as a :class:`RunResult`;
- ``_wallclock``: what a run does about real time (``time.sleep``, clock reads in a livelock).

Over it, the exploration, which imports Hypothesis:

- ``_draws``: :class:`ExampleDraws`, the engine's draws from a Hypothesis example;
- ``_schedule``: :class:`Schedule`, the PCT-style encoding of an interleaving, and its strategy;
- ``_server_choices``: :class:`ServerChoices`, what the fake decides per request, and the middleware drawing it;
- ``_example``: :class:`Race`, what a scenario gets in one example (the fake, draws, explored points);
- ``_example_run``: :func:`run_example`, one example run and judged, and :class:`RaceFailure` with its report;
- ``_explore``: :func:`explore` and :func:`race_test`, a Hypothesis search, with its settings and database keys;
- ``_search``: :class:`SearchBudget`, a search's bound on shrinking, its stored replays and its log watch;
- ``_logs``: :class:`LogWatch`, the reported run's log records that no passing example logged;
- ``_suite``: :class:`RaceSuite`, every race scenario on a user's client;
- ``_cache_under_test``: :func:`explore_session_cache`, a session cache explored by the machine below;
- ``_machine``: the session-cache machine, a Hypothesis rule-based state machine (imported only when used);
- ``_program``: :class:`Program`, the machine's record of a reported run, and :func:`shorten`, its failing program
  without the steps the failure does not need.

Names of the exploration are imported when first asked for (``__getattr__`` below), so importing the
mechanism (``_race._loop``, say) does not import Hypothesis; ``races`` imports them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from ._choosers import Chooser, FifoChooser, PriorityChooser
from ._loop import ControlledLoop, Deadlock, Livelock, NondeterminismError
from ._run import RunResult, run_controlled

if TYPE_CHECKING:
    from ._cache_under_test import SessionCacheUnderTest, explore_session_cache
    from ._example import Race
    from ._example_run import RaceFailure
    from ._explore import explore, race_settings, race_test
    from ._schedule import Schedule, schedules
    from ._server_choices import ServerChoices
    from ._suite import RaceSuite

__all__ = [
    "Chooser",
    "ControlledLoop",
    "Deadlock",
    "FifoChooser",
    "Livelock",
    "NondeterminismError",
    "PriorityChooser",
    "Race",
    "RaceFailure",
    "RaceSuite",
    "RunResult",
    "Schedule",
    "ServerChoices",
    "SessionCacheUnderTest",
    "explore",
    "explore_session_cache",
    "race_settings",
    "race_test",
    "run_controlled",
    "schedules",
]

_WITH_HYPOTHESIS: Final = {
    "Race": "_example",
    "RaceFailure": "_example_run",
    "RaceSuite": "_suite",
    "Schedule": "_schedule",
    "ServerChoices": "_server_choices",
    "SessionCacheUnderTest": "_cache_under_test",
    "explore": "_explore",
    "explore_session_cache": "_cache_under_test",
    "race_settings": "_explore",
    "race_test": "_explore",
    "schedules": "_schedule",
}
"""The names above whose modules import Hypothesis, by module: imported when first asked for."""


def __getattr__(name: str) -> object:
    module = _WITH_HYPOTHESIS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
