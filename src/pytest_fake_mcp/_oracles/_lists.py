"""The list-change oracles: a client lists again after the tools changed, and never calls a removed tool.

The changes are the journal events ``FakeMCPServer.add_tool``/``remove_tool``/... note mid-test (read back with
``parse_change``), so the oracles need nothing but the journal; the teardown's unknown-tool check reads them too.
"""

from __future__ import annotations

from .._fake._announce import CatalogChange, parse_change
from .._record._journal import Exchange
from .._record._report import plural
from ._figures import ServerFigures, fail

__all__ = [
    "assert_no_removed_tool_calls",
    "assert_relisted_after_changes",
    "catalog_changes",
    "removed_tool_calls",
]


def catalog_changes(figures: ServerFigures) -> tuple[CatalogChange, ...]:
    """The changes of the catalog during the test, in order."""
    return tuple(change for event in figures.events if (change := parse_change(event)) is not None)


def _calls(figures: ServerFigures) -> list[Exchange]:
    return [e for e in figures.exchanges if e.rpc_method == "tools/call" and e.kind == "request" and e.target]


def _last_change(changes: tuple[CatalogChange, ...], name: str, before_seq: int) -> CatalogChange | None:
    """The last change of tool ``name`` made before exchange ``before_seq`` began."""
    found = None
    for change in changes:
        if change.kind == "tool" and change.name == name and change.after_seq < before_seq:
            found = change
    return found


def removed_tool_calls(figures: ServerFigures) -> list[tuple[Exchange, CatalogChange]]:
    """Each ``tools/call`` of a tool removed before it (and not added back), with that removal."""
    changes = catalog_changes(figures)
    found = []
    for call in _calls(figures):
        change = _last_change(changes, str(call.target), call.seq)
        if change is not None and change.how == "removed":
            found.append((call, change))
    return found


def assert_no_removed_tool_calls(figures: ServerFigures) -> None:
    """No ``tools/call`` named a tool the test had removed (and not added back) before the call."""
    __tracebackhide__ = True
    found = removed_tool_calls(figures)
    if not found:
        return
    names = sorted({str(call.target) for call, _ in found})
    announced = all(change.announced for _, change in found)
    fail(
        figures,
        f"The client called {plural(len(found), 'time')} a tool removed before the call: "
        f"{', '.join(map(repr, names))}.",
        [f"#{call.seq}: tools/call {call.target!r} came after the change: {change}" for call, change in found],
        {call.seq: f"call of removed tool {call.target!r}" for call, _ in found},
        (
            "the client kept its old tool list: on notifications/tools/list_changed list the tools again "
            "(tools/list) and drop the removed ones (docs/failure-modes.md#l02)"
            if announced
            else "the removal was not announced, so the client could not know: mark the test "
            "@pytest.mark.fake_mcp_server(list_changed=True) to send notifications/tools/list_changed "
            "(docs/changing-tools.md)"
        ),
    )


def assert_relisted_after_changes(figures: ServerFigures) -> None:
    """Each session that lived through a change of a tool sent ``tools/list`` after it before calling that tool."""
    __tracebackhide__ = True
    changes = catalog_changes(figures)
    if not any(change.kind == "tool" for change in changes):
        fail(
            figures,
            "assert_relisted_after_changes(): no tool changed during the test, so nothing had to be listed again.",
            [],
            None,
            "change a tool after the client connected: fake_mcp_server.add_tool(name, handler) over a served "
            "name, or fake_mcp_server.remove_tool(name) (docs/changing-tools.md)",
        )
    stale: list[tuple[Exchange, CatalogChange]] = []
    for call in _calls(figures):
        change = _last_change(changes, str(call.target), call.seq)
        session = call.session_id
        if change is None or session is None:
            continue
        mine = [e for e in figures.exchanges if e.session_id == session and e.seq < call.seq]
        lived_through = any(e.seq <= change.after_seq for e in mine)
        relisted = any(e.rpc_method == "tools/list" and e.seq > change.after_seq for e in mine)
        if lived_through and not relisted:
            stale.append((call, change))
    if not stale:
        return
    announced = all(change.announced for _, change in stale)
    fail(
        figures,
        f"assert_relisted_after_changes(): {plural(len(stale), 'call')} of a changed tool came before the "
        "session listed the tools again.",
        [
            f"#{call.seq}: tools/call {call.target!r} came after the change: {change}; no tools/list since"
            for call, change in stale
        ],
        {call.seq: f"{call.target!r} changed; not listed since" for call, _ in stale},
        (
            "handle notifications/tools/list_changed: mark the tool list stale and list again before the next "
            "call (docs/failure-modes.md#l01)"
            if announced
            else "the change was not announced, so the client could not know: mark the test "
            "@pytest.mark.fake_mcp_server(list_changed=True) (docs/changing-tools.md)"
        ),
    )
