"""The era oracles: what reuse means in the 2026-07-28 era, which has no sessions (docs/eras.md).

One ``server/discover`` per client, list results kept while their ``ttlMs`` holds, no
``Mcp-Session-Id`` on modern requests, and a handshake-only client that stops at the era refusal.
"""

from __future__ import annotations

import json
from typing import Any

from .._record._journal import Exchange
from .._record._report import plural
from ._figures import ServerFigures, count, fail

__all__ = [
    "assert_discover_once",
    "assert_list_results_cached",
    "assert_no_session_ids",
    "assert_stopped_after_era_refusal",
    "list_cache_violations",
]


_LIST_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})


def _cache_window(exchange: Exchange) -> float:
    """Seconds the answer of ``exchange`` let a client reuse it (its ``ttlMs``; 0 if none or not a result)."""
    for message in exchange.response_messages:
        result = message.get("result")
        if isinstance(result, dict):
            ttl = result.get("ttlMs")
            if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
                return ttl / 1000
    return 0.0


def _cursor(exchange: Exchange) -> Any:
    body = exchange.request_body
    params = body.get("params") if isinstance(body, dict) else None
    return params.get("cursor") if isinstance(params, dict) else None


def assert_discover_once(figures: ServerFigures, *, clients: int = 1) -> None:
    """Each client sent ``server/discover`` once, not per call; see ``FakeMCPServer.assert_discover_once``."""
    __tracebackhide__ = True
    count("clients", clients, 1)
    probes = [e for e in figures.exchanges if e.rpc_method == "server/discover"]
    if len(probes) == clients:
        return
    if not probes:
        hint = (
            "no probe arrived: the client skipped server/discover (a pinned era, e.g. mode='legacy') "
            f"or never reached {figures.url}"
        )
    else:
        hint = (
            "the client probes again per call or per task: build the client once and keep it, the era it "
            "learned from one probe holds for its life (docs/eras.md)"
        )
    marks = {e.seq: f"probe {i} of {len(probes)}" for i, e in enumerate(probes, 1) if i > clients}
    calls = sum(1 for e in figures.exchanges if e.era == "modern" and e.rpc_method not in (None, "server/discover"))
    fail(
        figures,
        f"assert_discover_once(clients={clients}): {plural(len(probes), 'server/discover')} arrived, "
        f"expected {clients}.",
        [f"{calls} other modern-era requests"],
        marks,
        hint,
    )


def list_cache_violations(figures: ServerFigures) -> dict[int, str]:
    """List requests sent again while an earlier answer to the same list was still fresh (its ``ttlMs``)."""
    fresh: dict[tuple[str, str], tuple[float, int, float]] = {}  # (method, cursor) -> (until, seq, ttl)
    bad: dict[int, str] = {}
    for exchange in figures.exchanges:
        if exchange.era != "modern" or exchange.rpc_method not in _LIST_METHODS:
            continue
        key = (exchange.rpc_method, json.dumps(_cursor(exchange)))
        held = fresh.get(key)
        if held is not None and exchange.started < held[0]:
            age = (exchange.started - (held[0] - held[2])) * 1000
            bad[exchange.seq] = (
                f"listed again {age:.0f}ms after #{held[1]}, whose answer was fresh {held[2] * 1000:.0f}ms"
            )
        window = _cache_window(exchange)
        if window > 0 and exchange.ended is not None:
            fresh[key] = (exchange.ended + window, exchange.seq, window)
    return bad


def assert_list_results_cached(figures: ServerFigures) -> None:
    """No list request was repeated while its last answer's ``ttlMs`` held; see ``FakeMCPServer``'s method."""
    __tracebackhide__ = True
    bad = list_cache_violations(figures)
    if not bad:
        return
    cacheable = sum(1 for e in figures.exchanges if e.rpc_method in _LIST_METHODS and _cache_window(e) > 0)
    fail(
        figures,
        f"assert_list_results_cached(): {plural(len(bad), 'list request')} went to the server while the last "
        "answer was still fresh.",
        [f"{cacheable} list answers carried ttlMs > 0"],
        bad,
        "keep the list result the server said was fresh for ttlMs and answer repeats from it (the mcp 2.x Client "
        "does so per Client instance: reuse one instead of building one per call)",
    )


def assert_no_session_ids(figures: ServerFigures) -> None:
    """No modern-era request carried ``Mcp-Session-Id``; see ``FakeMCPServer.assert_no_session_ids``."""
    __tracebackhide__ = True
    bad = {
        e.seq: f"carried session id {e.session_id[:8]}"
        for e in figures.exchanges
        if e.era == "modern" and e.session_id is not None
    }
    modern = sum(1 for e in figures.exchanges if e.era == "modern")
    if modern == 0:
        fail(
            figures,
            "assert_no_session_ids(): no exchange was answered in the 2026-07-28 era.",
            [f"{len(figures.exchanges)} exchanges, all handshake"],
            None,
            "the client never went modern: serve it with era='modern' or 'dual', and let it probe (mode='auto')",
        )
    if not bad:
        return
    fail(
        figures,
        f"assert_no_session_ids(): {plural(len(bad), 'modern-era request')} carried Mcp-Session-Id.",
        [f"{modern} modern-era exchanges"],
        bad,
        "the 2026-07-28 era has no sessions: a client that went modern (or whose server was upgraded) must drop "
        "any session id it kept from the handshake and never send one (docs/eras.md)",
    )


def assert_stopped_after_era_refusal(figures: ServerFigures) -> None:
    """The client's ``initialize`` was refused for its era and it stopped there; see ``FakeMCPServer``'s method."""
    __tracebackhide__ = True
    refusals = [e for e in figures.exchanges if e.rpc_method == "initialize" and e.error_code == -32022]
    if not refusals:
        fail(
            figures,
            "assert_stopped_after_era_refusal(): no initialize was refused for its era.",
            [f"{figures.initialize_count} initialize, {len(figures.exchanges)} exchanges"],
            None,
            "serve the client with era='modern' (or script on('initialize').refuse_initialize()) to meet a "
            "modern-only server",
        )
    first = refusals[0]
    after = [e for e in figures.exchanges if e.seq > first.seq]
    if not after:
        return
    marks = {first.seq: "refused: the server speaks only 2026-07-28"}
    marks.update({e.seq: "sent after the refusal" for e in after})
    fail(
        figures,
        f"assert_stopped_after_era_refusal(): {plural(len(after), 'request')} followed the refused initialize.",
        [f"{len(refusals)} initialize refused with -32022"],
        marks,
        "a handshake-only client meeting a modern-only server must fail with the versions the server named "
        "(error.data.supported), not retry the handshake or go on without a session",
    )
