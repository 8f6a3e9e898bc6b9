"""WallClockGuard: what a controlled run does about real time (``time.sleep``, ``time.monotonic``, ...).

A controlled run's clock is virtual, so code that reads or waits on real time is outside the scheduler.
Reading the wall clock is usually harmless (httpcore and the SDK stamp times for keep-alive bookkeeping and
logs), and a false alarm is worse than a miss, so the guard never fails a run for reading the clock. It
acts on two things only:

* a blocking ``time.sleep(s)`` with ``s > 0`` on the loop's thread while the loop runs: it stops every
  task for real seconds while the virtual clock stands still, so what the code waits for cannot happen
  during it. Refused at once, naming the call site. ``time.sleep(0)`` is allowed.
* a run stopped as a livelock: if code outside installed libraries read the wall clock many times in the
  run, the livelock message names the busiest call site (a loop waiting for real time to pass while only
  virtual time moves is the usual cause).

Only calls through the ``time`` module's attributes are seen (``from time import sleep`` taken before the
run is not). A wrapper taken by name while a guard is installed (``socketserver`` does ``from time import
monotonic``) outlives the guard: it holds the guard weakly, so it pins no run's loop, and once the guard is gone
it calls the original at once.
"""

from __future__ import annotations

import inspect
import os
import sysconfig
import threading
import time
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["WallClockGuard"]

_READS: Final = ("monotonic", "time", "perf_counter")
BUSY_READS: Final = 1000
"""Reads from one call site in one run before a livelock names it."""
_NOT_UNDER_TEST: Final = (
    *{os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items() if k in ("stdlib", "purelib", "platlib")},
    os.path.dirname(os.path.abspath(__file__)) + os.sep,  # the fake's own bookkeeping
)


def _where(code: Any, line: int) -> str:
    """``file:line in function``."""
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{line} in {code.co_name}"


class WallClockGuard:
    """While installed: refuses a blocking ``time.sleep`` on the running loop's thread, counts clock reads by site.

    ``refuse(source, fix)`` is called (and must raise) for a blocking sleep. Example::

        with WallClockGuard(loop.is_running, refuse):
            loop.run_until_complete(main())
    """

    def __init__(self, running: Callable[[], bool], refuse: Callable[[str, str], Any]) -> None:
        self._running = running
        self._refuse = refuse
        self._thread = threading.get_ident()
        self._saved: list[tuple[str, Any]] = []
        self.reads: Counter[tuple[str, Any, int]] = Counter()
        """Wall-clock reads of the code under test during the run, by (``time`` function, code object, line).

        Kept raw: libraries read the clock on most requests, and a name is formatted only for a livelock."""

    def __enter__(self) -> WallClockGuard:
        self._saved = [(name, getattr(time, name)) for name in ("sleep", *_READS)]
        time.sleep = self._sleep(time.sleep)  # type: ignore[assignment]
        for name in _READS:
            setattr(time, name, self._read(getattr(time, name), name))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for name, original in reversed(self._saved):
            setattr(time, name, original)
        self._saved = []

    def _watching(self) -> bool:
        return threading.get_ident() == self._thread and self._running()

    def _sleep(self, original: Callable[[float], None]) -> Callable[[float], None]:
        # The wrapper holds the guard weakly: a module that took it by name while installed (``from time import
        # sleep``) keeps the wrapper for good, and a strong reference would keep the guard and, through
        # ``running``, its run's loop alive with it.
        guard_ref = weakref.ref(self)

        def sleep(seconds: float) -> None:
            guard = guard_ref()
            if guard is not None and seconds > 0 and guard._watching():
                frame = inspect.currentframe()
                caller = frame.f_back if frame is not None else None
                where = _where(caller.f_code, caller.f_lineno) if caller is not None else "an unknown place"
                guard._refuse(
                    f"a blocking time.sleep({seconds!r}) at {where}",
                    "It stops every task for real seconds while the run's clock is virtual, so nothing it waits "
                    "for can happen meanwhile; use `await asyncio.sleep(...)` (virtual time makes it free).",
                )
            original(seconds)

        return sleep

    def _read(self, original: Callable[[], float], name: str) -> Callable[[], float]:
        guard_ref = weakref.ref(self)  # weakly, as in _sleep

        def read() -> float:
            guard = guard_ref()
            if guard is None:
                return original()
            frame = inspect.currentframe()
            caller = frame.f_back if frame is not None else None
            if caller is None:  # called from C with no Python caller (or no frames): not the code under test
                return original()
            code = caller.f_code
            if not code.co_filename.startswith(_NOT_UNDER_TEST) and guard._watching():
                guard.reads[name, code, caller.f_lineno] += 1
            return original()

        return read

    def livelock_hint(self) -> str:
        """A sentence naming the busiest wall-clock read of the code under test, or ``""`` if none was busy."""
        if not self.reads:
            return ""
        (name, code, line), count = self.reads.most_common(1)[0]
        if count < BUSY_READS:
            return ""
        site = f"time.{name}() at {_where(code, line)}"
        return (
            f"; the code read the wall clock {count} times at {site}: a wait for real time to pass never ends "
            "here, because the run's clock is virtual (use loop.time() or asyncio.timeout/asyncio.sleep)"
        )
