"""The private names of the HTTP stack (`_compat`): each checks out as installed, and a changed shape either
takes the public fallback (with the right answer) or fails at once with a `CompatError` naming library and version.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_fake_mcp import _compat
from pytest_fake_mcp._compat import CompatError, installed_version, usable
from pytest_fake_mcp._fake._app import FakeMCPApp
from pytest_fake_mcp._host import _listener
from pytest_fake_mcp._host._inprocess import InProcessFake
from pytest_fake_mcp._host._listener import Listener
from pytest_fake_mcp._wire._options import FakeMCPOptions

_OURS = [
    entry
    for entry in _compat.ENTRIES.values()
    if entry.check.__module__ == _compat.__name__ and entry.library in ("httpx", "httpx2", "h11", "uvicorn", "mcp")
]
_HTTP_LIBRARIES = [name for name in ("httpx", "httpx2") if importlib.util.find_spec(name) is not None]


@pytest.fixture
def changed(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """A monkeypatch to fake a changed shape with (then `_compat.forget()`); the shapes are checked afresh after."""
    _compat.forget()
    _listener._connection_class.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    _compat.forget()
    _listener._connection_class.cache_clear()


def _without_names(function: Any) -> Any:
    """A stand-in for ``function`` that calls it but names nothing in its own code (a renamed private call)."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return stand_in


def test_our_sections_have_the_expected_entries() -> None:
    assert {f"{e.library}:{e.name}" for e in _OURS} == {
        "httpx:_transports.default.create_ssl_context",
        "httpx2:_transports.default.create_ssl_context",
        "h11:Connection._clean_up_response_headers_for_sending",
        "h11:_headers.Headers, Headers._full_items",
        "h11:Connection._cstate.keep_alive, Connection._request_method",
        "uvicorn:protocols.http.h11_impl.H11Protocol (subclassed: conn, app, transport, on_response_complete)",
        "uvicorn:Server.startup(sockets)/main_loop/servers/server_state, Config.lifespan_class, H11Protocol.shutdown",
        "mcp:shared._httpx_utils.create_mcp_http_client",
    }
    for entry in _OURS:
        assert all((entry.what, entry.checked, entry.gain, entry.fallback)), entry


@pytest.mark.parametrize("entry", _OURS, ids=[f"{e.library}:{e.name}" for e in _OURS])
def test_every_entry_checks_out_on_what_is_installed(entry: _compat.Entry) -> None:
    if importlib.util.find_spec(entry.library) is None:
        pytest.skip(f"{entry.library} is not installed here")
    assert entry.check() is None


# ==== httpx, httpx2: the SSL context each client loads ========================================================


@pytest.mark.parametrize("library", _HTTP_LIBRARIES)
def test_a_changed_transport_module_keeps_each_clients_own_ssl_context_and_still_routes(
    library: str, changed: pytest.MonkeyPatch
) -> None:
    http = importlib.import_module(library)
    transports = importlib.import_module(f"{library}._transports.default")
    original = transports.create_ssl_context
    changed.setattr(http.AsyncHTTPTransport, "__init__", _without_names(http.AsyncHTTPTransport.__init__))
    _compat.forget()
    entry = _compat.default_ssl_context(library)
    assert entry.library == library
    assert not usable(entry)

    async def main(url: str) -> Any:
        async with http.AsyncClient() as client:
            return await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=_HEADERS)

    with InProcessFake() as fake:
        assert transports.create_ssl_context is original  # the fallback: not wrapped
        answer = asyncio.run(main(fake.url))
    assert answer.status_code in (200, 400)  # the fake's own answer (a ping outside a session), not a socket error
    assert fake.server is not None
    assert len(fake.server.journal.exchanges) == 1


@pytest.mark.parametrize("library", _HTTP_LIBRARIES)
def test_the_ssl_context_is_wrapped_while_routing_and_restored_after(library: str) -> None:
    transports = importlib.import_module(f"{library}._transports.default")
    original = transports.create_ssl_context
    with InProcessFake():
        assert transports.create_ssl_context is not original
        assert transports.create_ssl_context() is transports.create_ssl_context()
    assert transports.create_ssl_context is original


