"""Every name of another library that the library does not make public, in one place: a section per library.

Each use of a private name is an `Entry`: what it is, the versions checked, the gain it buys (measured on its
bench row; an entry that bought under 3% was replaced by the public API and is not here), and the public fallback
where one exists. Each entry has a `check` that looks at the installed library's shape; `require` runs it once
per process before the code first relies on the name, so a changed shape fails at once with a `CompatError`
naming the library, its version and the name, never with a wrong answer or an ``AttributeError`` deep in a
request. Where a public fallback exists, the code takes it instead of failing (`usable`).

The whole list (``tests/test_compat.py`` holds it to `ENTRIES`; each entry's ``gain`` gives the measurement)::

    entry                            library     what for                                    gain        if changed
    BASE_LOOP_RUN_ONCE               python      ControlledLoop picks each ready callback    needed      CompatError
    BASE_LOOP_CALL_SOON              python      ... stamps each callback with its lane      needed      CompatError
    BASE_LOOP_TIMER_CANCELLED        python      ... drops a cancelled due timer             needed      CompatError
    HANDLE_SLOTS                     python      ... reads a handle's callback and args      needed      CompatError
    HANDLE_RUN                       python      ... runs the chosen handle                  needed      CompatError
    SELECTOR_LOOP_SELF_PIPE          python      ... makes no self-pipe                      needed      CompatError
    SELECTOR_LOOP_ADD_READER_WRITER  python      ... refuses real I/O                        needed      CompatError
    FUTURE_LOG_TRACEBACK             python      ... reports unretrieved task errors         needed      CompatError
    TASK_STEP_TYPE                   python      ... tells a task's step from its wake-up    needed      CompatError
    SET_RUNNING_LOOP                 python      the cache machine builds the user's cache   needed      CompatError
    THREAD_FRAMES                    python      where a blocked client thread stands        feature     not shown
    HTTPX_SSL_CONTEXT                httpx       one SSL context per default config          96%/client  public path
    HTTPX2_SSL_CONTEXT               httpx2      the same                                    97%/client  public path
    H11_CLEAN_UP                     h11         the listener's one-pass chunked head        10% sse     public path
    H11_HEADERS                      h11         ... (the same shortcut)                     10% sse     public path
    H11_STATE                        h11         ... (the same shortcut)                     10% sse     public path
    UVICORN_PROTOCOL                 uvicorn     one write per answer; connection faults     12% sse     CompatError
    UVICORN_SERVER                   uvicorn     start and stop without serve()'s polling    99% start   CompatError
    MCP_HTTP_CLIENT                  mcp         the reference client builds the SDK's       defaults    public path
    CHOICE_DRAWS                     hypothesis  the race engine's draws from the choices    10.7% race  public path
    BUILD_CONTEXT_IS_FINAL           hypothesis  only the reported example is described      24% race    public path
    PYTEST_PLUGIN_TEST_MARKS         hypothesis  its pytest plugin knows a race test as its own  feature    plugin's way
    EXAMPLE_CHOICES_BLOB             hypothesis  shrinking bounded in time, best so far shown  feature    unbounded

"needed": no public API does it at all; "public path": the code takes the public way (slower, same answers).
``tests/test_compat.py`` runs every check against what is installed; ``tests/test_compat_*.py`` fake a changed shape
for each entry.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import importlib.metadata
import inspect
import types
from asyncio import base_events, events, selector_events
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._wire._errors import FakeMCPError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "ASYNCIO_ENTRIES",
    "BASE_LOOP_CALL_SOON",
    "BASE_LOOP_RUN_ONCE",
    "BASE_LOOP_TIMER_CANCELLED",
    "BUILD_CONTEXT_IS_FINAL",
    "CHOICE_DRAWS",
    "ENTRIES",
    "EXAMPLE_CHOICES_BLOB",
    "FUTURE_LOG_TRACEBACK",
    "H11_CLEAN_UP",
    "H11_ENTRIES",
    "H11_HEADERS",
    "H11_STATE",
    "HANDLE_RUN",
    "HANDLE_SLOTS",
    "HTTPX2_SSL_CONTEXT",
    "HTTPX_SSL_CONTEXT",
    "MCP_HTTP_CLIENT",
    "PYTEST_PLUGIN_TEST_MARKS",
    "SELECTOR_LOOP_ADD_READER_WRITER",
    "SELECTOR_LOOP_SELF_PIPE",
    "SET_RUNNING_LOOP",
    "TASK_STEP_TYPE",
    "THREAD_FRAMES",
    "UVICORN_PROTOCOL",
    "UVICORN_SERVER",
    "CompatError",
    "Entry",
    "choice_draws",
    "default_ssl_context",
    "example_blob",
    "example_choices",
    "forget",
    "installed_version",
    "mark_hypothesis_test",
    "mcp_http_client_factory",
    "reporting_example",
    "require",
    "set_running_loop",
    "stacked_hypothesis_decorators",
    "task_step_type",
    "thread_frame",
    "usable",
]


class CompatError(FakeMCPError, RuntimeError):
    """An installed library no longer has the private shape pytest-fake-mcp relies on."""

    def __init__(self, entry: Entry, detail: str) -> None:
        self.entry = entry
        self.detail = detail
        super().__init__(
            f"pytest-fake-mcp relies on {entry.name} of {entry.library} {installed_version(entry.library)}, "
            f"and its shape has changed: {detail}. Checked with {entry.library} {entry.checked}. Install a "
            f"checked version of {entry.library} (or a pytest-fake-mcp release that supports this one), and "
            f"please report it (docs/installation.md lists the tested versions)."
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One private name of another library that this package uses."""

    library: str
    """The distribution (``pip`` name) it belongs to, e.g. ``"httpx"``; ``"python"`` for the standard library."""
    name: str
    """The private name as code spells it, e.g. ``"AsyncClient._transport_for_url"``."""
    what: str
    """What we use it for, in one line."""
    checked: str
    """The versions checked, e.g. ``"0.27.0-0.28.1"``."""
    gain: str
    """The measured gain it buys, with its bench row."""
    fallback: str
    """The public way taken when the shape changed, or ``"none"`` (then `require` raises)."""
    check: Callable[[], str | None]
    """None while the installed shape is as relied on; else what changed, in a few words."""


