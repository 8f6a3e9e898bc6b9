"""The pytest11 entry point: the ``fake_mcp_server`` fixtures, the marker and the teardown checks.

At import this module loads only pytest and the standard library; the server (Starlette,
uvicorn) is imported when a fixture first needs it, so installing the plugin costs unrelated
test runs nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import re
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._host import FakeMCPServer, FakeMCPServerFactory
    from ._oracles._figures import ServerFigures
    from ._record._counters import HTTPClientCounter
    from ._wire._options import FakeMCPOptions


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fake-mcp", "fake MCP server")
    group.addoption(
        "--fake-mcp-trace",
        dest="fake_mcp_trace",
        metavar="DIR",
        default=None,
        help="write each failing test's exchanges with the fake MCP server to DIR as an HTML sequence diagram",
    )
    races = parser.getgroup("fake-mcp-races", "race exploration (pytest_fake_mcp.races; docs/races.md)")
    races.addoption(
        "--race-shrink-seconds",
        dest="race_shrink_seconds",
        metavar="N",
        type=float,
        default=None,
        help="shrink a race failure for at most N wall-clock seconds after it is found, then report the smallest "
        "failing example so far (default 20; a search's shrink_seconds= wins)",
    )
    races.addoption(
        "--race-shrink-again",
        dest="race_shrink_again",
        action="store_true",
        default=None,
        help="shrink a race failure replayed from the Hypothesis database further, instead of reporting it as stored",
    )
    parser.addini("fake_mcp_flavour", "default flavour of fake_mcp_server: mcp2 (default) or mcp1", default="mcp2")


def _server_marker_help() -> str:
    """The ``fake_mcp_server`` marker's ``--markers`` line, from the fields of ``FakeMCPOptions`` (one source)."""
    import dataclasses
    import enum

    from ._wire._options import FakeMCPOptions

    def default(f: dataclasses.Field[Any]) -> str:
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
        return repr(value.value if isinstance(value, enum.Enum) else value)

    fields = [f for f in dataclasses.fields(FakeMCPOptions) if f.init and f.name != "extra"]
    defaults = {f.name: default(f) for f in fields}
    # pytest ends a --markers signature at its first ':' ("name(args): description"): a default with a colon
    # ('127.0.0.1:*') is given whole after it.
    shown = ", ".join(f"{name}={'<below>' if ':' in text else text}" for name, text in defaults.items())
    colons = "; ".join(f"{name}={text}" for name, text in defaults.items() if ":" in text)
    return (
        f"fake_mcp_server(*, {shown}): options of this test's fake_mcp_server "
        f"(pytest_fake_mcp.FakeMCPOptions; docs/fixtures.md)" + (f"; defaults: {colons}." if colons else ".")
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _server_marker_help())
    config.addinivalue_line("markers", _fault_marker_line(config))
    shrink_seconds = getattr(config.option, "race_shrink_seconds", None)
    shrink_again = getattr(config.option, "race_shrink_again", None)
    if shrink_seconds is not None or shrink_again is not None:  # imported only when asked: it loads the race engine
        from ._race import _search

        # A pytest run inside this process (pytester) keeps its own, and puts the outer run's back when it ends.
        config.add_cleanup(_search.configure(shrink_seconds=shrink_seconds, shrink_again=shrink_again))


def _fault_marker_line(config: pytest.Config) -> str:
    """The ``fake_mcp_fault`` help, derived from the ``on(...)`` builder; built only when ``--markers`` shows it
    (building it imports the fault machinery, which a run that never shows it should not pay for)."""
    if not getattr(config.option, "markers", False):
        return "fake_mcp_fault: script a fault on this test's fake_mcp_server (pytest --markers lists its arguments)"
    from ._faults import fault_marker_help

    return fault_marker_help()


