"""Tests for _counters.py: counting the httpx/httpx2 clients a test creates."""

from __future__ import annotations

import asyncio
import gc
import importlib
import socket
import sys
import threading
import types
from typing import TYPE_CHECKING, Any, Literal

import httpx
import pytest

from _sdk import MCP2
from pytest_fake_mcp._record._counters import (
    HTTPClientCounter,
    HTTPClientRecord,
    http_client_counter,
    http_client_hooks_kept,
)
from pytest_fake_mcp._wire._errors import LifecycleError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.requests import Request
    from starlette.responses import Response

httpx2: Any
try:
    import httpx2
except ImportError:  # mcp 1.x environments have only httpx
    httpx2 = None

HTTPX2 = pytest.mark.skipif(httpx2 is None, reason="httpx2 is not installed (mcp 1.x environment)")
SDK_LIBRARY: Literal["httpx", "httpx2"] = "httpx2" if MCP2 else "httpx"
"""The SDK transport's library: by the mcp line, not by what is installed (langsmith brings httpx2 beside mcp 1.x)."""
PATCHED_NAMES = {
    "Client": ("__init__", "send", "close", "__exit__"),
    "AsyncClient": ("__init__", "send", "aclose", "__aexit__"),
}


@pytest.fixture
def mcp_http_clients() -> Iterator[HTTPClientCounter]:
    """What plugin.py's fixture does."""
    with http_client_counter() as counter:
        yield counter