ENTRIES: Final[dict[str, Entry]] = {}
"""Every entry, by ``"library:name"``."""


def _entry(entry: Entry) -> Entry:
    ENTRIES[f"{entry.library}:{entry.name}"] = entry
    return entry


def installed_version(library: str) -> str:
    """The installed version of ``library`` (a distribution name; ``"python"``: the interpreter's)."""
    if library == "python":
        import platform

        return platform.python_version()
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


@functools.cache
def _problem(entry: Entry) -> str | None:
    try:
        return entry.check()
    except Exception as exc:  # a check that cannot even look: the shape changed
        return f"{type(exc).__name__}: {exc}"


def usable(entry: Entry) -> bool:
    """Whether ``entry``'s private shape is there (checked once per process); for entries with a fallback."""
    return _problem(entry) is None


def require(entry: Entry) -> None:
    """Raise `CompatError` if ``entry``'s private shape has changed (checked once per process)."""
    problem = _problem(entry)
    if problem is not None:
        raise CompatError(entry, problem)


def forget() -> None:
    """Check every entry afresh on next use (for the tests that fake a changed shape)."""
    _problem.cache_clear()


def _names(function: Any) -> tuple[str, ...]:
    """The global and attribute names ``function``'s code looks up (what it calls, by name)."""
    return tuple(inspect.unwrap(function).__code__.co_names)


# ==== asyncio (the standard library) ==========================================================================
# Replaced by the public way, each having bought under 3% of the race row (callgrind, per call x calls per
# example of the standard scenario): Handle.__init__ inlined in call_soon (0.8%), handle._run() inlined in
# _run_once (0.3%), run_forever's loop folded into _run_once (0.7%), reading _debug/_closed instead of
# get_debug()/is_closed() (0.7%), pruning finished generators from _asyncgens before shutdown_asyncgens()
# (0.35%), sys._getframe instead of inspect.currentframe() in the wall-clock guard (0.06%).

_PYTHONS = "3.11.7, 3.12.1, 3.13.0 (CPython)"


def _python_entry(*, name: str, what: str, gain: str, check: Callable[[], str | None]) -> Entry:
    """An entry of CPython's asyncio, checked on every supported Python; none has a public fallback."""
    return _entry(
        Entry(library="python", name=name, what=what, checked=_PYTHONS, gain=gain, fallback="none", check=check)
    )


def _missing(owner: type, *names: str) -> str | None:
    """Which of ``names`` ``owner`` no longer defines (the stubs of ``AbstractEventLoop`` do not count)."""
    mro = [k for k in owner.__mro__ if k is not events.AbstractEventLoop]
    gone = [name for name in names if not any(name in vars(k) for k in mro)]
    return f"{getattr(owner, '__qualname__', owner)} has no {', '.join(gone)}" if gone else None


def _not_called(function: Any, *names: str) -> str | None:
    used = _names(function)
    gone = [name for name in names if name not in used]
    return f"{function.__qualname__} no longer uses {', '.join(gone)}" if gone else None


def _check_run_once() -> str | None:
    loop_class = base_events.BaseEventLoop
    problem = _missing(loop_class, "_run_once") or _not_called(loop_class.run_forever, "_run_once", "_stopping")
    if problem:
        return problem
    loop = loop_class()
    try:
        if not isinstance(loop._ready, deque):  # type: ignore[attr-defined]
            return "a new loop's _ready is not a deque"
        if not isinstance(loop._scheduled, list):  # type: ignore[attr-defined]
            return "a new loop's _scheduled is not a list"
        if loop._stopping is not False or not isinstance(loop._timer_cancelled_count, int):  # type: ignore[attr-defined]
            return "a new loop's _stopping or _timer_cancelled_count changed type"
        timer = loop.call_at(5.0, print)
        if loop._scheduled != [timer] or timer._when != 5.0 or timer._scheduled is not True:  # type: ignore[attr-defined]
            return "call_at no longer puts a TimerHandle (_when, _scheduled) in _scheduled"
        timer.cancel()
    finally:
        loop.close()
    return None