@pytest.fixture(scope="session")
def fake_mcp_server_factory() -> Iterator[FakeMCPServerFactory]:
    """The pytest session's pool of fake MCP server listeners; lease extra servers from it.

    Example::

        def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
            with fake_mcp_server_factory.lease(flavour="mcp1") as other:
                assert other.url != fake_mcp_server.url
    """
    from . import _resolve_public_names
    from ._host import FakeMCPServerFactory
    from ._oracles import _figures  # noqa: F401 - see below
    from ._record import _report  # noqa: F401 - see below

    # Import now what a failure renders with: importing it (assertion-rewritten) while a failure is being
    # raised, when a leaked client's ResourceWarning can fire mid-compile, ends in CPython 3.11's
    # "SystemError: AST constructor recursion depth mismatch" instead of the failure's message.
    _resolve_public_names()
    factory = FakeMCPServerFactory()
    yield factory
    factory.close()


_ITEM: contextvars.ContextVar[pytest.Item | None] = contextvars.ContextVar("fake_mcp_item", default=None)
"""The test being run, for the fixtures below: a fixture that takes ``request`` makes pytest build a fixture
definition for it twice per test, which was about a third of the fixture's cost per test (issue 11)."""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    token = _ITEM.set(item)
    try:
        return (yield)
    finally:
        with contextlib.suppress(ValueError):  # a nested in-process run (pytester) resets its own
            _ITEM.reset(token)


def _current_item(fixture: str) -> pytest.Item:
    item = _ITEM.get()
    if item is None:
        raise RuntimeError(f"{fixture} is set up while pytest runs a test; there is no test being run now")
    return item


@pytest.fixture
def fake_mcp_options() -> FakeMCPOptions:
    """The options of this test's ``fake_mcp_server``: ini defaults, then markers (closest wins).

    Override this fixture in a ``conftest.py`` to change the defaults of a whole directory.
    """
    __tracebackhide__ = True
    from ._wire._options import FakeMCPOptions

    item = _current_item("fake_mcp_options")
    flavour = item.config.getini("fake_mcp_flavour") or "mcp2"
    markers = list(item.iter_markers("fake_mcp_server"))
    defaults: dict[str, FakeMCPOptions] | None = None
    if not markers:
        # Most tests take the defaults: one options object per flavour, built once, and the same object each
        # time lets the lease see at once that the server needs no new options (issue 11: per-test cost).
        # Options are frozen; a test that filled the one mutable field (``extra``) gets its own from then on.
        defaults = item.config.stash.setdefault(_DEFAULT_OPTIONS_KEY, {})
        shared = defaults.get(flavour)
        if shared is not None and not shared.extra:
            return shared
    kwargs: dict[str, Any] = {"flavour": flavour}
    for marker in reversed(markers):
        if marker.args:
            raise TypeError(
                f"@pytest.mark.fake_mcp_server takes keyword options only, got positional {marker.args!r} "
                f"({_marker_location(item)})"
            )
        kwargs.update(marker.kwargs)
    try:
        options = FakeMCPOptions(**kwargs)
    except (TypeError, ValueError) as exc:
        # The traceback can only show pytest's frames; the second line points at the user's marker (in the
        # message itself: not every pytest shows an exception's notes in a fixture error).
        bad = re.search(r"keyword argument '(\w+)'", str(exc)) or re.match(r"(\w+)=", str(exc))
        raise type(exc)(f"{exc}\n{_marker_location(item, bad.group(1) if bad else None)}") from None
    if defaults is not None:
        defaults[flavour] = options
    return options


def _marker_location(item: pytest.Item, option: str | None = None) -> str:
    """Where the test's ``fake_mcp_server`` marker (naming ``option``) is written: its line, else the test."""
    import inspect

    function = getattr(item, "function", None)
    try:
        lines, first = inspect.getsourcelines(function)  # type: ignore[arg-type]
        path = Path(inspect.getsourcefile(function) or "")  # type: ignore[arg-type]
    except (TypeError, OSError):
        return f"in the markers of {item.nodeid}"
    with contextlib.suppress(ValueError):
        path = path.relative_to(item.config.rootpath)
    in_marker = False
    for offset, line in enumerate(lines):
        code = line.lstrip()
        if code.startswith(("def ", "async def ")):
            break
        if code.startswith("@"):
            in_marker = "fake_mcp_server(" in code
        if in_marker and (option is None or option in code):
            return f"in @pytest.mark.fake_mcp_server at {path}:{first + offset}"
    return f"in a fake_mcp_server marker of {item.nodeid} ({path}:{first})"


