"""The auth oracles: one token grant per expiry, no refused token sent again, one registration, the session kept.

Each reads the journal's exchanges beside the authorization server's :class:`AuthEvent` list (``auth=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._fake._auth import AuthEvent, bearer_of
from .._record._analysis import event_order
from .._record._journal import Exchange
from .._record._report import plural
from ._figures import ServerFigures, count, fail

__all__ = [
    "assert_no_refused_token_reused",
    "assert_no_reregistration",
    "assert_session_kept_across_auth",
    "assert_single_flight_refresh",
    "redundant_grants",
]

from .._wire._protocol import AUTH_SERVER_PATHS as _AUTH_PATHS

_GRANT_PATHS = ("/register", "/authorize", "/token")


def _short(token: str | None) -> str:
    return "(no token)" if token is None else f"{token[:10]}…"


def redundant_grants(events: Sequence[AuthEvent]) -> dict[int, str]:
    """Token grants sent for an expiry an earlier grant had already renewed, by exchange ``seq``.

    A refresh is for the access token issued with the refresh token it presents; an authorization-code grant
    is for the token the latest 401 before it refused. A grant for an expiry some earlier-sent grant renewed
    (answered 200) is redundant, whether it ran beside that one (no single flight) or after it.
    """
    renewed: dict[str, int] = {}
    refused: str | None = None
    bad: dict[int, str] = {}
    for event in sorted(events, key=lambda e: e.seq):
        if event.endpoint == "challenge" and event.status == 401:
            refused = event.presented
            continue
        if event.endpoint != "token":
            continue
        key = event.renews if event.grant == "refresh_token" else refused
        if key is None:
            continue
        if key in renewed:
            bad[event.seq] = f"{event.grant} grant again for {_short(key)}, renewed by #{renewed[key]}"
        elif event.status == 200:
            renewed[key] = event.seq
    return bad


def assert_single_flight_refresh(figures: ServerFigures, events: Sequence[AuthEvent]) -> None:
    """One token grant per expiry however many requests met its 401; see ``FakeMCPServer``'s delegate."""
    __tracebackhide__ = True
    bad = redundant_grants(events)
    if not bad:
        return
    grants = [e for e in events if e.endpoint == "token"]
    refusals = sum(1 for e in events if e.endpoint == "challenge" and e.status == 401)
    fail(
        figures,
        f"assert_single_flight_refresh(): {plural(len(bad), 'redundant token grant')} among {len(grants)}.",
        [f"{plural(refusals, '401 challenge')}", *(f"#{seq}: {why}" for seq, why in sorted(bad.items()))],
        bad,
        "each request that met the 401 renewed the token on its own: hold one refresh (a lock or a shared "
        "future) and let the others wait for its token (docs/authorization.md#single-flight-refresh)",
    )


def assert_no_refused_token_reused(figures: ServerFigures, events: Sequence[AuthEvent]) -> None:
    """No request carried a bearer token after the fake answered 401 to it; see the delegate."""
    __tracebackhide__ = True
    # The same request sent again (its method, session and JSON-RPC id) once its 401 was answered: a request of
    # its own may carry the token too, stamped before the 401 and still on its way (concurrent calls), so only a
    # resend proves the client had the 401 in hand.
    refused_at: dict[tuple[str, object, object, object], Exchange] = {}
    by_seq = {e.seq: e for e in figures.exchanges}
    for event in events:
        if event.endpoint == "challenge" and event.status == 401 and event.presented is not None:
            exchange = by_seq.get(event.seq)
            if exchange is not None:
                refused_at.setdefault((event.presented, *_request_key(exchange)), exchange)
    start, end = event_order(list(figures.exchanges))
    bad: dict[int, str] = {}
    for exchange in figures.exchanges:
        token = bearer_of(exchange.request_headers)
        first = refused_at.get((token, *_request_key(exchange))) if token is not None else None
        if first is not None and start(exchange) > end(first):
            bad[exchange.seq] = f"sent {_short(token)} again, refused at #{first.seq}"
    if not bad:
        return
    fail(
        figures,
        f"assert_no_refused_token_reused(): {plural(len(bad), 'request')} carried a token after its 401.",
        [f"{plural(len({key[0] for key in refused_at}), 'token')} refused"],
        bad,
        "a 401 means the token is gone: drop it and send the renewed one (docs/authorization.md#refused-tokens)",
    )


