"""The list-change oracles: a client lists again after the tools changed, and never calls a removed tool.

The changes are the journal events ``FakeMCPServer.add_tool``/``remove_tool``/... note mid-test (read back with
``parse_change``), so the oracles need nothing but the journal; the teardown's unknown-tool check reads them too.

A handshake-era call is judged by its session. A 2026-07-28 call has no session, so it is judged by what can be
attributed soundly (docs/changing-tools.md): no ``tools/list`` reached the fake between the change and the call
(from anyone), and the call's TCP connection carried an exchange begun before the change (one connection is one
HTTP client, so that client lived through it). A call that fits neither case cannot be judged; the test may then
say one client sent every modern request (``single_client=True``).
"""

from __future__ import annotations

from .._fake._announce import CatalogChange, parse_change
from .._fake._eras import HEADER_MISMATCH
from .._record._journal import Exchange
from .._record._report import plural
from .._wire._errors import ScriptError
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


def _told(change: CatalogChange, call: Exchange) -> bool:
    """Whether the client that sent ``call`` could have heard of ``change``: on a GET stream (the handshake era)
    or on a ``subscriptions/listen`` stream (the 2026-07-28 era)."""
    return change.listens > 0 if call.era == "modern" else change.announced


def _change_text(change: CatalogChange, call: Exchange) -> str:
    if call.era != "modern":
        return str(change)
    told = f"announced on {plural(change.listens, 'listen stream')}" if change.listens else "on no listen stream"
    return f"{change.kind} {change.name!r} {change.how} after exchange #{change.after_seq} ({told})"


_MODERN_UNTOLD = (
    "the change reached no subscriptions/listen stream, so the client could not know: mark the test "
    "@pytest.mark.fake_mcp_server(list_changed=True) and have the client listen (mcp 2.x: "
    "client.listen(tools_list_changed=True)) (docs/changing-tools.md)"
)


def assert_no_removed_tool_calls(figures: ServerFigures) -> None:
    """No ``tools/call`` named a tool the test had removed (and not added back) before the call, in either era."""
    __tracebackhide__ = True
    found = removed_tool_calls(figures)
    if not found:
        return
    names = sorted({str(call.target) for call, _ in found})
    told = all(_told(change, call) for call, change in found)
    modern = any(call.era == "modern" for call, _ in found)
    if told:
        hint = (
            "the client kept its old tool list: on notifications/tools/list_changed list the tools again "
            "(tools/list) and drop the removed ones (docs/failure-modes.md#l02)"
        )
    elif modern:
        hint = _MODERN_UNTOLD.replace("the change reached", "the removal reached")
    else:
        hint = (
            "the removal was not announced, so the client could not know: mark the test "
            "@pytest.mark.fake_mcp_server(list_changed=True) to send notifications/tools/list_changed "
            "(docs/changing-tools.md)"
        )
    fail(
        figures,
        f"The client called {plural(len(found), 'time')} a tool removed before the call: "
        f"{', '.join(map(repr, names))}.",
        [
            f"#{call.seq}: tools/call {call.target!r} came after the change: {_change_text(change, call)}"
            for call, change in found
        ],
        {call.seq: f"call of removed tool {call.target!r}" for call, _ in found},
        hint,
    )


def _relisted(figures: ServerFigures, since: int, before: int, session: str | None) -> bool:
    """A ``tools/list`` began after exchange ``since`` and before ``before`` (on ``session``; None: from anyone)."""
    return any(
        e.rpc_method == "tools/list" and since < e.seq < before and (session is None or e.session_id == session)
        for e in figures.exchanges
    )


def _modern_verdict(figures: ServerFigures, call: Exchange, change: CatalogChange, single_client: bool) -> str:
    """``"stale"``, ``"fine"`` or ``"unknown"`` for a 2026-07-28 call of a tool changed before it (no session)."""
    if _relisted(figures, change.after_seq, call.seq, None):
        return "fine"  # someone listed since: perhaps not this client (a miss, never a false alarm)
    before = [e for e in figures.exchanges if e.seq <= change.after_seq]
    if single_client:
        return "stale" if any(e.era == "modern" for e in before) else "fine"
    if call.connection is not None and any(e.connection == call.connection for e in before):
        return "stale"  # its HTTP client sent that earlier exchange on the same connection: it lived through
    return "unknown"  # a client that began after the change, or one that lived through it on a new connection


def _single_client_refusal(figures: ServerFigures) -> str | None:
    probes = [e.seq for e in figures.exchanges if e.rpc_method == "server/discover"]
    if len(probes) <= 1:
        return None
    return (
        f"assert_relisted_after_changes(single_client=True): {len(probes)} server/discover probes arrived "
        f"(#{', #'.join(map(str, probes))}), and an mcp 2.x Client probes once in its life: more than one client "
        "spoke, so the modern-era requests cannot be taken as one client's. Drive one client in this test, "
        "or leave single_client off (docs/changing-tools.md#which-client-sent-a-call)"
    )


