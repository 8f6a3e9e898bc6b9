"""The pytest11 entry point: the ``fake_mcp_server`` fixtures, the marker and the teardown checks.

At import this module loads only pytest and the standard library; the server (Starlette,
uvicorn) is imported when a fixture first needs it, so installing the plugin costs unrelated
test runs nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._options import FakeMCPOptions
    from ._server import FakeMCPServer, FakeMCPServerFactory

_MARKER = (
    "fake_mcp_server(*, flavour='mcp2', json_response=False, path='/mcp', dns_rebinding_protection=True, "
    "max_sessions=10000, idle_timeout=FLAVOUR_DEFAULT, echo_tool=True, assert_all_faults_fired=True, "
    "fail_on_server_error=True, ...): options of the fake_mcp_server fixture for this test "
    "(every field of pytest_fake_mcp.FakeMCPOptions)."
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fake-mcp", "fake MCP server")
    group.addoption(
        "--fake-mcp-trace",
        dest="fake_mcp_trace",
        metavar="DIR",
        default=None,
        help="write each failing test's exchanges with the fake MCP server to DIR as an HTML sequence diagram",
    )
    parser.addini(
        "fake_mcp_flavour", "default flavour of fake_mcp_server: mcp2 (default) or mcp1", default="mcp2"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)


@pytest.fixture(scope="session")
def fake_mcp_server_factory() -> Iterator[FakeMCPServerFactory]:
    """The pytest session's pool of fake MCP server listeners; lease extra servers from it.

    Example::

        def test_two_servers(fake_mcp_server, fake_mcp_server_factory):
            with fake_mcp_server_factory.lease(flavour="mcp1") as other:
                assert other.url != fake_mcp_server.url
    """
    from ._server import FakeMCPServerFactory

    factory = FakeMCPServerFactory()
    yield factory
    factory.close()


@pytest.fixture
def fake_mcp_options(request: pytest.FixtureRequest) -> FakeMCPOptions:
    """The options of this test's ``fake_mcp_server``: ini defaults, then markers (closest wins).

    Override this fixture in a ``conftest.py`` to change the defaults of a whole directory.
    """
    __tracebackhide__ = True
    from ._options import FakeMCPOptions

    kwargs: dict[str, Any] = {"flavour": request.config.getini("fake_mcp_flavour") or "mcp2"}
    for marker in reversed(list(request.node.iter_markers("fake_mcp_server"))):
        if marker.args:
            raise TypeError(
                f"@pytest.mark.fake_mcp_server takes keyword options only, got positional {marker.args!r}"
            )
        kwargs.update(marker.kwargs)
    return FakeMCPOptions(**kwargs)


@pytest.fixture
def fake_mcp_server(
    fake_mcp_server_factory: FakeMCPServerFactory,
    fake_mcp_options: FakeMCPOptions,
    request: pytest.FixtureRequest,
) -> Iterator[FakeMCPServer]:
    """A started fake MCP server, clean for this test and verified at its teardown.

    Example::

        async def test_lists_tools(fake_mcp_server):
            fake_mcp_server.add_tool("search", lambda query: f"results for {query}")
            client = MyAgentMcpClient(fake_mcp_server.url)
            assert "search" in await client.tool_names()
    """
    with fake_mcp_server_factory.lease(fake_mcp_options) as server:
        request.node.stash.setdefault(SERVERS_KEY, []).append(server)
        yield server


SERVERS_KEY: pytest.StashKey[list[FakeMCPServer]] = pytest.StashKey()
"""The servers a test used, for the failure report."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    servers = item.stash.get(SERVERS_KEY, None)
    if servers and report.failed:
        from ._report import render_diagram

        for index, server in enumerate(servers):
            title = "fake MCP server exchanges" + (f" ({index + 1})" if len(servers) > 1 else "")
            report.sections.append((title, render_diagram(server.exchanges, server.journal.events)))
    return report