BASE_LOOP_RUN_ONCE = _python_entry(
    name="BaseEventLoop._run_once (and _ready, _scheduled, _stopping, _timer_cancelled_count)",
    what="ControlledLoop overrides _run_once (run_forever calls it until _stopping) to pick the callback to "
    "run from _ready and to move time to the next timer of the _scheduled heap",
    gain="the race engine itself (a loop that chooses the next callback); not an optimisation",
    check=_check_run_once,
)


def _check_call_soon() -> str | None:
    loop_class = base_events.BaseEventLoop
    problem = _missing(loop_class, "_call_soon")
    if problem:
        return problem
    parameters = list(inspect.signature(loop_class._call_soon).parameters)  # type: ignore[attr-defined]
    if parameters != ["self", "callback", "args", "context"]:
        return f"_call_soon takes ({', '.join(parameters)})"
    return _not_called(loop_class.call_soon, "_call_soon") or _not_called(loop_class.call_soon_threadsafe, "_call_soon")


BASE_LOOP_CALL_SOON = _python_entry(
    name="BaseEventLoop._call_soon",
    what="ControlledLoop overrides it (call_soon in debug mode and call_soon_threadsafe make their handle "
    "through it) to stamp each ready callback with its lane",
    gain="needed to see every ready callback; not an optimisation",
    check=_check_call_soon,
)


def _check_timer_cancelled() -> str | None:
    return (
        _missing(base_events.BaseEventLoop, "_timer_handle_cancelled")
        or _not_called(events.TimerHandle.cancel, "_timer_handle_cancelled")
        or _missing(events.TimerHandle, "_scheduled", "_when")
    )


BASE_LOOP_TIMER_CANCELLED = _python_entry(
    name="BaseEventLoop._timer_handle_cancelled (and TimerHandle._scheduled)",
    what="TimerHandle.cancel calls it: ControlledLoop learns that a timer already moved to the ready queue "
    "was cancelled, and looks for cancelled ready callbacks only then",
    gain="needed to drop a cancelled due timer before choosing; not an optimisation",
    check=_check_timer_cancelled,
)


_HANDLE_SLOTS = ("_callback", "_args", "_cancelled", "_loop", "_source_traceback")


def _check_handle_slots() -> str | None:
    problem = _missing(events.Handle, *_HANDLE_SLOTS)
    if problem:
        return problem
    loop = base_events.BaseEventLoop()
    try:
        context = contextvars.copy_context()
        handle = events.Handle(print, (1,), loop, context)
        if (handle._callback, handle._args, handle._loop) != (print, (1,), loop):  # type: ignore[attr-defined]
            return "Handle(callback, args, loop, context) no longer keeps them in _callback, _args, _loop"
        if handle._source_traceback is not None:  # type: ignore[attr-defined]
            return "a Handle made out of debug mode has a _source_traceback"
        if handle._cancelled is not False:
            return "a new Handle's _cancelled is not False"
        handle.cancel()
        if handle._cancelled is not True:
            return "Handle.cancel no longer sets _cancelled"
    finally:
        loop.close()
    return None


HANDLE_SLOTS = _python_entry(
    name="Handle._callback, _args, _cancelled, _loop, _source_traceback",
    what="ControlledLoop reads a ready handle's callback (whose task it wakes), its args (the future it "
    "completes) and whether it was cancelled; a _Handle subclass flags its cancellation to its _loop",
    gain="the lanes and the canonical order of a step's callbacks are worked out from them; not an optimisation "
    "(Handle.__init__ inlined in call_soon bought 0.8% of the race row, by callgrind: replaced by Handle(...))",
    check=_check_handle_slots,
)


def _check_handle_run() -> str | None:
    problem = _missing(events.Handle, "_run")
    if problem:
        return problem
    parameters = list(inspect.signature(events.Handle._run).parameters)
    return None if parameters == ["self"] else f"Handle._run takes ({', '.join(parameters)})"


HANDLE_RUN = _python_entry(
    name="Handle._run",
    what="ControlledLoop's _run_once runs the chosen handle as stock _run_once does (a callback that raises "
    "is reported through the loop's exception handler)",
    gain="no public way runs a handle; the plain form (inlining it in _run_once bought 0.3% of the race row, "
    "by callgrind: replaced by handle._run())",
    check=_check_handle_run,
)


def _check_self_pipe() -> str | None:
    loop_class = selector_events.BaseSelectorEventLoop
    return (
        _missing(loop_class, "_make_self_pipe", "_close_self_pipe", "_write_to_self")
        or _not_called(loop_class.__init__, "_make_self_pipe")
        or _not_called(loop_class.close, "_close_self_pipe")
        or _not_called(loop_class._write_to_self, "_csock")  # type: ignore[attr-defined]
    )


SELECTOR_LOOP_SELF_PIPE = _python_entry(
    name="BaseSelectorEventLoop._make_self_pipe, _close_self_pipe (and _ssock, _csock)",
    what="ControlledLoop makes no self-pipe (a socketpair a controlled run never uses, and whose reader the "
    "loop would refuse as real I/O)",
    gain="needed: the stock self-pipe registers a reader, which the loop refuses; not an optimisation",
    check=_check_self_pipe,
)


def _check_add_reader_writer() -> str | None:
    loop_class = selector_events.BaseSelectorEventLoop
    return (
        _missing(loop_class, "_add_reader", "_add_writer")
        or _not_called(loop_class.add_reader, "_add_reader")
        or _not_called(loop_class.add_writer, "_add_writer")
        or _not_called(loop_class.sock_recv, "_add_reader")
    )