_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# ==== h11: the listener's shorter response head ===============================================================


def _changed_h11(monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    import h11
    import h11._headers

    if which == "clean_up":
        passthrough = h11.Connection.send_with_data_passthrough
        monkeypatch.setattr(h11.Connection, "send_with_data_passthrough", _without_names(passthrough))
    elif which == "headers":
        monkeypatch.delattr(h11._headers, "Headers")
    else:
        init = h11.Connection.__init__

        def without_state(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            del self._request_method

        monkeypatch.setattr(h11.Connection, "__init__", without_state)


@pytest.mark.parametrize(
    ("which", "entry"),
    [
        ("clean_up", _compat.H11_CLEAN_UP),
        ("headers", _compat.H11_HEADERS),
        ("state", _compat.H11_STATE),
    ],
    ids=["clean_up", "headers", "state"],
)
def test_a_changed_h11_gets_h11s_own_connection(which: str, entry: _compat.Entry, changed: pytest.MonkeyPatch) -> None:
    import h11

    assert _listener._connection_class() is not h11.Connection
    _listener._connection_class.cache_clear()
    _changed_h11(changed, which)
    _compat.forget()
    problem = entry.check()
    assert problem
    assert _listener._connection_class() is h11.Connection  # the fallback: h11's own bytes, by definition


# ==== uvicorn: the listener's protocol and server lifecycle ===================================================


@pytest.mark.parametrize(
    ("entry", "owner", "name"),
    [
        (_compat.UVICORN_PROTOCOL, "uvicorn.protocols.http.h11_impl:H11Protocol", "handle_events"),
        (_compat.UVICORN_SERVER, "uvicorn:Server", "main_loop"),
    ],
    ids=["protocol", "server"],
)
def test_a_changed_uvicorn_fails_the_listeners_start_naming_uvicorn_and_its_version(
    entry: _compat.Entry, owner: str, name: str, changed: pytest.MonkeyPatch
) -> None:
    module, _, cls_name = owner.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    if name == "main_loop":
        changed.delattr(cls, name)
    else:
        changed.setattr(cls, name, _without_names(getattr(cls, name)))
    _compat.forget()
    listener = Listener(FakeMCPApp(FakeMCPOptions()))
    with pytest.raises(CompatError) as raised:
        listener.start()
    assert raised.value.entry is entry
    assert f"of uvicorn {installed_version('uvicorn')}" in str(raised.value)
    assert not listener.running


# ==== mcp: the SDK's HTTP client ==============================================================================


def test_a_changed_mcp_helper_builds_the_sdks_client_with_public_api(changed: pytest.MonkeyPatch) -> None:
    from mcp.shared import _httpx_utils

    from pytest_fake_mcp._client._reusing import _sdk

    module = _sdk().http_module
    sdk_client = _httpx_utils.create_mcp_http_client(headers={"x-a": "1"})

    def create_mcp_http_client(timeout: Any = None) -> Any:  # a changed helper: no headers
        raise AssertionError("not called")

    changed.setattr(_httpx_utils, "create_mcp_http_client", create_mcp_http_client)
    _compat.forget()
    assert not usable(_compat.MCP_HTTP_CLIENT)
    ours = _compat.mcp_http_client_factory(module)(headers={"x-a": "1"})
    try:
        assert type(ours) is type(sdk_client)
        assert type(ours).__module__.partition(".")[0] == module
        assert ours.timeout == sdk_client.timeout
        assert ours.headers["x-a"] == "1"
        assert ours.follow_redirects == sdk_client.follow_redirects
    finally:
        asyncio.run(ours.aclose())
        asyncio.run(sdk_client.aclose())


def test_the_mcp_helper_is_the_sdks_own_while_its_shape_holds() -> None:
    from mcp.shared._httpx_utils import create_mcp_http_client

    from pytest_fake_mcp._client._reusing import _sdk

    assert _compat.mcp_http_client_factory(_sdk().http_module) is create_mcp_http_client
