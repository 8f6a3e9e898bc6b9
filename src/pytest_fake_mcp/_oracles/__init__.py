"""The oracles: the ``assert_*`` helpers of ``fake_mcp_server``, as functions over a frozen :class:`ServerFigures`.

``FakeMCPServer.assert_*`` take a fresh snapshot and call these; the fixture's teardown calls two of them.
Each fails with what was expected and what was found, the exchanges as a sequence diagram with the
culprits marked, then one hint.

- ``_figures``: :class:`ServerFigures`, what one server saw, frozen, and the failure every oracle raises;
- ``_auth``: the auth oracles (one grant per expiry, no refused token reused, one registration, session kept);
- ``_reuse``: the session oracles (``initialize`` count, session figures, reuse, stale ids, closing);
- ``_calls``: the call oracles (tools that ran, requests in flight, requests after close, unknown tools);
- ``_lists``: the list-change oracles (listed again after a change, no call of a removed tool);
- ``_resume``: the resume oracle (a stream cut after an event id was resumed with ``Last-Event-ID``, not re-sent);
- ``_versions``: the era oracles of the sessionless 2026-07-28 era (one probe, cached lists, no session ids).
"""

from __future__ import annotations

from ._auth import (
    assert_no_refused_token_reused,
    assert_no_reregistration,
    assert_session_kept_across_auth,
    assert_single_flight_refresh,
)
from ._calls import (
    assert_concurrent,
    assert_no_requests_after_close,
    assert_no_unknown_tool_calls,
    assert_tool_ran,
)
from ._figures import ServerFigures
from ._lists import assert_no_removed_tool_calls, assert_relisted_after_changes
from ._resume import assert_resumed
from ._reuse import (
    assert_all_sessions_closed,
    assert_initialize_count,
    assert_no_stale_session_ids,
    assert_session_reused,
    assert_sessions,
    reuse_violations,
)
from ._versions import (
    assert_discover_once,
    assert_list_results_cached,
    assert_no_session_ids,
    assert_stopped_after_era_refusal,
    list_cache_violations,
)

__all__ = [
    "ServerFigures",
    "assert_all_sessions_closed",
    "assert_concurrent",
    "assert_discover_once",
    "assert_initialize_count",
    "assert_list_results_cached",
    "assert_no_refused_token_reused",
    "assert_no_removed_tool_calls",
    "assert_no_requests_after_close",
    "assert_no_reregistration",
    "assert_no_session_ids",
    "assert_no_stale_session_ids",
    "assert_no_unknown_tool_calls",
    "assert_relisted_after_changes",
    "assert_resumed",
    "assert_session_kept_across_auth",
    "assert_session_reused",
    "assert_sessions",
    "assert_single_flight_refresh",
    "assert_stopped_after_era_refusal",
    "assert_tool_ran",
    "list_cache_violations",
    "reuse_violations",
]