SELECTOR_LOOP_ADD_READER_WRITER = _python_entry(
    name="BaseSelectorEventLoop._add_reader, _add_writer",
    what="every real socket or pipe the loop would wait on goes through them (add_reader, sock_recv, the "
    "transports): ControlledLoop refuses them as nondeterminism",
    gain="needed to refuse real I/O at once; not an optimisation",
    check=_check_add_reader_writer,
)


def _check_log_traceback() -> str | None:
    loop = base_events.BaseEventLoop()
    try:
        future: asyncio.Future[None] = loop.create_future()
        if future._log_traceback is not False:
            return "a new Future's _log_traceback is not False"
        future.set_exception(ValueError("checked"))
        if future._log_traceback is not True:
            return "a failed Future's _log_traceback is not True"
        future.exception()
        if future._log_traceback is not False:
            return "Future.exception() no longer clears _log_traceback"
    finally:
        loop.close()
    return None


FUTURE_LOG_TRACEBACK = _python_entry(
    name="Future._log_traceback (of a Task)",
    what="a run reports each task that failed with nobody retrieving its error at teardown, instead of "
    "when the garbage collector meets it in some later test",
    gain="no public way tells whether a task's error was retrieved; not an optimisation",
    check=_check_log_traceback,
)


class _Probe(asyncio.SelectorEventLoop):
    """A loop that remembers the callbacks made ready, through the public call_soon."""

    def __init__(self) -> None:
        super().__init__()
        self.readied: list[Any] = []

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> asyncio.Handle:  # type: ignore[override]
        self.readied.append(callback)
        return super().call_soon(callback, *args, context=context)


def _step_and_wakeup() -> tuple[Any, Any, asyncio.Task[Any]]:
    """A task's first step and the callback that wakes it when the future it awaits completes."""

    async def wait(future: asyncio.Future[None]) -> None:
        await future

    loop = _Probe()
    try:
        future: asyncio.Future[None] = loop.create_future()
        task = loop.create_task(wait(future))
        step = loop.readied[-1]
        loop.run_until_complete(asyncio.sleep(0))  # the task's first step: it now waits on future
        future.set_result(None)
        wakeup = loop.readied[-1]
        loop.run_until_complete(task)
    finally:
        loop.close()
    return step, wakeup, task


def task_step_type() -> type:
    """The type of a task's step callback (``_asyncio.TaskStepMethWrapper`` in CPython's C tasks)."""
    return type(_step_and_wakeup()[0])


def _check_step_type() -> str | None:
    step, wakeup, task = _step_and_wakeup()
    if getattr(step, "__self__", None) is not task or getattr(wakeup, "__self__", None) is not task:
        return "a task's step or wake-up callback is no longer bound to the task (__self__)"
    if type(step) in (types.MethodType, type(wakeup)):
        return f"a task's step callback is a {type(step).__qualname__}, as other callbacks are"
    return None


TASK_STEP_TYPE = _python_entry(
    name="the type of Task.__step's callback (_asyncio.TaskStepMethWrapper)",
    what="ControlledLoop tells a task's step from its wake-up by the callback's type (wake-ups made ready "
    "in one step are put in task-creation order, steps are not)",
    gain="no public way tells a step from a wake-up; not an optimisation",
    check=_check_step_type,
)

ASYNCIO_ENTRIES = (
    HANDLE_SLOTS,
    HANDLE_RUN,
    BASE_LOOP_TIMER_CANCELLED,
    BASE_LOOP_RUN_ONCE,
    BASE_LOOP_CALL_SOON,
    SELECTOR_LOOP_SELF_PIPE,
    SELECTOR_LOOP_ADD_READER_WRITER,
    FUTURE_LOG_TRACEBACK,
    TASK_STEP_TYPE,
)
"""What a `ControlledLoop` relies on; it requires each when it is made."""


def _check_set_running_loop() -> str | None:
    import asyncio.events

    setter = getattr(asyncio.events, "_set_running_loop", None)
    if not callable(setter):
        return "asyncio.events._set_running_loop is gone"
    if "_set_running_loop" not in asyncio.events.__all__:
        return "asyncio.events no longer exports _set_running_loop"
    return None


SET_RUNNING_LOOP = _entry(
    Entry(
        library="python",
        name="asyncio.events._set_running_loop",
        what="the session-cache machine calls the user's cache factory with the controlled loop set as running "
        "(a cache may build locks or read the loop in __init__), without running a loop step",
        checked="3.11.7, 3.12.1, 3.13.0",
        gain="not a speed entry (not measured): no public call sets the running loop without running the loop; "
        "building the cache from a task would run loop steps before the first rule, so a seed would explore "
        "other schedules",
        fallback="none",
        check=_check_set_running_loop,
    )
)


def set_running_loop(loop: Any) -> None:
    """``asyncio.events._set_running_loop(loop)`` (None: no running loop); `SET_RUNNING_LOOP` is required first."""
    import asyncio.events

    asyncio.events._set_running_loop(loop)