@pytest.fixture
def fake_mcp_server(
    fake_mcp_server_factory: FakeMCPServerFactory, fake_mcp_options: FakeMCPOptions
) -> Iterator[FakeMCPServer]:
    """A started fake MCP server, clean for this test and verified at its teardown.

    Example::

        async def test_lists_tools(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: f"results for {query}")
            client = MyAgentMcpClient(fake_mcp_server.url)
            assert "search" in await client.tool_names()
    """
    __tracebackhide__ = True
    item = _current_item("fake_mcp_server")
    clients = None
    if fake_mcp_options.leaks != "ignore":
        from ._record._counters import HTTPClientCounter

        clients = HTTPClientCounter()  # every HTTP client the test builds, for the leak check at teardown
        clients.install()
    try:
        yield from _leased_and_verified(item, fake_mcp_server_factory, fake_mcp_options)
        if clients is not None:
            _check_leaks(item, clients, fake_mcp_options)
    finally:
        if clients is not None:
            clients.uninstall()


def _leased_and_verified(
    item: pytest.Item, factory: FakeMCPServerFactory, options: FakeMCPOptions
) -> Iterator[FakeMCPServer]:
    """The body of ``fake_mcp_server``: lease, apply the fault markers, yield, then the teardown checks."""
    __tracebackhide__ = True
    from ._wire._errors import FakeMCPError

    trace: _Trace | None = None
    try:
        with factory.lease(options) as server:
            trace = _Trace(server, "fake_mcp_server")
            item.stash.setdefault(TRACES_KEY, []).append(trace)
            try:
                if item.get_closest_marker("fake_mcp_fault") is not None:
                    from ._faults import apply_fault_marker

                    for marker in reversed(list(item.iter_markers("fake_mcp_fault"))):
                        apply_fault_marker(server.on, marker.args, marker.kwargs)
                yield server
                if item.stash.get(_SKIPPED_KEY, False):
                    server._faults.excuse_unfired()  # a skipped test reached nothing it scripted: no failure
            finally:
                trace.freeze()  # before verify() and the reset that clears the journal
    except FakeMCPError as exc:
        # A teardown check failed: its message is the report; the fixture's source and the lease's
        # frames would only bury it.
        if trace is not None and _draws_diagram(str(exc)):
            from ._record._report import mark_shown

            mark_shown(exc, trace.server.url)
        raise exc.with_traceback(None) from None
    if trace is None:  # the lease never yielded (it raised above)
        return
    if options.fail_on_unknown_tool:
        from ._oracles import assert_no_unknown_tool_calls

        assert_no_unknown_tool_calls(trace.figures())
    if options.assert_no_requests_after_close:
        from ._oracles import assert_no_requests_after_close

        assert_no_requests_after_close(trace.figures())


class FakeMCPLeakWarning(pytest.PytestWarning):
    """A test left open an HTTP client that talked to the fake MCP server (docs/fixtures.md#leaks)."""


def _check_leaks(item: pytest.Item, counter: HTTPClientCounter, options: FakeMCPOptions) -> None:
    """Warn (or fail, with ``leaks="fail"``) of the HTTP clients the test left open on the fake.

    Only an httpx/httpx2 client that talked to a fake of this test and is not closed counts, or was closed only as
    the event loop shut down (pytest-asyncio's loop can end before this teardown, cancelling what the test left
    open: that close is the loop's, not the test's, whatever the fixture order). A session alone
    without a DELETE is what a client with ``terminate_on_close=False`` or another SDK leaves by design, a session
    the server ended is no leak, and a client that was closed (its DELETE failed or not) is closed. The sessions
    still live without a DELETE are named beside the clients, as what they hold.
    """
    __tracebackhide__ = True
    traces = item.stash.get(TRACES_KEY, [])
    urls = [trace.server.url for trace in traces]
    left = tuple(
        r
        for r in counter.created
        if (not r.closed or r.closed_at_loop_shutdown) and any(r.talked_to(url) for url in urls)
    )
    if not left:
        return
    from ._record._analysis import short_ids
    from ._record._counters import render_left_open

    held: list[str] = []
    for trace in traces:
        figures = trace.figures()
        deleted = {e.session_id for e in figures.exchanges if e.http_method == "DELETE"}
        short = short_ids([s.id for s in figures.sessions])
        held += [
            f"{short[s.id]} (opened by exchange #{s.created_by})"
            for s in figures.sessions
            if s.live and s.id not in deleted
        ]
    message = render_left_open(left, held, item.nodeid)
    if options.leaks == "fail":
        pytest.fail(message, pytrace=False)
    path, line = _test_location(item)
    warnings.warn_explicit(FakeMCPLeakWarning(message), FakeMCPLeakWarning, path, line)