def assert_relisted_after_changes(figures: ServerFigures, *, single_client: bool = False) -> None:
    """Each client that lived through a change of a tool sent ``tools/list`` after it before calling that tool.

    A handshake-era client is its session; a 2026-07-28 one is judged as the module docstring says, and a call
    that cannot be attributed soundly raises ``ScriptError`` naming why, rather than pass or fail wrongly.
    """
    __tracebackhide__ = True
    if not isinstance(single_client, bool):
        raise ScriptError(f"single_client={single_client!r} must be True or False")
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
    if single_client and (refusal := _single_client_refusal(figures)) is not None:
        raise ScriptError(refusal)
    stale: list[tuple[Exchange, CatalogChange]] = []
    unknown: list[tuple[Exchange, CatalogChange]] = []
    for call in _calls(figures):
        change = _last_change(changes, str(call.target), call.seq)
        if change is None:
            continue
        if call.era == "modern":
            if call.error_code == HEADER_MISMATCH:
                continue  # refused before the tool ran: the client's schema was stale, and the spec's recovery is
                # to list again and resend (mcp 2.x's Client does): the resent call is the one judged
            verdict = _modern_verdict(figures, call, change, single_client)
            if verdict == "stale":
                stale.append((call, change))
            elif verdict == "unknown":
                unknown.append((call, change))
            continue
        session = call.session_id
        if session is None:
            continue
        mine = [e for e in figures.exchanges if e.session_id == session and e.seq < call.seq]
        lived_through = any(e.seq <= change.after_seq for e in mine)
        if lived_through and not _relisted(figures, change.after_seq, call.seq, session):
            stale.append((call, change))
    if not stale and unknown:
        raise ScriptError(_cannot_judge(unknown))
    if not stale:
        return
    told = all(_told(change, call) for call, change in stale)
    modern = any(call.era == "modern" for call, _ in stale)
    who = "client" if modern else "session"
    if told:
        hint = (
            "handle notifications/tools/list_changed: mark the tool list stale and list again before the next "
            "call (docs/failure-modes.md#l01)"
        )
        if not modern and all(_first_after(figures, call, change) for call, change in stale):
            hint += (
                "; or, if the test called right after changing the tools, the call may have raced the "
                "notification: let the client hear it first (ReusingSessionClient.wait_for_tool_list_change(), or "
                "an event the SDK's message_handler sets; docs/changing-tools.md)"
            )
    elif modern:
        hint = _MODERN_UNTOLD
    else:
        hint = (
            "the change was not announced, so the client could not know: mark the test "
            "@pytest.mark.fake_mcp_server(list_changed=True) (docs/changing-tools.md)"
        )
    facts = [
        f"#{call.seq}: tools/call {call.target!r} came after the change: {_change_text(change, call)}; "
        "no tools/list since"
        for call, change in stale
    ]
    marks = {call.seq: f"{call.target!r} changed; not listed since" for call, _ in stale}
    if unknown:
        facts.append(
            f"not judged: {', '.join(f'#{c.seq}' for c, _ in unknown)} (a 2026-07-28 call on a connection that "
            "carried nothing before the change: its client cannot be told apart; single_client=True judges it)"
        )
        marks.update({call.seq: "not judged: which client?" for call, _ in unknown})
    fail(
        figures,
        f"assert_relisted_after_changes(): {plural(len(stale), 'call')} of a changed tool came before the "
        f"{who} listed the tools again.",
        facts,
        marks,
        hint,
    )


def _first_after(figures: ServerFigures, call: Exchange, change: CatalogChange) -> bool:
    """The call is its session's first POST since the change: it may have been sent before the notification was
    read (the client reads its GET stream beside its calls), so the test, not the client, may be at fault."""
    return not any(
        e.session_id == call.session_id and e.http_method == "POST" and change.after_seq < e.seq < call.seq
        for e in figures.exchanges
    )


def _cannot_judge(unknown: list[tuple[Exchange, CatalogChange]]) -> str:
    calls = ", ".join(f"#{call.seq} tools/call {call.target!r}" for call, _ in unknown)
    return (
        f"assert_relisted_after_changes() cannot judge {calls}: a 2026-07-28 request carries no session, no "
        "tools/list reached the fake between the change and the call, and the call came on a TCP connection that "
        "carried nothing before the change, so it may be a client that began after the change (which need not "
        "list again) or one that lived through it on a new connection (which should have). If one client sent "
        "every modern-era request in this test, say so: assert_relisted_after_changes(single_client=True) "
        "(docs/changing-tools.md#which-client-sent-a-call)"
    )