def _check_thread_frames() -> str | None:
    import sys
    import threading

    frames = getattr(sys, "_current_frames", None)
    if not callable(frames):
        return "sys._current_frames is gone"
    found = frames()
    if not isinstance(found, dict) or threading.get_ident() not in found:
        return "sys._current_frames() no longer maps thread ids to frames"
    return None


THREAD_FRAMES = _entry(
    Entry(
        library="python",
        name="sys._current_frames",
        what="the contract suite says where a client's worker thread is blocked when a sync step passes its bound",
        checked="3.11.7, 3.12.1, 3.13.0",
        gain="not a speed entry: no public call gives another thread's frame (faulthandler only writes text)",
        fallback="the report names the blocked thread without its line",
        check=_check_thread_frames,
    )
)


def thread_frame(ident: int | None) -> types.FrameType | None:
    """The frame thread ``ident`` runs now (`THREAD_FRAMES`), or None: gone, unknown, or the shape changed."""
    if ident is None or not usable(THREAD_FRAMES):
        return None
    import sys

    return sys._current_frames().get(ident)


# ==== httpx, httpx2 and h11 ===================================================================================


def _ssl_context_check(library: str) -> Callable[[], str | None]:
    def check() -> str | None:
        transports = importlib.import_module(f"{library}._transports.default")
        make = getattr(transports, "create_ssl_context", None)
        if not callable(make):
            return f"{library}._transports.default has no create_ssl_context"
        if not {"verify", "cert", "trust_env"} <= set(inspect.signature(make).parameters):
            return f"create_ssl_context{inspect.signature(make)} takes no verify, cert and trust_env"
        if "create_ssl_context" not in _names(transports.AsyncHTTPTransport.__init__):
            return "AsyncHTTPTransport.__init__ no longer calls its module's create_ssl_context"
        return None

    return check


_SSL_WHAT = (
    "while an in-process fake routes, the transports' module global is wrapped to build one SSL context per "
    "default configuration instead of loading the CA bundle for every client"
)
_SSL_GAIN = (
    "{share} CPU per client the SDK builds (create_mcp_http_client, 20 clients, process time): about 2.5 "
    "explored examples of the standard race scenario (bench/bench_races.py, ~10 ms) for a client under test that "
    "builds its HTTP client per example; the scenario's own reference client brings its SSL context (no change)"
)

HTTPX_SSL_CONTEXT = _entry(
    Entry(
        library="httpx",
        name="_transports.default.create_ssl_context",
        what=_SSL_WHAT,
        checked="0.28.1",
        gain=_SSL_GAIN.format(share="24.3 -> 0.94 ms (mcp 1.30):"),
        fallback="not wrapped: each client loads its own context (~25 ms each), answers unchanged",
        check=_ssl_context_check("httpx"),
    )
)
HTTPX2_SSL_CONTEXT = _entry(
    Entry(
        library="httpx2",
        name="_transports.default.create_ssl_context",
        what=_SSL_WHAT,
        checked="2.16.2",
        gain=_SSL_GAIN.format(share="26.5 -> 0.73 ms (mcp 2.3):"),
        fallback="not wrapped: each client loads its own context (~25 ms each), answers unchanged",
        check=_ssl_context_check("httpx2"),
    )
)


def default_ssl_context(library: str) -> Entry:
    """The SSL-context entry of ``library`` (``"httpx"`` or ``"httpx2"``)."""
    return HTTPX2_SSL_CONTEXT if library == "httpx2" else HTTPX_SSL_CONTEXT


def _h11_clean_up_check() -> str | None:
    import h11

    hook = getattr(h11.Connection, "_clean_up_response_headers_for_sending", None)
    if not callable(hook):
        return "h11.Connection has no _clean_up_response_headers_for_sending"
    if list(inspect.signature(hook).parameters) != ["self", "response"]:
        return f"_clean_up_response_headers_for_sending{inspect.signature(hook)} is not (self, response)"
    if "_clean_up_response_headers_for_sending" not in _names(h11.Connection.send_with_data_passthrough):
        return "Connection.send_with_data_passthrough no longer calls _clean_up_response_headers_for_sending"
    return None


def _h11_headers_check() -> str | None:
    import h11

    try:
        from h11._headers import Headers
    except ImportError:
        return "h11._headers.Headers is gone"
    items = [(b"X-A", b"x-a", b"1")]
    if list(Headers(items)) != [(b"x-a", b"1")]:
        return "Headers(full_items) does not read as the (lower, value) pairs"
    full = getattr(h11.Response(status_code=200, headers=[("X-A", "1")]).headers, "_full_items", None)
    if full != items:
        return f"Response.headers._full_items is {full!r}, not a list of (raw, lower, value) lines"
    return None


def _h11_state_check() -> str | None:
    import h11

    conn = h11.Connection(h11.SERVER)
    keep_alive = getattr(getattr(conn, "_cstate", None), "keep_alive", None)
    if not isinstance(keep_alive, bool):
        return f"Connection._cstate.keep_alive is {keep_alive!r}, not a bool"
    if getattr(conn, "_request_method", False) is not None:
        return "a fresh Connection has no _request_method = None"
    return None