def _test_location(item: pytest.Item) -> tuple[str, int]:
    """Where the user wrote the test: its ``def`` line (below its decorators); for a scenario a suite's subclass
    inherits (contract, races), the subclass's ``class`` line, not the plugin's."""
    import inspect

    path, line, _ = item.reportinfo()
    where = (str(path), (line or 0) + 1)
    cls = getattr(item, "cls", None)
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    try:
        if cls is not None and os.path.abspath(str(path)).startswith(here):
            return inspect.getsourcefile(cls) or where[0], inspect.getsourcelines(cls)[1]
        lines, first = inspect.getsourcelines(getattr(item, "function", None))  # type: ignore[arg-type]
    except (TypeError, OSError):
        return where
    for offset, text in enumerate(lines):
        if text.lstrip().startswith(("def ", "async def ")):
            return where[0], first + offset
    return where


def _draws_diagram(message: str) -> bool:
    return "client ──" in message or "(no exchanges with the fake MCP server)" in message


@pytest.fixture
def mcp_http_clients() -> Iterator[HTTPClientCounter]:
    """Counts the httpx/httpx2 clients built during the test (the SDK's own included).

    Client-side figures: the fake's ``connections`` counts TCP connections, which is not the same
    thing (one client pools several). Example::

        async def test_one_http_client(fake_mcp_server, mcp_http_clients):
            await run_my_agent(fake_mcp_server.url)
            mcp_http_clients.assert_created(1)
            mcp_http_clients.assert_all_closed()
    """
    from ._record._counters import http_client_counter

    with http_client_counter() as counter:
        yield counter


# --- failure reports and --fake-mcp-trace -----------------------------------------------------------


class _Trace:
    """One server a test used; its figures frozen when the test let go of it (a reset clears them)."""

    def __init__(self, server: FakeMCPServer, name: str) -> None:
        self.server = server
        self.name = name
        self._frozen: ServerFigures | None = None

    def freeze(self) -> None:
        if self._frozen is None:
            self._frozen = self._take()

    def figures(self) -> ServerFigures:
        return self._frozen if self._frozen is not None else self._take()

    def _take(self) -> ServerFigures:
        try:
            return self.server.figures
        except Exception:  # the server loop is blocked (a sync handler?): the journal alone still draws
            from ._oracles._figures import ServerFigures

            server = self.server
            return ServerFigures(url=server.url, exchanges=server.journal.exchanges, events=server.journal.events)


_DEFAULT_OPTIONS_KEY: pytest.StashKey[dict[str, FakeMCPOptions]] = pytest.StashKey()
TRACES_KEY: pytest.StashKey[list[_Trace]] = pytest.StashKey()
"""The servers a test used, for the failure report and the trace file."""
_FAILURES_KEY: pytest.StashKey[list[str]] = pytest.StashKey()
_SKIPPED_KEY: pytest.StashKey[bool] = pytest.StashKey()
"""The test's call was skipped or xfailed: its scripted faults are not verified."""


@contextlib.contextmanager
def _traced_leases(factory: FakeMCPServerFactory, traces: list[_Trace]) -> Iterator[None]:
    """Record the servers the test leases from the factory, frozen when each lease ends."""
    original = factory.lease

    @contextlib.contextmanager
    def lease(*args: Any, **kwargs: Any) -> Iterator[FakeMCPServer]:
        __tracebackhide__ = True
        with original(*args, **kwargs) as server:
            trace = _Trace(server, f"fake_mcp_server_factory.lease() #{len(traces)}")
            traces.append(trace)
            try:
                yield server
            finally:
                trace.freeze()

    factory.lease = lease  # type: ignore[method-assign]
    try:
        yield
    finally:
        del factory.lease


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    funcargs = getattr(item, "funcargs", {})
    factory = funcargs.get("fake_mcp_server_factory")
    if factory is None or "lease" in vars(factory):
        return (yield)
    with _traced_leases(factory, item.stash.setdefault(TRACES_KEY, [])):
        return (yield)