def _request_key(exchange: Exchange) -> tuple[object, object, object]:
    """What makes a resend the same request: its HTTP method, session and JSON-RPC id (and method)."""
    return (exchange.http_method, exchange.session_id, repr((exchange.rpc_method, exchange.rpc_id)))


def assert_no_reregistration(figures: ServerFigures, events: Sequence[AuthEvent], *, clients: int = 1) -> None:
    """At most ``clients`` dynamic registrations succeeded; see the delegate."""
    __tracebackhide__ = True
    count("clients", clients, 1)
    done = [e for e in events if e.endpoint == "register" and e.status == 201]
    if len(done) <= clients:
        return
    marks = {e.seq: f"registration {i} of {len(done)}" for i, e in enumerate(done, 1) if i > clients}
    fail(
        figures,
        f"assert_no_reregistration(clients={clients}): {plural(len(done), 'registration')} succeeded, "
        f"expected at most {clients}.",
        [f"{plural(sum(1 for e in events if e.endpoint == 'token'), 'token request')}"],
        marks,
        "the client registers again on each 401 or refresh: keep the client_id it got (its TokenStorage's "
        "client info) for the server's life (docs/authorization.md#registration)",
    )


def assert_session_kept_across_auth(figures: ServerFigures, events: Sequence[AuthEvent]) -> None:
    """A 401/403 did not make the client open a new session, nor a 404 renew its token; see the delegate."""
    __tracebackhide__ = True
    challenged = {e.seq for e in events if e.endpoint == "challenge"}
    exchanges = [e for e in figures.exchanges if not e.path.startswith(_AUTH_PATHS)]
    start, end = event_order(list(figures.exchanges))
    bad = _renewed_after_loss(figures.exchanges, challenged, start, end)
    for refused in exchanges:
        session = refused.session_id
        if refused.seq not in challenged or session is None:
            continue
        later = sorted((e for e in exchanges if start(e) > end(refused)), key=start)
        for exchange in later:
            if exchange.session_id == session:
                break  # it went on in the session (whatever the answer)
            if exchange.rpc_method == "initialize":
                bad[exchange.seq] = f"a new session after the {refused.status} at #{refused.seq} in {session[:8]}"
                break
    if not bad:
        return
    fail(
        figures,
        f"assert_session_kept_across_auth(): {plural(len(bad), 'exchange')} took a token problem for session loss "
        "or session loss for a token problem.",
        [f"{plural(len(challenged), 'challenge')} answered"],
        bad,
        "a 401 or 403 is about the token: renew it and retry in the same session; a 404 is about the session: open "
        "a new one, the token is still good (docs/authorization.md#the-session-across-a-refresh)",
    )


def _renewed_after_loss(
    exchanges: tuple[Exchange, ...],
    challenged: set[int],
    start: Callable[[Exchange], float],
    end: Callable[[Exchange], float],
) -> dict[int, str]:
    """Authorization-server requests between a session's 404 and the next ``initialize``."""
    bad: dict[int, str] = {}
    for lost in exchanges:
        if lost.status != 404 or lost.session_id is None or lost.path.startswith(_AUTH_PATHS):
            continue
        for exchange in sorted((e for e in exchanges if start(e) > end(lost)), key=start):
            if exchange.rpc_method == "initialize" or exchange.seq in challenged:
                break  # the new session; or a 401/403 since, which a renewal answers
            if exchange.path in _GRANT_PATHS:
                bad[exchange.seq] = f"{exchange.path} after the 404 at #{lost.seq}: the token was still good"
    return bad