_H11_GAIN = (
    "10.0% of the server's instructions per SSE tools/call, 1.135M against 1.261M with h11's own Connection "
    "(bench/run.py's 'sse sequential: server CPU per call' row: callgrind on `fake-mcp serve`, 60 calls of a raw "
    "keep-alive client after 20 to warm up; the three names make one shortcut)"
)
_H11_WHAT = (
    "the listener's h11 connection appends Transfer-Encoding: chunked to a streamed answer's head itself "
    "instead of h11 rebuilding and re-validating the header list twice"
)
_H11_FALLBACK = "h11's own Connection (the same bytes, h11's slower path)"


def _h11_entry(name: str, part: str, check: Callable[[], str | None]) -> Entry:
    """One of the three names the shortcut needs (``part``: what it takes from that name)."""
    return _entry(
        Entry(
            library="h11",
            name=name,
            what=f"{_H11_WHAT} ({part})",
            checked="0.16.0",
            gain=_H11_GAIN,
            fallback=_H11_FALLBACK,
            check=check,
        )
    )


H11_CLEAN_UP = _h11_entry(
    "Connection._clean_up_response_headers_for_sending", "the hook overridden", _h11_clean_up_check
)
H11_HEADERS = _h11_entry(
    "_headers.Headers, Headers._full_items",
    "the validated (raw, lower, value) lines read and extended",
    _h11_headers_check,
)
H11_STATE = _h11_entry(
    "Connection._cstate.keep_alive, Connection._request_method",
    "whether the connection is kept alive and the request was not HEAD/CONNECT",
    _h11_state_check,
)
H11_ENTRIES = (H11_CLEAN_UP, H11_HEADERS, H11_STATE)
"""The shortcut needs all three; without any of them the listener uses h11's own `Connection`."""


# ==== uvicorn =================================================================================================


def _uvicorn_protocol_check() -> str | None:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    for name in ("connection_made", "on_response_complete"):
        if not callable(getattr(H11Protocol, name, None)):
            return f"H11Protocol has no {name}"
    if not {"conn", "app"} <= set(_names(H11Protocol.__init__)):
        return "H11Protocol.__init__ sets no conn or app"
    if "transport" not in _names(H11Protocol.connection_made):
        return "H11Protocol.connection_made sets no transport"
    if "on_response_complete" not in _names(H11Protocol.handle_events):
        return "H11Protocol.handle_events no longer hands on_response_complete to the request's cycle"
    return None


UVICORN_PROTOCOL = _entry(
    Entry(
        library="uvicorn",
        name="protocols.http.h11_impl.H11Protocol (subclassed: conn, app, transport, on_response_complete)",
        what=(
            "the listener's protocol gathers an answer's writes into one (the connection's transport wrapped, the "
            "app given it for connection faults) and sends it before uvicorn's end-of-response bookkeeping"
        ),
        checked="0.54.0",
        gain=(
            "writes per answer 2, 3 -> 1, 1 (JSON, SSE); server CPU per SSE call 337-344 -> 296-305 us, 12% "
            "(docs/performance.md, passes 2 and 4, per-thread CPU); the connection faults need the transport"
        ),
        fallback="none (connection faults need the transport)",
        check=_uvicorn_protocol_check,
    )
)


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    """The app of the config `_uvicorn_server_check` builds (never served)."""


def _uvicorn_server_check() -> str | None:
    import uvicorn

    if "sockets" not in inspect.signature(uvicorn.Server.startup).parameters:
        return "Server.startup takes no sockets"
    if not callable(getattr(uvicorn.Server, "main_loop", None)):
        return "Server has no main_loop"
    if "servers" not in _names(uvicorn.Server.startup):
        return "Server.startup sets no servers"
    server = uvicorn.Server(uvicorn.Config(app=_no_app))
    state = getattr(server, "server_state", None)
    if not isinstance(getattr(state, "connections", None), set) or not isinstance(getattr(state, "tasks", None), set):
        return "Server.server_state has no connections and tasks sets"
    if "lifespan_class" not in _names(uvicorn.Config.load):
        return "Config.load sets no lifespan_class"
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if not callable(getattr(H11Protocol, "shutdown", None)):
        return "H11Protocol has no shutdown"
    return None


UVICORN_SERVER = _entry(
    Entry(
        library="uvicorn",
        name="Server.startup(sockets)/main_loop/servers/server_state, Config.lifespan_class, H11Protocol.shutdown",
        what=(
            "the listener runs uvicorn's startup and tick itself and ends the connections itself on stop, instead "
            "of serve()'s should_exit polling and shutdown sleeps"
        ),
        checked="0.54.0",
        gain=(
            "fresh start+stop 150-200 ms -> 1.25 ms, over 99% of bench/run.py's 'start' row (docs/performance.md, "
            "pass 1, wall clock)"
        ),
        fallback="none (uvicorn's public serve() and should_exit: about 200 ms a stop)",
        check=_uvicorn_server_check,
    )
)


# ==== mcp =====================================================================================================


def _mcp_http_client_check() -> str | None:
    from mcp.shared._httpx_utils import create_mcp_http_client

    if "headers" not in inspect.signature(create_mcp_http_client).parameters:
        return f"create_mcp_http_client{inspect.signature(create_mcp_http_client)} takes no headers"
    return None