async def _mcp_endpoint(request: Request) -> Response:
    """Just enough MCP for the SDK's ClientSession.initialize(): no session id, so no GET stream."""
    from starlette.responses import JSONResponse, Response

    if request.method != "POST":
        return Response(status_code=405)
    message = await request.json()
    if "id" not in message:
        return Response(status_code=202)
    result: dict[str, Any] = {}
    if message["method"] == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {},
            "serverInfo": {"name": "counter-test", "version": "0"},
        }
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": result})


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A tiny Starlette app served by uvicorn on 127.0.0.1:0 in a thread; yields its /mcp URL."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Route

    class ThreadedServer(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.ready = threading.Event()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            self.ready.set()

    app = Starlette(routes=[Route("/mcp", _mcp_endpoint, methods=["GET", "POST", "DELETE"])])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        sock.bind(("127.0.0.1", 0))
        server = ThreadedServer(uvicorn.Config(app, lifespan="off", log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            assert server.ready.wait(10), "the test server did not start"
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            server.should_exit = True
            thread.join()


def _libraries() -> list[Any]:
    return [pytest.param(httpx, id="httpx"), pytest.param("httpx2", id="httpx2", marks=HTTPX2)]


def _module(library: Any) -> Any:
    return importlib.import_module(library) if isinstance(library, str) else library


def _close(client: Any) -> None:
    if client.is_closed:
        return
    if hasattr(client, "aclose"):
        asyncio.run(client.aclose())
    else:
        client.close()


@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("class_name", ["Client", "AsyncClient"])
def test_direct_construction_is_counted_with_its_library_class_and_place(
    mcp_http_clients: HTTPClientCounter, library: Any, class_name: str
) -> None:
    module = _module(library)
    client = getattr(module, class_name)()
    _close(client)

    (record,) = mcp_http_clients.created
    assert record.library == module.__name__
    assert record.class_name == class_name
    assert record.is_async is (class_name == "AsyncClient")
    assert record.type_name == f"{module.__name__}.{class_name}"
    assert record.created_at[0].startswith("tests/test_counters.py:")
    assert record.created_at[0].endswith(" in test_direct_construction_is_counted_with_its_library_class_and_place")
    mcp_http_clients.assert_created(1, library=module.__name__)


@pytest.mark.parametrize("library", _libraries())
def test_subclass_is_counted_once_under_its_own_name(mcp_http_clients: HTTPClientCounter, library: Any) -> None:
    module = _module(library)

    class RetryingClient(module.AsyncClient):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            # Re-running the base __init__ on the same object must not count a second client.
            module.AsyncClient.__init__(self)

    client = RetryingClient()
    _close(client)

    (record,) = mcp_http_clients.created
    assert record.class_name.endswith(".<locals>.RetryingClient")
    assert record.type_name == f"{record.class_name}({module.__name__}.AsyncClient)"
    assert " in test_subclass_is_counted_once_under_its_own_name." in record.created_at[0]


def test_failed_construction_is_not_counted(mcp_http_clients: HTTPClientCounter) -> None:
    with pytest.raises(TypeError):
        httpx.Client(no_such_option=True)  # type: ignore[call-arg]

    assert mcp_http_clients.count == 0


def test_client_built_on_another_thread_is_counted(mcp_http_clients: HTTPClientCounter) -> None:
    def build() -> None:
        httpx.Client().close()

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()

    mcp_http_clients.assert_created(1)
    mcp_http_clients.assert_all_closed()


@pytest.mark.asyncio
async def test_client_built_by_the_sdk_transport_is_counted(
    mcp_http_clients: HTTPClientCounter, server_url: str
) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(server_url) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()

    mcp_http_clients.assert_created(1, library=SDK_LIBRARY, talked_to=server_url)
    mcp_http_clients.assert_all_closed()  # the SDK closes a client it built itself
    assert "in test_client_built_by_the_sdk_transport_is_counted" in mcp_http_clients.created[0].created_at[0]


_LIBRARY_TASK = """
async def session_runner(build, started, stop):
    client = build()
    started.set()
    await stop.wait()
    await client.aclose()
"""


def _library_coroutine() -> Any:
    """A coroutine function whose code lives in site-packages, as a framework's background task does (FastMCP's
    session runner builds the SDK's HTTP client in a task with no frame of the user's on its stack)."""
    import sysconfig

    namespace: dict[str, Any] = {}
    exec(compile(_LIBRARY_TASK, f"{sysconfig.get_paths()['purelib']}/some_framework/runner.py", "exec"), namespace)
    return namespace["session_runner"]


@pytest.mark.asyncio
async def test_client_built_in_a_library_task_is_placed_at_the_line_awaiting_it(
    mcp_http_clients: HTTPClientCounter,
) -> None:
    started, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(_library_coroutine()(httpx.AsyncClient, started, stop))
    await started.wait()  # this line: the one task awaiting in user code while the library's task builds it
    stop.set()
    await task

    (record,) = mcp_http_clients.created
    assert record.created_at[0].startswith("tests/test_counters.py:")
    assert record.created_at[0].endswith(" in test_client_built_in_a_library_task_is_placed_at_the_line_awaiting_it")
    assert record.closed
    assert not record.closed_at_loop_shutdown


@pytest.mark.asyncio
async def test_with_two_tasks_awaiting_in_user_code_the_library_frame_is_kept(
    mcp_http_clients: HTTPClientCounter,
) -> None:
    """Which of two user tasks a library task serves cannot be told: no guess, the library's own frame."""
    started, stop = asyncio.Event(), asyncio.Event()
    other = asyncio.create_task(stop.wait())  # a second task suspended in... the stdlib: not user code
    waiter = asyncio.create_task(_wait(stop))  # user code
    task = asyncio.create_task(_library_coroutine()(httpx.AsyncClient, started, stop))
    await started.wait()
    stop.set()
    await asyncio.gather(task, waiter, other)

    (record,) = mcp_http_clients.created
    assert record.created_at[0].startswith("some_framework/runner.py:3 in session_runner")


def test_a_client_a_library_built_names_the_library_call_beside_the_users_line(
    mcp_http_clients: HTTPClientCounter,
) -> None:
    """Issue 22: the line of the adapter that called a framework, and the framework's call that built the client."""
    import sysconfig

    namespace: dict[str, Any] = {}
    source = "def connect(build):\n    return build()\n"
    exec(compile(source, f"{sysconfig.get_paths()['purelib']}/some_framework/session.py", "exec"), namespace)

    namespace["connect"](httpx.Client).close()  # the user's line

    (record,) = mcp_http_clients.created
    assert record.created_at[0].endswith(
        " in test_a_client_a_library_built_names_the_library_call_beside_the_users_line"
    )
    assert record.built_by == "some_framework/session.py:2 in connect"
    assert str(record).endswith(f"created at {record.created_at[0]} (inside some_framework/session.py:2 in connect)")


def test_clients_a_framework_built_get_a_hint_about_the_framework_not_http_client(
    mcp_http_clients: HTTPClientCounter,
) -> None:
    """The SDK-only "pass it to each transport" hint misleads when a framework built the clients (issue 25 trial:
    mcp-use has no http_client=)."""
    import sysconfig

    namespace: dict[str, Any] = {}
    source = "def connect(build):\n    return build()\n"
    exec(compile(source, f"{sysconfig.get_paths()['purelib']}/some_framework/session.py", "exec"), namespace)
    for _ in range(2):
        namespace["connect"](httpx.Client).close()

    with pytest.raises(AssertionError) as raised:
        mcp_http_clients.assert_created(1)
    message = str(raised.value)
    assert "Hint: some_framework built these clients (the `inside` frames above)" in message
    assert "mcp_http_clients.count" in message
    assert "http_client=" not in message


def test_a_client_the_user_built_has_no_library_call(mcp_http_clients: HTTPClientCounter) -> None:
    httpx.Client().close()

    (record,) = mcp_http_clients.created
    assert record.built_by is None


async def _wait(event: asyncio.Event) -> None:
    await event.wait()


def test_a_client_closed_as_its_loop_shuts_down_is_marked_so(mcp_http_clients: HTTPClientCounter) -> None:
    """asyncio.Runner.close() cancels the task left holding the client: closed, but by the loop's end."""

    async def hold(ready: asyncio.Event) -> None:
        async with httpx.AsyncClient():
            ready.set()
            await asyncio.Event().wait()

    async def main() -> None:
        ready = asyncio.Event()
        asyncio.get_running_loop().create_task(hold(ready))
        await ready.wait()

    async def tidy() -> None:
        async with httpx.AsyncClient():
            pass

    asyncio.run(main())
    asyncio.run(tidy())

    left, closed = mcp_http_clients.created
    assert left.closed
    assert left.closed_at_loop_shutdown
    assert closed.closed
    assert not closed.closed_at_loop_shutdown


@pytest.mark.skipif(httpx2 is not None, reason="streamablehttp_client exists only in mcp 1.x")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.asyncio
async def test_client_built_by_the_deprecated_mcp1_transport_is_counted(
    mcp_http_clients: HTTPClientCounter, server_url: str
) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client  # type: ignore[attr-defined,unused-ignore]

    async with streamablehttp_client(server_url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()

    mcp_http_clients.assert_created(1, library="httpx", talked_to=server_url)
    mcp_http_clients.assert_all_closed()


@pytest.mark.parametrize("library", _libraries())
@pytest.mark.asyncio
async def test_async_requests_record_the_origin(
    mcp_http_clients: HTTPClientCounter, server_url: str, library: Any
) -> None:
    async with _module(library).AsyncClient() as client:
        await client.get(server_url)

    (record,) = mcp_http_clients.created
    assert record.origins == (server_url.removesuffix("/mcp"),)


@pytest.mark.parametrize("kept", [256, 1], ids=["origins cached", "cache cleared on each new origin"])
def test_each_origin_is_recorded_once_in_first_use_order(
    mcp_http_clients: HTTPClientCounter, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    monkeypatch.setattr("pytest_fake_mcp._record._counters._ORIGINS_KEPT", kept)
    urls = (
        "http://b.test:8080/x",
        "https://a.test/y",
        "http://b.test:8080/z",
        "http://[::1]:9/",
        "https://a.test:443/",
    )
    with httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(204))) as client:
        for url in urls:
            client.get(url)

    (record,) = mcp_http_clients.created
    assert record.origins == ("http://b.test:8080", "https://a.test:443", "http://[::1]:9")


def test_talked_to_counts_only_clients_that_sent_to_that_origin(
    mcp_http_clients: HTTPClientCounter, server_url: str
) -> None:
    with httpx.Client() as talker, httpx.Client():
        talker.post(server_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    mcp_http_clients.assert_created(2)
    mcp_http_clients.assert_created(1, talked_to=server_url)
    mcp_http_clients.assert_created(1, talked_to=server_url.removesuffix("/mcp") + "/other?x=1")
    mcp_http_clients.assert_created(0, talked_to="http://127.0.0.1:1/mcp")
    assert [record.number for record in mcp_http_clients.clients_for(server_url)] == [1]
    assert mcp_http_clients.created[0].talked_to(server_url)
    assert not mcp_http_clients.created[1].talked_to(server_url)


def test_open_client_fails_assert_all_closed_until_closed(mcp_http_clients: HTTPClientCounter) -> None:
    httpx.Client().close()
    client = httpx.Client()

    with pytest.raises(AssertionError) as excinfo:
        mcp_http_clients.assert_all_closed()
    client.close()

    assert [record.state for record in mcp_http_clients.created] == ["closed", "closed"]
    pytest.LineMatcher(str(excinfo.value).splitlines()).fnmatch_lines(
        [
            "assert_all_closed(): 1 of 2 HTTP clients was not closed.",
            "  #1 httpx.Client  closed  sent no requests   created at tests/test_counters.py:* in test_open*",
            "  #2 httpx.Client  OPEN    sent no requests   created at tests/test_counters.py:* in test_open*",
            "Hint: close each client you build (`async with httpx2.AsyncClient() as client:`*",
        ],
        consecutive=True,
    )
    mcp_http_clients.assert_all_closed()


def test_collected_client_counts_as_closed_only_if_closed_first(mcp_http_clients: HTTPClientCounter) -> None:
    with httpx.Client():
        pass
    httpx.Client()  # dropped at once without close()
    gc.collect()

    closed, leaked = mcp_http_clients.created
    assert (closed.state, closed.collected) == ("closed", True)
    assert (leaked.state, leaked.collected) == ("LEAKED", True)
    with pytest.raises(AssertionError, match=r"1 of 2 HTTP clients was not closed\.\n(.*\n)*  #2 httpx.Client  LEAKED"):
        mcp_http_clients.assert_all_closed()


def test_assert_created_lists_every_client_and_hints_at_reuse(
    mcp_http_clients: HTTPClientCounter, server_url: str
) -> None:
    for _ in range(2):
        with httpx.Client() as client:
            client.get(server_url)
    with httpx.Client():
        pass

    with pytest.raises(AssertionError) as excinfo:
        mcp_http_clients.assert_created(1)

    origin = server_url.removesuffix("/mcp")
    pytest.LineMatcher(str(excinfo.value).splitlines()).fnmatch_lines(
        [
            "assert_created(1): 3 HTTP clients were created, expected 1.",
            f"  #1 httpx.Client  closed  talked to {origin}   created at tests/test_counters.py:* in test_*",
            f"  #2 httpx.Client  closed  talked to {origin}   created at tests/test_counters.py:*",
            "  #3 httpx.Client  closed  sent no requests*created at tests/test_counters.py:*",
            "Hint: build one HTTP client and pass it to each transport (streamable_http_client(url, http_client=...)).",
        ],
        consecutive=True,
    )
    mcp_http_clients.assert_created(3)


def test_assert_created_with_filters_says_why_each_client_was_not_counted(
    mcp_http_clients: HTTPClientCounter, server_url: str
) -> None:
    with httpx.Client() as client:
        client.get(server_url)
    with httpx.Client():
        pass

    with pytest.raises(AssertionError) as excinfo:
        mcp_http_clients.assert_created(2, library="httpx", talked_to=server_url)

    origin = server_url.removesuffix("/mcp")
    pytest.LineMatcher(str(excinfo.value).splitlines()).fnmatch_lines(
        [
            f"assert_created(2, library='httpx', talked_to='{server_url}'): "
            "1 matching HTTP client was created (2 in all), expected 2.",
            f"  #1 httpx.Client  closed  talked to {origin}   created at *",
            f"  #2 httpx.Client  closed  sent no requests*created at *  not counted: sent nothing to {origin}",
            "Hint: a client matches talked_to only after it has sent a request to that origin.",
        ],
        consecutive=True,
    )
    mcp_http_clients.assert_created(1, library="httpx", talked_to=server_url)


@HTTPX2
def test_assert_created_library_filter_names_the_other_library(mcp_http_clients: HTTPClientCounter) -> None:
    with httpx.Client(), httpx2.Client():
        pass

    with pytest.raises(AssertionError, match=r"#1 httpx.Client .* not counted: library 'httpx' != 'httpx2'"):
        mcp_http_clients.assert_created(2, library="httpx2")
    mcp_http_clients.assert_created(1, library="httpx2")


def test_assert_created_with_nothing_created_hints_at_clients_built_earlier(
    mcp_http_clients: HTTPClientCounter,
) -> None:
    with pytest.raises(AssertionError) as excinfo:
        mcp_http_clients.assert_created(1)

    assert str(excinfo.value).splitlines() == [
        "assert_created(1): 0 HTTP clients were created, expected 1.",
        "Hint: only clients built while mcp_http_clients is active are counted; one built earlier "
        "(in a session-scoped fixture or at import time) is not.",
    ]
    mcp_http_clients.assert_created(0)
    mcp_http_clients.assert_all_closed()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": -1}, r"n=-1 must be an int >= 0"),
        ({"n": 1, "library": "requests"}, r"library='requests' must be 'httpx', 'httpx2' or None"),
        ({"n": 1, "talked_to": "127.0.0.1:8000"}, r"talked_to='127.0.0.1:8000' is not an absolute URL"),
        ({"n": 1, "talked_to": "http://127.0.0.1:99999/"}, r"talked_to='http://127.0.0.1:99999/' is not an"),
    ],
)
def test_assert_created_rejects_bad_arguments_with_their_values(
    mcp_http_clients: HTTPClientCounter, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        mcp_http_clients.assert_created(**kwargs)


def test_record_reads_as_a_sentence_and_reprs_as_a_constructor_call() -> None:
    record = HTTPClientRecord(
        number=2,
        library="httpx2",
        class_name="AsyncClient",
        is_async=True,
        created_at=("myapp/mcp.py:40 in call_tool",),
        closed=False,
        collected=False,
        origins=("http://127.0.0.1:53211",),
    )

    assert str(record) == (
        "httpx2.AsyncClient #2, OPEN, talked to http://127.0.0.1:53211, created at myapp/mcp.py:40 in call_tool"
    )
    assert repr(record).startswith("HTTPClientRecord(number=2, library='httpx2', class_name='AsyncClient',")


def _patched_attributes() -> dict[tuple[type, str], object]:
    classes = [httpx.Client, httpx.AsyncClient]
    if httpx2 is not None:
        classes += [httpx2.Client, httpx2.AsyncClient]
    return {(cls, name): cls.__dict__.get(name) for cls in classes for name in PATCHED_NAMES[cls.__name__]}


def test_uninstall_restores_the_original_methods() -> None:
    before = _patched_attributes()
    counter = HTTPClientCounter()

    counter.install()
    during = _patched_attributes()
    counter.uninstall()

    assert all(during[key] is not before[key] for key in before)
    assert all(value is before[key] for key, value in _patched_attributes().items())
    httpx.Client().close()
    assert counter.count == 0


def test_nested_counters_each_count_and_may_uninstall_in_any_order() -> None:
    before = _patched_attributes()
    outer, inner = HTTPClientCounter(), HTTPClientCounter()

    outer.install()
    httpx.Client().close()
    inner.install()
    httpx.Client().close()
    outer.uninstall()
    httpx.Client().close()
    inner.uninstall()

    assert (outer.count, inner.count) == (2, 2)
    assert [record.number for record in inner.created] == [1, 2]
    assert _patched_attributes() == before


def test_hooks_kept_stay_installed_between_counters_and_count_nothing_themselves() -> None:
    before = _patched_attributes()
    with http_client_hooks_kept():
        kept = _patched_attributes()
        assert all(kept[key] is not before[key] for key in before)
        httpx.Client().close()  # no counter: nobody records it
        with HTTPClientCounter() as first:
            httpx.Client().close()
        assert _patched_attributes() == kept  # the counter left, the patches stayed
        with HTTPClientCounter() as second:
            httpx.Client().close()
            httpx.Client().close()
        assert (first.count, second.count) == (1, 2)
    assert _patched_attributes() == before


def test_partial_install_is_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _patched_attributes()
    broken_client = type("Client", (), {"__init__": lambda self: None})  # no send(): patching it fails
    broken = types.ModuleType("httpx2")
    broken.Client = broken_client  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx2", broken)
    counter = HTTPClientCounter()

    with pytest.raises(AttributeError, match="send"):
        counter.install()

    assert _patched_attributes() == before
    assert "__init__" in broken_client.__dict__
    assert repr(counter) == "HTTPClientCounter(state=UNINSTALLED, count=0)"


def test_install_twice_and_uninstall_unused_are_refused() -> None:
    counter = HTTPClientCounter()
    with pytest.raises(LifecycleError, match=r"Cannot uninstall HTTPClientCounter: it is UNINSTALLED; call install"):
        counter.uninstall()
    with (
        counter,
        pytest.raises(LifecycleError, match=r"already INSTALLED with 0 client\(s\) counted; call uninstall"),
    ):
        counter.install()
