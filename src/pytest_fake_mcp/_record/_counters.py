"""Counting the HTTP clients a test creates: httpx and httpx2, sync and async.

An MCP client that builds a new HTTP client per call pays tens of milliseconds each time and opens a
new connection pool. `HTTPClientCounter` records every `httpx.Client`, `httpx.AsyncClient`,
`httpx2.Client` and `httpx2.AsyncClient` built while it is installed. That includes subclasses and the
clients the MCP SDK builds for you (mcp 1.x on httpx, mcp 2.x on httpx2). For each client it records
where it was built, whether it was closed and which origins it sent requests to.

Only clients are counted here. One client opens several pooled TCP connections, so connections are a
separate figure, reported by the fake server, which is the side that can see them.

The first counter installed patches `__init__`, `send` and the closing methods (`close`/`__exit__`,
`aclose`/`__aexit__`) of those classes, and the last one uninstalled restores them exactly. Because
every counter shares the same patches, counters can be nested and uninstalled in any order.

Size: over the 400-line soft cap. The seams are the class patches (`_ClassHooks` and the `_wrap_*`
functions, a future `_client_hooks.py`) and the two renderers at the end, which move to `_report.py`
once it takes `HTTPClientRecord`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import importlib
import inspect
import os
import sysconfig
import threading
import weakref
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from .._wire._errors import LifecycleError
from .._wire._roles import building_role

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType, TracebackType

__all__ = [
    "HTTPClientCounter",
    "HTTPClientRecord",
    "http_client_counter",
    "http_client_hooks_kept",
    "render_left_open",
]

_LIBRARIES: Final = ("httpx", "httpx2")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_STACK_LINES: Final = 3
_LOOP_DRIVERS: Final = frozenset({"run_forever", "run_until_complete"})
"""The public methods of an event loop that run its tasks: a task's own stack ends at them."""
_REUSE_HINT: Final = (
    "Hint: build one HTTP client and pass it to each transport (streamable_http_client(url, http_client=...))."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPClientRecord:
    """One HTTP client built while a counter was installed, as it was when the snapshot was taken.

    `HTTPClientCounter.created` takes new snapshots each time it is read, so `closed` and `origins`
    reflect the moment of that read.
    """

    number: int
    """1-based creation order within the counter."""
    library: Literal["httpx", "httpx2"]
    class_name: str
    """Qualified name of the client's own class: `AsyncClient`, or a subclass such as `RetryingClient`."""
    is_async: bool
    created_at: tuple[str, ...]
    """Innermost frames first, as `path:line in function`: user code only, at most three."""
    built_by: str | None = None
    """The library call that built it, when user code did not build it directly: the installed package's frame the
    first user frame called (`google/adk/tools/mcp_tool/mcp_tool.py:120 in McpTool.run_async`), else None."""
    role: str | None = None
    """Not the code under test's: `HeadlessOAuth`'s stand-in browser, which `assert_created` lists but never counts;
    else None."""
    closed: bool
    collected: bool
    """The client was garbage-collected. With `closed=False`, it was never closed."""
    closed_at_loop_shutdown: bool = False
    """Closed only as its event loop shut down: `asyncio.Runner.close()` (which `asyncio.run`, pytest-asyncio and
    anyio end with) cancelled the task that held it open, or finalized its generator. The code that built it
    had left it open; the leak check of `fake_mcp_server` counts it as left open."""
    origins: tuple[str, ...]
    """`scheme://host:port` of each origin the client sent a request to, in first-use order."""

    @property
    def type_name(self) -> str:
        """`httpx2.AsyncClient`, or `RetryingClient(httpx2.AsyncClient)` for a subclass."""
        base = f"{self.library}.{'AsyncClient' if self.is_async else 'Client'}"
        return base if base.endswith(f".{self.class_name}") else f"{self.class_name}({base})"

    @property
    def state(self) -> Literal["closed", "OPEN", "LEAKED"]:
        """`LEAKED` is a client that was garbage-collected without being closed."""
        if self.closed:
            return "closed"
        return "LEAKED" if self.collected else "OPEN"

    def talked_to(self, url: str) -> bool:
        """Whether the client sent a request to the origin of `url` (its path is ignored)."""
        return _origin_of(url, "url") in self.origins

    def __str__(self) -> str:
        return f"{self.type_name} #{self.number}, {self.state}, {_talked(self)}, {_where(self)}"


class _ClientTracker:
    """The mutable side of a record: written by the patched methods, read when taking a snapshot."""

    __slots__ = (
        "built_by",
        "class_name",
        "closed",
        "closed_at_loop_shutdown",
        "created_at",
        "is_async",
        "library",
        "number",
        "origins",
        "ref",
        "role",
    )

    def __init__(
        self,
        ref: weakref.ref[Any],
        *,
        library: Literal["httpx", "httpx2"],
        class_name: str,
        is_async: bool,
        created_at: tuple[str, ...],
        built_by: str | None = None,
        role: str | None = None,
    ) -> None:
        self.ref = ref  # a weak reference, so that counting never keeps a client alive
        self.library: Literal["httpx", "httpx2"] = library
        self.class_name = class_name
        self.is_async = is_async
        self.created_at = created_at
        self.built_by = built_by
        self.role = role
        self.number = 0
        self.closed = False  # set by the patched closing methods, so it survives garbage collection
        self.closed_at_loop_shutdown = False
        self.origins: dict[str, None] = {}  # an ordered set; one setdefault per request, atomic under the GIL

    def snapshot(self) -> HTTPClientRecord:
        client = self.ref()
        return HTTPClientRecord(
            number=self.number,
            library=self.library,
            class_name=self.class_name,
            is_async=self.is_async,
            created_at=self.created_at,
            built_by=self.built_by,
            role=self.role,
            closed=self.closed or (client is not None and bool(client.is_closed)),
            collected=client is None,
            closed_at_loop_shutdown=self.closed_at_loop_shutdown,
            origins=tuple(self.origins.copy()),
        )


class _State(enum.Enum):
    UNINSTALLED = "UNINSTALLED"  # not counting: new, or after uninstall()
    INSTALLED = "INSTALLED"  # counting every client constructed


class HTTPClientCounter:
    """Records every httpx/httpx2 client constructed while installed.

    Use it through the `mcp_http_clients` fixture, or as a context manager:

        with HTTPClientCounter() as clients:
            run_my_agent(fake_mcp_server.url)
        clients.assert_created(1, talked_to=fake_mcp_server.url)
        clients.assert_all_closed()
    """

    def __init__(self) -> None:
        self._state = _State.UNINSTALLED
        self._lock = threading.Lock()
        self._created: list[_ClientTracker] = []
        self._live: dict[int, _ClientTracker] = {}  # by id(client); each entry leaves when its client dies

    def __repr__(self) -> str:
        return f"HTTPClientCounter(state={self._state.name}, count={self.count})"

    def install(self) -> None:
        """Start counting. Raises LifecycleError (a RuntimeError) if already installed."""
        if self._state is _State.INSTALLED:
            raise LifecycleError(
                f"Cannot install HTTPClientCounter: already INSTALLED with {self.count} client(s) counted; "
                "call uninstall() first, or use a second counter."
            )
        _HOOKS.add(self)
        self._state = _State.INSTALLED

    def uninstall(self) -> None:
        """Stop counting; the records stay readable. Raises LifecycleError (a RuntimeError) if not installed."""
        if self._state is not _State.INSTALLED:
            raise LifecycleError("Cannot uninstall HTTPClientCounter: it is UNINSTALLED; call install() first.")
        self._state = _State.UNINSTALLED
        _HOOKS.remove(self)

    def __enter__(self) -> HTTPClientCounter:
        self.install()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.uninstall()

    @property
    def created(self) -> tuple[HTTPClientRecord, ...]:
        """A snapshot of every client created so far, in creation order."""
        with self._lock:
            trackers = tuple(self._created)
        return tuple(tracker.snapshot() for tracker in trackers)

    @property
    def count(self) -> int:
        """How many clients were created so far."""
        return len(self._created)

    def clients_for(self, url: str) -> tuple[HTTPClientRecord, ...]:
        """The clients that sent at least one request to the origin of `url` (its path is ignored)."""
        origin = _origin_of(url, "url")
        return tuple(record for record in self.created if origin in record.origins)

    def assert_created(
        self, n: int, *, library: Literal["httpx", "httpx2"] | None = None, talked_to: str | None = None
    ) -> None:
        """Assert that exactly `n` HTTP clients were created, optionally only counting some.

        Args:
            n: the expected number of clients.
            library: count only clients of `"httpx"` or `"httpx2"`; None counts both.
            talked_to: count only clients that sent a request to this URL's origin; None counts all.

        Raises:
            AssertionError: if the number of matching clients is not `n`. The message lists every client.
            ValueError: if `n` is negative, `library` is unknown or `talked_to` is not an absolute URL.

        Example:
            mcp_http_clients.assert_created(1, talked_to=fake_mcp_server.url)
        """
        __tracebackhide__ = True
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n={n!r} must be an int >= 0")
        if library is not None and library not in _LIBRARIES:
            raise ValueError(f"library={library!r} must be 'httpx', 'httpx2' or None (both)")
        origin = None if talked_to is None else _origin_of(talked_to, "talked_to")
        records = self.created
        reasons = [_excluded_because(record, library, origin) for record in records]
        found = reasons.count(None)
        if found != n:
            raise AssertionError(_render_created(n, library, talked_to, records, reasons))

    def assert_all_closed(self) -> None:
        """Assert that every HTTP client created so far has been closed.

        A client garbage-collected without being closed counts as not closed (shown as LEAKED).

        Raises:
            AssertionError: if any client is open or was collected unclosed. The message lists every client.

        Example:
            mcp_http_clients.assert_all_closed()
        """
        __tracebackhide__ = True
        records = self.created
        unclosed = [record for record in records if not record.closed]
        if unclosed:
            raise AssertionError(_render_unclosed(records, len(unclosed)))

    def _begin(self, client: Any, tracker_args: dict[str, Any]) -> _ClientTracker | None:
        """Track a client whose __init__ is starting; None if an outer __init__ already tracks it."""
        key = id(client)
        current = self._live.get(key)
        if current is not None and current.ref() is client:
            return None
        tracker = _ClientTracker(weakref.ref(client, self._forget_callback(key)), **tracker_args)
        self._live[key] = tracker
        return tracker

    def _commit(self, tracker: _ClientTracker) -> None:
        with self._lock:
            self._created.append(tracker)
            tracker.number = len(self._created)

    def _abandon(self, client: Any, tracker: _ClientTracker) -> None:
        """Forget a client whose __init__ raised: it was never created."""
        if self._live.get(id(client)) is tracker:
            self._live.pop(id(client), None)

    def _tracker_for(self, client: Any) -> _ClientTracker | None:
        tracker = self._live.get(id(client))
        return tracker if tracker is not None and tracker.ref() is client else None

    def _forget_callback(self, key: int) -> Callable[[weakref.ref[Any]], None]:
        def forget(ref: weakref.ref[Any]) -> None:
            tracker = self._live.get(key)
            if tracker is not None and tracker.ref is ref:
                self._live.pop(key, None)

        return forget


@contextlib.contextmanager
def http_client_counter() -> Iterator[HTTPClientCounter]:
    """Install a new `HTTPClientCounter` for the duration of the block; the `mcp_http_clients` fixture.

    Example:
        with http_client_counter() as clients:
            httpx.Client().close()
        clients.assert_created(1)
    """
    counter = HTTPClientCounter()
    counter.install()
    try:
        yield counter
    finally:
        counter.uninstall()


@contextlib.contextmanager
def http_client_hooks_kept() -> Iterator[None]:
    """Keep the class patches installed for the block, whether or not a counter is installed meanwhile.

    For a run of many short counters (a race test installs one per example): patching and restoring
    the classes each time would cost more than the example's counting, and a counter kept installed
    for the whole block would record every client of every example. Example:

        with http_client_hooks_kept():
            for _ in range(100):
                with HTTPClientCounter() as clients:
                    run_one_example()
    """
    _HOOKS.keep()
    try:
        yield
    finally:
        _HOOKS.release()


class _ClassHooks:
    """The class-level patches every installed counter shares: added by the first, removed by the last.

    `http_client_hooks_kept` holds them installed between counters too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: tuple[HTTPClientCounter, ...] = ()  # replaced, never mutated: read without the lock
        self._kept = 0
        self._saved: list[tuple[type, str, object]] = []
        self._wrappers: dict[tuple[type, str], tuple[object, object]] = {}  # (original, its wrapper), built once
        self._never: tuple[str, ...] = ()  # path prefixes of httpx, httpx2 and this package
        self._library: tuple[str, ...] = ()  # path prefixes of the stdlib and installed packages
        self._installed: tuple[str, ...] = ()  # the installed packages' alone (a venv's stdlib path holds them)
        self._cwd = ""
        self._files: dict[str, tuple[bool, str] | None] = {}  # path -> (is_library, as shown), None: never shown

    def add(self, counter: HTTPClientCounter) -> None:
        with self._lock:
            if not self.counters and not self._kept:
                self._patch_all()
            self.counters = (*self.counters, counter)

    def remove(self, counter: HTTPClientCounter) -> None:
        with self._lock:
            self.counters = tuple(c for c in self.counters if c is not counter)
            if not self.counters and not self._kept:
                self._restore_all()

    def keep(self) -> None:
        with self._lock:
            if not self.counters and not self._kept:
                self._patch_all()
            self._kept += 1

    def release(self) -> None:
        with self._lock:
            self._kept -= 1
            if not self.counters and not self._kept:
                self._restore_all()

    def _patch_all(self) -> None:
        package_dir = os.path.dirname(os.path.abspath(__file__))
        never = [package_dir + os.sep]
        seen: set[type] = set()
        try:
            for name in _LIBRARIES:
                try:
                    module = importlib.import_module(name)
                except ImportError:
                    continue
                if module_file := getattr(module, "__file__", None):
                    never.append(os.path.dirname(os.path.abspath(module_file)) + os.sep)
                for class_name, is_async in (("Client", False), ("AsyncClient", True)):
                    cls = getattr(module, class_name)
                    if cls in seen:  # httpx2 can register itself under the name httpx
                        continue
                    seen.add(cls)
                    root = cls.__module__.partition(".")[0]
                    self._patch_class(cls, root if root in _LIBRARIES else name, is_async)
        except BaseException:
            self._restore_all()
            raise
        if not self._library:  # once per process: sysconfig costs more than the rest of a patch (issue 25)
            paths = sysconfig.get_paths()
            self._library = tuple(
                {os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")}
            )
            self._installed = tuple({os.path.abspath(paths[key]) + os.sep for key in ("purelib", "platlib")})
        cwd = os.getcwd() + os.sep
        if tuple(never) != self._never or cwd != self._cwd:
            self._never = tuple(never)
            self._cwd = cwd
            self._files = {}

    def _patch_class(self, cls: type, library: str, is_async: bool) -> None:
        # Each fake_mcp_server test installs a counter (its teardown's leak check), so a patch is per test:
        # the wrappers are built once per original method, not each time.
        self._set(cls, "__init__", lambda original: _wrap_init(original, library, is_async))
        if is_async:
            self._set(cls, "send", _wrap_async_send)
            for name in ("aclose", "__aexit__"):
                self._set(cls, name, _wrap_async_close)
        else:
            self._set(cls, "send", _wrap_send)
            for name in ("close", "__exit__"):
                self._set(cls, name, _wrap_close)

    def _set(self, cls: type, name: str, wrap: Callable[[Callable[..., Any]], object]) -> None:
        original = getattr(cls, name)
        built = self._wrappers.get((cls, name))
        if built is None or built[0] is not original:
            built = self._wrappers[(cls, name)] = (original, wrap(original))
        self._saved.append((cls, name, cls.__dict__.get(name, _ABSENT)))
        setattr(cls, name, built[1])

    def _restore_all(self) -> None:
        while self._saved:
            cls, name, original = self._saved.pop()
            if original is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, original)

    def creation_stack(self) -> tuple[tuple[str, ...], str | None]:
        """The innermost user frames of the current stack; library frames only if there are none.

        In a task, the stack ends where the event loop runs it: the frames below (pytest's, or a test that runs
        pytest in-process) did not build the client. A library's task, with no user frame of its own, is placed
        at the line of the user's task awaiting it (:meth:`_awaiting_test`).
        """
        user: list[str] = []
        fallback: list[str] = []
        called: str | None = None  # the installed package's frame nearest the first user frame (built_by)
        files = self._files  # each file is classified once: a race test builds a client per example, deep down
        frame = inspect.currentframe()
        frame = frame.f_back if frame is not None else None  # the caller's
        while frame is not None and len(user) < _STACK_LINES:
            if frame.f_code.co_name in _LOOP_DRIVERS and isinstance(
                frame.f_locals.get("self"), asyncio.AbstractEventLoop
            ):
                break
            path = frame.f_code.co_filename
            try:
                file = files[path]
            except KeyError:
                file = files[path] = self._classify(path)
            if file is not None:
                is_library, shown = file
                line = f"{shown}:{frame.f_lineno} in {frame.f_code.co_qualname}"
                if is_library and not user and path.startswith(self._installed):
                    called = line
                if not is_library or len(fallback) < _STACK_LINES:
                    (fallback if is_library else user).append(line)
            frame = frame.f_back
        if user:
            return tuple(user), called
        awaiting = self._awaiting_test()
        return (tuple(awaiting), called) if awaiting else (tuple(fallback), None)  # called: the task's library

    def _awaiting_test(self) -> list[str]:
        """The user frames of the one other task awaiting in user code, when a library's own task (no user frame
        on its stack: FastMCP's session runner, an SDK task group) builds the client: that task awaits on the
        user's behalf. Nothing if no task or several tasks await in user code (it cannot tell whose it is)."""
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop: a thread
            return []
        if current is None:
            return []
        found: list[list[str]] = []
        for task in asyncio.all_tasks():
            if task is not current and (lines := self._user_lines(task.get_coro())):
                found.append(lines)
        return found[0] if len(found) == 1 else []

    def _user_lines(self, awaitable: object) -> list[str]:
        """The user frames along a suspended coroutine's await chain, innermost first (at most three)."""
        frames: list[FrameType] = []
        while awaitable is not None and len(frames) < 64:
            for name in ("cr_frame", "gi_frame", "ag_frame"):
                frame = getattr(awaitable, name, None)
                if frame is not None:
                    frames.append(frame)
                    break
            awaitable = next(
                (v for n in ("cr_await", "gi_yieldfrom", "ag_await") if (v := getattr(awaitable, n, None)) is not None),
                None,
            )
        lines: list[str] = []
        for frame in reversed(frames):
            path = frame.f_code.co_filename
            if path not in self._files:
                self._files[path] = self._classify(path)
            file = self._files[path]
            if file is not None and not file[0] and len(lines) < _STACK_LINES:
                lines.append(f"{file[1]}:{frame.f_lineno} in {frame.f_code.co_qualname}")
        return lines

    def _classify(self, path: str) -> tuple[bool, str] | None:
        if path.startswith(self._never):
            return None
        return path.startswith(self._library) or path.startswith("<"), self._display(path)

    def _display(self, path: str) -> str:
        # An installed package by its import path first: a venv inside the project (.venv/) is still installed.
        _, marker, inside = path.rpartition(f"site-packages{os.sep}")
        if marker:
            return inside
        if path.startswith(self._cwd):
            return path[len(self._cwd) :]
        return path


_ABSENT: Final = object()
_HOOKS: Final = _ClassHooks()
_ORIGINS: dict[tuple[str, str, int | None], str] = {}  # (scheme, host, port) -> its origin, as _format_origin gives
_ORIGINS_KEPT: Final = 256


def _wrap_init(original: Callable[..., None], library: str, is_async: bool) -> Callable[..., None]:
    @wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        counters = _HOOKS.counters
        fresh: list[tuple[HTTPClientCounter, _ClientTracker]] = []
        if counters:
            created_at, built_by = _HOOKS.creation_stack()
            tracker_args = {
                "library": library,
                "class_name": type(self).__qualname__,
                "is_async": is_async,
                "created_at": created_at,
                "built_by": built_by,
                "role": building_role(),
            }
            for counter in counters:
                tracker = counter._begin(self, tracker_args)
                if tracker is not None:
                    fresh.append((counter, tracker))
        try:
            original(self, *args, **kwargs)
        except BaseException:
            for counter, tracker in fresh:
                counter._abandon(self, tracker)
            raise
        for counter, tracker in fresh:
            counter._commit(tracker)

    return __init__


def _note_request(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # On every request a counted client sends: each origin formatted once.
    origin = None
    for counter in _HOOKS.counters:
        tracker = counter._tracker_for(client)
        if tracker is not None:
            if origin is None:
                url = (args[0] if args else kwargs["request"]).url
                parts = (url.scheme, url.host, url.port)
                origin = _ORIGINS.get(parts)
                if origin is None:
                    if len(_ORIGINS) >= _ORIGINS_KEPT:
                        _ORIGINS.clear()
                    origin = _ORIGINS[parts] = _format_origin(*parts)
            tracker.origins.setdefault(origin, None)


def _note_closed(client: Any) -> None:
    at_shutdown: bool | None = None
    for counter in _HOOKS.counters:
        tracker = counter._tracker_for(client)
        if tracker is not None and not tracker.closed and getattr(client, "is_closed", False):
            tracker.closed = True
            if at_shutdown is None:
                at_shutdown = _in_loop_shutdown()
            tracker.closed_at_loop_shutdown = at_shutdown


_RUNNER_CLOSE: Final = asyncio.Runner.close.__code__


def _in_loop_shutdown() -> bool:
    """Whether ``asyncio.Runner.close()`` is on the stack: the loop is shutting down, cancelling the tasks that were
    left running and finalizing their generators (the public method drives the loop itself, so its frame is below
    every task step it runs)."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code is _RUNNER_CLOSE:
            return True
        frame = frame.f_back
    return False


def _wrap_send(original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        _note_request(self, args, kwargs)
        return original(self, *args, **kwargs)

    return send


def _wrap_async_send(original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    async def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        _note_request(self, args, kwargs)
        return await original(self, *args, **kwargs)

    return send


def _wrap_close(original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    def close(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        finally:
            _note_closed(self)

    return close


def _wrap_async_close(original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    async def aclose(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        finally:
            _note_closed(self)

    return aclose


def _format_origin(scheme: str, host: str, port: int | None) -> str:
    if port is None:
        port = _DEFAULT_PORTS.get(scheme)
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" if port is None else f"{scheme}://{host}:{port}"


def _origin_of(url: str, argument: str) -> str:
    parts = urlsplit(str(url))
    try:
        port = parts.port  # raises ValueError for a port that is not a number in 0-65535
    except ValueError:
        port = None
        parts = parts._replace(scheme="")
    if not parts.scheme or not parts.hostname:
        raise ValueError(
            f"{argument}={url!r} is not an absolute URL with a valid port; "
            "pass the server's URL, e.g. fake_mcp_server.url"
        )
    return _format_origin(parts.scheme.lower(), parts.hostname, port)


def _excluded_because(record: HTTPClientRecord, library: str | None, origin: str | None) -> str | None:
    if record.role is not None:
        return record.role
    if library is not None and record.library != library:
        return f"library {record.library!r} != {library!r}"
    if origin is not None and origin not in record.origins:
        return f"sent nothing to {origin}"
    return None


def _talked(record: HTTPClientRecord) -> str:
    return f"talked to {', '.join(record.origins)}" if record.origins else "sent no requests"


def _where(record: HTTPClientRecord) -> str:
    where = f"created at {record.created_at[0]}" if record.created_at else "created at <unknown>"
    return f"{where} (inside {record.built_by})" if record.built_by else where


def _rows(records: tuple[HTTPClientRecord, ...], notes: list[str | None]) -> list[str]:
    number_width = max(len(str(record.number)) for record in records)
    type_width = max(len(record.type_name) for record in records)
    talked_width = max(len(_talked(record)) for record in records)
    rows = []
    for record, note in zip(records, notes, strict=True):
        row = (
            f"  #{record.number:<{number_width}} {record.type_name:<{type_width}}  {record.state:<6}  "
            f"{_talked(record):<{talked_width}}   {_where(record)}"
        )
        rows.append(f"{row}   not counted: {note}" if note else row)
    return rows


def _clients(n: int, kind: str = "HTTP client") -> str:
    return f"{n} {kind}" if n == 1 else f"{n} {kind}s"


def _was(n: int) -> str:
    return "was" if n == 1 else "were"


def _render_created(
    n: int,
    library: str | None,
    talked_to: str | None,
    records: tuple[HTTPClientRecord, ...],
    reasons: list[str | None],
) -> str:
    found = reasons.count(None)
    filters = "".join(
        f", {name}={value!r}" for name, value in (("library", library), ("talked_to", talked_to)) if value
    )
    if library is None and talked_to is None:
        summary = f"{_clients(found)} {_was(found)} created, expected {n}."
    else:
        kind = "matching HTTP client"
        summary = f"{_clients(found, kind)} {_was(found)} created ({len(records)} in all), expected {n}."
    lines = [f"assert_created({n}{filters}): {summary}"]
    if records:
        lines += _rows(records, reasons)
    if found > n:
        lines.append(_reuse_hint([r for r, why in zip(records, reasons, strict=True) if why is None]))
    elif not records:
        lines.append(
            "Hint: only clients built while mcp_http_clients is active are counted; one built earlier "
            "(in a session-scoped fixture or at import time) is not."
        )
    elif talked_to is not None:
        lines.append("Hint: a client matches talked_to only after it has sent a request to that origin.")
    else:
        lines.append("Hint: mcp 1.x builds httpx clients and mcp 2.x builds httpx2 clients.")
    return "\n".join(lines)


def _reuse_hint(counted: list[HTTPClientRecord]) -> str:
    """Build one and pass it on, where the user builds the transports; else, what the library that built them
    does (the SDK's own transports take ``http_client=``; a framework's may not)."""
    libraries = sorted({_package(r.built_by) for r in counted if r.built_by and _package(r.built_by) != "mcp"})
    if not libraries:
        return _REUSE_HINT
    return (
        f"Hint: {' and '.join(libraries)} built these clients (the `inside` frames above): see whether it can share "
        "one HTTP client, or when it builds one (per session, per connection attempt, an OAuth discovery probe). "
        "To check there is none per call, compare `mcp_http_clients.count` before and after the calls."
    )


def _package(frame: str) -> str:
    """The top-level package of a shown frame (``mcp_use/client/client.py:325 in …`` -> ``mcp_use``)."""
    return frame.split("/", 1)[0].split(":", 1)[0]


def _render_unclosed(records: tuple[HTTPClientRecord, ...], unclosed: int) -> str:
    lines = [f"assert_all_closed(): {unclosed} of {_clients(len(records))} {_was(unclosed)} not closed."]
    lines += _rows(records, [None] * len(records))
    lines.append(
        "Hint: close each client you build (`async with httpx2.AsyncClient() as client:` or "
        "`await client.aclose()`); the SDK never closes a client passed as http_client=. "
        "LEAKED means garbage-collected without close()."
    )
    return "\n".join(lines)


def render_left_open(records: tuple[HTTPClientRecord, ...], sessions: list[str], where: str) -> str:
    """The leak report of a test's teardown: ``records`` are the clients left open (still open, or closed only as
    the event loop shut down), ``sessions`` name the sessions the server still holds without a DELETE (already
    worded), ``where`` is the test."""
    n = len(records)
    lines = [f"{_clients(n)} that talked to the fake MCP server {_was(n)} left open by the test ({where}):"]
    rows = _rows(records, [None] * n)
    lines += [
        f"{row}   closed only as the event loop shut down" if record.closed_at_loop_shutdown else row
        for row, record in zip(rows, records, strict=True)
    ]
    if sessions:
        held = "session" if len(sessions) == 1 else "sessions"
        lines.append(f"The fake still holds {len(sessions)} {held} that got no DELETE: {', '.join(sessions)}.")
    if any(record.closed_at_loop_shutdown for record in records):
        lines.append(
            '"Closed only as the event loop shut down": the test ended with the client open, and the loop\'s '
            "runner (pytest-asyncio, anyio or asyncio.run) closed it by cancelling the task that held it."
        )
    lines.append(
        "Fix: leave each MCP client's `async with` block before the test ends (the high-level client's, such as "
        "`async with fastmcp.Client(url) as client:` or `async with ClientSession(...)`, and the SDK transport's), "
        "or call its own close method; close each HTTP client you build (`async with httpx2.AsyncClient() as "
        "client:`, `await client.aclose()`; the SDK never closes a client passed as http_client=). A test that means "
        'to leave it open: @pytest.mark.fake_mcp_server(leaks="ignore"); leaks="fail" fails the test instead. '
        "LEAKED means garbage-collected without close(). See docs/fixtures.md#leaks."
    )
    return "\n".join(lines)