MCP_HTTP_CLIENT = _entry(
    Entry(
        library="mcp",
        name="shared._httpx_utils.create_mcp_http_client",
        what=(
            "the reference client builds its HTTP client as the SDK's transports build theirs (the defaults of the "
            "installed SDK), to share it between sessions and hook its responses"
        ),
        checked="1.30.0, 2.3.0",
        gain="not a speed-up: the SDK's own defaults per version (no public factory in 1.x or 2.x)",
        fallback="AsyncClient(timeout=Timeout(30.0, read=300.0), headers=headers): what 1.30 and 2.3 build",
        check=_mcp_http_client_check,
    )
)


def mcp_http_client_factory(http_module: str) -> Callable[..., Any]:
    """The SDK's HTTP-client factory, or the public build of what it makes (``http_module``: httpx or httpx2)."""
    if usable(MCP_HTTP_CLIENT):
        from mcp.shared._httpx_utils import create_mcp_http_client

        return create_mcp_http_client
    http = importlib.import_module(http_module)

    def create_http_client(headers: dict[str, str] | None = None) -> Any:
        return http.AsyncClient(timeout=http.Timeout(30.0, read=300.0), headers=headers)

    return create_http_client


# ==== hypothesis ==============================================================================================
_METHOD = (
    "callgrind, instructions per explored example of bench_races.py's standard scenario: reference client, seed "
    "12345, generate phase only, no database; the slope between 10 and 40 examples; Python 3.11.7, mcp 2.x"
)


def _check_choice_draws() -> str | None:
    from hypothesis.internal.conjecture.data import ConjectureData
    from hypothesis.strategies import DataObject

    marker = object()
    if getattr(DataObject(marker), "conjecture_data", None) is not marker:  # type: ignore[arg-type]
        return "st.data()'s DataObject no longer keeps its ConjectureData as .conjecture_data"
    for method, wanted in (("draw_integer", ("min_value", "max_value")), ("draw_boolean", ())):
        function = getattr(ConjectureData, method, None)
        if function is None:
            return f"ConjectureData.{method} is gone"
        parameters = inspect.signature(function).parameters
        missing = [name for name in wanted if name not in parameters]
        if missing:
            return f"ConjectureData.{method} no longer takes {', '.join(missing)}"
    return None


CHOICE_DRAWS = _entry(
    Entry(
        library="hypothesis",
        name="DataObject.conjecture_data.draw_integer / .draw_boolean",
        what="the race engine's own integers and booleans (the schedule, each request's hold, session losses, "
        "explored points) straight from the example's choice sequence, without data.draw's span, "
        "random-state check and note around each",
        checked="6.100.0, 6.170.17",
        gain="races row: 29.2M instructions per explored example, 32.3M through data.draw(st.integers(...)) and "
        "data.draw(st.booleans()): the public path costs 10.7% more (" + _METHOD + ")",
        fallback="data.draw(st.integers(low, high)) / data.draw(st.booleans()), and the schedule drawn with "
        "schedules(): the same kinds of schedule, but a seed explores others",
        check=_check_choice_draws,
    )
)


def choice_draws(data: Any) -> tuple[Callable[[int, int], int], Callable[[], bool]] | None:
    """``(draw_integer, draw_boolean)`` of the example behind ``st.data()``'s ``data``; None: use strategies."""
    if not usable(CHOICE_DRAWS):
        return None
    conjecture = data.conjecture_data
    return conjecture.draw_integer, conjecture.draw_boolean


def _check_is_final() -> str | None:
    from hypothesis import control

    if not callable(getattr(control, "current_build_context", None)):
        return "hypothesis.control.current_build_context is gone"
    context = getattr(control, "BuildContext", None)
    if context is None or "is_final" not in inspect.signature(context.__init__).parameters:
        return "hypothesis.control.BuildContext no longer takes is_final"
    return None


BUILD_CONTEXT_IS_FINAL = _entry(
    Entry(
        library="hypothesis",
        name="hypothesis.control.current_build_context().is_final",
        what="tells the example Hypothesis reports (its final replay) from the search's others, so only that "
        "one is described: the schedule in words, each out-of-order step's place, each draw as a note",
        checked="6.100.0, 6.170.17",
        gain="races row: 29.2M instructions per explored example, 36.3M when every example is described: "
        "the fallback costs 24% more (" + _METHOD + ")",
        fallback="every example is described as if reported (the same report, the search slower)",
        check=_check_is_final,
    )
)


def reporting_example() -> bool:
    """Is the current example the one Hypothesis reports (True outside an example, or without `BUILD_CONTEXT_IS_FINAL`)?

    Verbose output reports every example; `hypothesis.settings.default` is public.
    """
    if not usable(BUILD_CONTEXT_IS_FINAL):
        return True
    from hypothesis import Verbosity, settings
    from hypothesis.control import current_build_context
    from hypothesis.errors import InvalidArgument

    try:
        context = current_build_context()
    except InvalidArgument:  # not inside a Hypothesis example: describe everything
        return True
    current = settings.default
    return bool(context.is_final) or (current is not None and current.verbosity >= Verbosity.verbose)


