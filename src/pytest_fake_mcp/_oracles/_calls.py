"""The call oracles: which tools ran, how many requests were in flight, what came after close, unknown tools."""

from __future__ import annotations

import difflib
import json

from .._record._journal import Exchange
from .._record._report import plural
from ._figures import ServerFigures, count, fail, in_flight_peak
from ._lists import removed_tool_calls

__all__ = [
    "assert_concurrent",
    "assert_no_requests_after_close",
    "assert_no_unknown_tool_calls",
    "assert_tool_ran",
]


def assert_tool_ran(figures: ServerFigures, name: str, *, times: int | None = None) -> None:
    """The handler of tool ``name`` ran ``times`` times (None: at least once)."""
    __tracebackhide__ = True
    if times is not None:
        count("times", times)
    ran = figures.tool_executions.get(name, 0)
    if (ran >= 1) if times is None else (ran == times):
        return
    calls = [e for e in figures.exchanges if e.rpc_method == "tools/call"]
    mine = [e for e in calls if e.target == name]
    marks = {e.seq: f"call of {name}" for e in mine}
    marks.update({e.seq: f"unknown tool {e.target!r}" for e in figures.unknown_tool_calls if e.seq not in marks})
    names = sorted({str(e.target) for e in calls if e.target} | set(figures.tool_executions) | set(figures.tools))
    close = difflib.get_close_matches(name, [n for n in names if n != name], n=1)
    served = not figures.tools or name in figures.tools
    executions = ", ".join(f"{k}×{v}" for k, v in sorted(figures.tool_executions.items())) or "none"
    facts = [
        f"tool executions: {executions}",
        f"tools/call {name!r}: {len(mine)} requests, answered {[e.status for e in mine]}",
    ]
    if not served:
        offered = ", ".join(repr(t) for t in figures.tools)
        facts.insert(0, f"the fake serves no tool named {name!r}; it serves {offered}")
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else f"register it with fake_mcp_server.add_tool({name!r}, handler) before the client calls it"
        )
    elif not mine and close:
        hint = f"no tools/call named {name!r} arrived; did you mean {close[0]!r}?"
    elif times is not None and ran > times and not _repeats(mine):
        hint = f"the client sent {plural(len(mine), 'call')} of {name!r}, with different arguments, and each ran"
    elif times is not None and ran > times:
        hint = (
            "the tool ran more often than expected: a retry replayed a call that had run "
            "(docs/failure-modes.md#r12); the SDK's tools/list after the first call_tool is not a run"
        )
    elif len(mine) > ran:
        hint = f"{len(mine) - ran} tools/call of {name!r} never reached the handler (refused, faulted or unknown)"
    else:
        hint = "the client sent fewer calls than expected; an error raised before the call would explain it"
    expected = "at least once" if times is None else f"{plural(times, 'time')}"
    fail(
        figures,
        f"assert_tool_ran({name!r}{'' if times is None else f', times={times}'}): the handler ran "
        f"{plural(ran, 'time')}, expected {expected}.",
        facts,
        marks,
        hint,
    )


def _repeats(calls: list[Exchange]) -> bool:
    """True if two of these ``tools/call`` requests carried the same arguments (a retry looks like that)."""
    bodies = [e.request_body for e in calls if isinstance(e.request_body, dict)]
    keys = [json.dumps({k: v for k, v in body.items() if k != "id"}, sort_keys=True, default=str) for body in bodies]
    return len(set(keys)) < len(keys)


def assert_concurrent(figures: ServerFigures, *, min_in_flight: int) -> None:
    """At least ``min_in_flight`` JSON-RPC requests were in flight at once."""
    __tracebackhide__ = True
    count("min_in_flight", min_in_flight, 1)
    peak = in_flight_peak(figures.exchanges)
    if len(peak) >= min_in_flight:
        return
    marks = {e.seq: f"{i} of {len(peak)} in flight together" for i, e in enumerate(peak, 1)}
    fail(
        figures,
        f"assert_concurrent(min_in_flight={min_in_flight}): at most {plural(len(peak), 'JSON-RPC request')} "
        f"in flight at once, expected at least {min_in_flight}.",
        [
            f"JSON-RPC requests: {sum(1 for e in figures.exchanges if e.kind == 'request')}",
            f"all exchanges in flight at once, GET streams included: {figures.max_in_flight}",
        ],
        marks,
        "the client awaited each call before sending the next: send them together (asyncio.gather, a task "
        "group) over one session; a lock held across the call serialises them (docs/failure-modes.md#c03)",
    )


def assert_no_requests_after_close(figures: ServerFigures) -> None:
    """No request arrived after the last ``mark_client_closed()``."""
    __tracebackhide__ = True
    after = figures.client_closed_after
    if after is None:
        fail(
            figures,
            "assert_no_requests_after_close(): mark_client_closed() was never called, so nothing marks "
            "when the client closed.",
            [],
            None,
            "call fake_mcp_server.mark_client_closed() right after your client is closed",
        )
    late = [e for e in figures.exchanges if e.seq > after]
    if not late:
        return
    fail(
        figures,
        f"assert_no_requests_after_close(): {plural(len(late), 'request')} arrived after the client was closed.",
        [f"closed after exchange #{after}"],
        {e.seq: "after close" for e in late},
        "a task outlived the client (a GET reconnect loop, a retry, a background refresh): cancel and await "
        "it when the client closes (docs/failure-modes.md#h04)",
    )


def assert_no_unknown_tool_calls(figures: ServerFigures) -> None:
    """No ``tools/call`` named a tool the fake does not serve (checked at teardown unless opted out).

    A call of a tool the test removed is not one: the test knew the tool, and a client may call it before it
    hears of the removal (or never hears, unannounced). ``assert_no_removed_tool_calls`` checks it when asked.
    """
    __tracebackhide__ = True
    removed = {call.seq for call, _ in removed_tool_calls(figures)}
    unknown = tuple(e for e in figures.unknown_tool_calls if e.seq not in removed)
    if not unknown:
        return
    names = sorted({str(e.target) for e in unknown})
    close = {n: difflib.get_close_matches(n, list(figures.tools), n=1) for n in names}
    guesses = [f"{n!r} (did you mean {c[0]!r}?)" if c else repr(n) for n, c in close.items()]
    fail(
        figures,
        f"The client called {plural(len(unknown), 'time')} a tool the fake does not serve: {', '.join(guesses)}.",
        [f"the fake serves: {', '.join(repr(t) for t in figures.tools) or 'no tools'}"],
        {e.seq: f"unknown tool {e.target!r}" for e in unknown},
        "register the tool with fake_mcp_server.add_tool(name, handler), fix the name the client sends, or, if "
        "the test means to call an unknown tool, set @pytest.mark.fake_mcp_server(fail_on_unknown_tool=False)",
    )