_OUR_FIXTURES = ("fake_mcp_server", "fake_mcp_server_factory", "mcp_http_clients", "fake_mcp_options")
_NOT_RUN_ASYNC = "async def functions are not natively supported"


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    try:
        return (yield)
    except pytest.fail.Exception as exc:
        # pytest's own message lists plugins to install, though one may be installed and merely not asked
        # (pytest-asyncio in strict mode runs only marked tests): for a test of ours, name the fix (issue 25).
        if not str(exc.msg).startswith(_NOT_RUN_ASYNC) or not any(f in pyfuncitem.fixturenames for f in _OUR_FIXTURES):
            raise
        raise pytest.fail.Exception(f"{exc.msg}\n\n{_async_hint(pyfuncitem)}", pytrace=False) from None


def _async_hint(item: pytest.Function) -> str:
    """What to do about an async test of ours that no plugin ran, from the async plugins installed."""
    config = item.config
    uses = next(name for name in _OUR_FIXTURES if name in item.fixturenames)  # the first its fixtures reach
    head = f"pytest-fake-mcp: {item.name} is an async test that uses {uses}, but no async plugin ran it."
    ways = []
    if config.pluginmanager.has_plugin("asyncio"):
        try:
            mode = config.getoption("asyncio_mode", None) or config.getini("asyncio_mode")
        except ValueError:
            mode = None
        ways.append(
            f"pytest-asyncio is installed{f' in {mode} mode' if mode else ''}, which runs only the tests marked "
            'for it: add @pytest.mark.asyncio to the test (or a module\'s pytestmark), or set asyncio_mode = "auto" '
            "in your pytest configuration"
        )
    if config.pluginmanager.has_plugin("anyio"):
        ways.append("with anyio, mark the test @pytest.mark.anyio")
    if not ways:
        ways.append("install pytest-asyncio (and mark the test @pytest.mark.asyncio) or use anyio's pytest plugin")
    return f"{head} Fix: {'; '.join(ways)}. See docs/fixtures.md#async-tests."


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call" and report.skipped:
        item.stash[_SKIPPED_KEY] = True
    traces = item.stash.get(TRACES_KEY, None)
    if not traces or not report.failed:
        return report
    from ._oracles._reuse import failure_hint
    from ._record._report import diagram_legend, diagram_shown, render_diagram, render_html

    servers = [(trace.name, trace.figures()) for trace in traces]
    error = call.excinfo.value if call.excinfo is not None else None
    for name, figures in servers:
        if not figures.exchanges and not figures.events:
            continue  # the test never talked to this server: nothing to show
        if diagram_shown(error, figures.url):
            continue  # the failure's own message draws it: once is enough
        legend = diagram_legend(figures.exchanges, figures.sessions)
        diagram = render_diagram(figures.exchanges, figures.events, sessions=figures.sessions)
        hint = failure_hint(figures) if report.when == "call" else None  # a teardown error carries its own fix
        title = "fake MCP server exchanges" + (f" ({name})" if len(servers) > 1 else "")
        report.sections.append((title, f"{figures.url}\n{legend}\n{diagram}" + (f"\nHint: {hint}" if hint else "")))
    trace_dir = item.config.getoption("fake_mcp_trace")
    if trace_dir:
        failures = item.stash.setdefault(_FAILURES_KEY, [])
        failures.append(f"[{report.when}] {report.longreprtext}")
        page = render_html(item.nodeid, "\n\n".join(failures), [(f"{n} {f.url}", f) for n, f in servers])
        _write_trace(item.config.invocation_params.dir / trace_dir, item.nodeid, page)
    return report


def _write_trace(directory: Path, nodeid: str, page: str) -> Path:
    """Write ``page`` as ``DIR/<nodeid>.html``, atomically (xdist workers share DIR, never a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^\w.-]+", "_", nodeid).strip("_")[:120]
    digest = hashlib.sha1(nodeid.encode()).hexdigest()[:8]
    path = directory / f"{safe}-{digest}.html"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, path)
    return path