def _check_example_blob() -> str | None:
    from hypothesis import core
    from hypothesis.internal.conjecture.data import ConjectureData
    from hypothesis.strategies import DataObject

    marker = object()
    if getattr(DataObject(marker), "conjecture_data", None) is not marker:  # type: ignore[arg-type]
        return "st.data()'s DataObject no longer keeps its ConjectureData as .conjecture_data"
    if not isinstance(getattr(ConjectureData, "choices", None), property):
        return "ConjectureData.choices is no longer a property"
    encode = getattr(core, "encode_failure", None)
    if encode is None or list(inspect.signature(encode).parameters) != ["choices"]:
        return "hypothesis.core.encode_failure(choices) is gone"
    try:
        core.decode_failure(encode([1, True]))
    except Exception as error:
        return f"encode_failure's blob no longer decodes ({error!r})"
    return None


EXAMPLE_CHOICES_BLOB = _entry(
    Entry(
        library="hypothesis",
        name="DataObject.conjecture_data.choices and hypothesis.core.encode_failure",
        what="a race search that has shrunk past its time bound stops Hypothesis and replays the smallest failing "
        "example so far (as @reproduce_failure would, from its choices' blob), so its report is the one shown",
        checked="6.125.0, 6.170.17",
        gain="a feature, not speed: no public API ends shrinking early, and rejecting examples once the bound has "
        "passed trips Hypothesis's flaky-generation check (a replay that stops drawing early)",
        fallback="shrinking runs as long as Hypothesis lets it (its own bound: five minutes)",
        check=_check_example_blob,
    )
)


def example_blob(data: Any) -> tuple[str, bytes] | None:
    """``(version, blob)`` that ``reproduce=`` replays: the choices of the finished example behind ``st.data()``'s
    ``data``; None without `EXAMPLE_CHOICES_BLOB`."""
    if not usable(EXAMPLE_CHOICES_BLOB):
        return None
    import hypothesis
    from hypothesis import core

    return hypothesis.__version__, core.encode_failure(data.conjecture_data.choices)


def example_choices(data: Any) -> tuple[Any, ...] | None:
    """The choices of the finished example behind ``st.data()``'s ``data`` (to compare sizes); None without
    `EXAMPLE_CHOICES_BLOB`."""
    if not usable(EXAMPLE_CHOICES_BLOB):
        return None
    return tuple(data.conjecture_data.choices)


_STACKED_PREFIX: Final = "_hypothesis_internal_"
_SET_BY_PLUGIN: Final = frozenset({"_hypothesis_internal_use_settings"})
"""What Hypothesis's pytest plugin itself sets on a test it knows (for parametrized fixtures): not a decorator."""


def _check_test_marks() -> str | None:
    from hypothesis import seed, settings

    try:
        from hypothesis.internal.detection import is_hypothesis_test  # public as hypothesis.is_hypothesis_test later
    except ImportError:
        return "hypothesis.internal.detection.is_hypothesis_test is gone"

    def probe() -> None: ...

    probe.is_hypothesis_test = True  # type: ignore[attr-defined]
    if not is_hypothesis_test(probe):
        return "is_hypothesis_test no longer reads a test's is_hypothesis_test attribute"
    decorated = seed(0)(settings(max_examples=1)(lambda: None))
    if not {"_hypothesis_internal_use_seed", "_hypothesis_internal_settings_applied"} <= set(vars(decorated)):
        return "@seed / @settings no longer mark the test they decorate with _hypothesis_internal_* attributes"
    return None


PYTEST_PLUGIN_TEST_MARKS = _entry(
    Entry(
        library="hypothesis",
        name="a test's is_hypothesis_test / .hypothesis.inner_test, and the _hypothesis_internal_* marks of "
        "@settings, @seed and @reproduce_failure",
        what="Hypothesis's pytest plugin treats a @race_test as a Hypothesis test (--hypothesis-show-statistics, "
        "--hypothesis-seed); a Hypothesis decorator stacked on @race_test is refused naming the race_test "
        "argument to use instead, rather than silently ignored",
        checked="6.100.0 (its plugin prints a race test's statistics section empty), 6.170.17",
        gain="a feature, not speed: no public API lets a test that calls @given inside it join the plugin's "
        "statistics, or tells a stacked @seed from none",
        fallback="race tests are not marked: the plugin prints no statistics for them and itself refuses a "
        "@settings/@seed stacked on one as pointless without @given",
        check=_check_test_marks,
    )
)


class _InnerTest:
    """What Hypothesis's pytest plugin reads of a test's ``.hypothesis``: ``inner_test``, the explored scenario."""

    def __init__(self, inner_test: Callable[..., Any]) -> None:
        self.inner_test = inner_test


def mark_hypothesis_test(test: Callable[..., Any], inner: Callable[..., Any]) -> None:
    """Let Hypothesis's pytest plugin know ``test`` (which runs a search of ``inner``) as a Hypothesis test."""
    if not usable(PYTEST_PLUGIN_TEST_MARKS):
        return
    test.is_hypothesis_test = True  # type: ignore[attr-defined]
    test.hypothesis = _InnerTest(inner)  # type: ignore[attr-defined]


def stacked_hypothesis_decorators(test: Callable[..., Any]) -> list[str]:
    """The marks Hypothesis decorators (``@settings``, ``@seed``, ``@reproduce_failure``) left on ``test``."""
    if not usable(PYTEST_PLUGIN_TEST_MARKS):
        return []
    return sorted(name for name in vars(test) if name.startswith(_STACKED_PREFIX) and name not in _SET_BY_PLUGIN)
