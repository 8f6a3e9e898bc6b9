"""FakeMCPOptions: how one fake server behaves; marker kwargs go straight in here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

from ._errors import ScriptError
from ._protocol import Flavour

__all__ = ["DEFAULT_ALLOWED_HOSTS", "DEFAULT_ALLOWED_ORIGINS", "ERAS", "LEAKS", "FakeMCPOptions"]

DEFAULT_ALLOWED_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*")
DEFAULT_ALLOWED_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
_FOUR_MIB: Final = 4 * 1024 * 1024
ERAS: Final = ("handshake", "modern", "dual")
"""The values of the ``era`` option (and of ``fake-mcp serve --era``)."""
LEAKS: Final = ("warn", "fail", "ignore")
"""The values of the ``leaks`` option."""


class _FlavourDefault:
    """Sentinel: take the default of the chosen flavour (differs between mcp 1.x and 2.x)."""

    def __repr__(self) -> str:
        return "FLAVOUR_DEFAULT"


FLAVOUR_DEFAULT: Final = _FlavourDefault()


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeMCPOptions:
    """Everything that shapes one fake server; set per test with the marker.

    Example::

        @pytest.mark.fake_mcp_server(json_response=True, flavour="mcp1")
        def test_json_mode(fake_mcp_server): ...
    """

    flavour: Flavour | str = Flavour.MCP2
    """Which SDK server line to imitate where they differ: ``"mcp2"`` (default) or ``"mcp1"``."""
    json_response: bool = False
    """Answer POSTs as ``application/json`` instead of SSE (the SDK's ``json_response=True``)."""
    path: str = "/mcp"
    """The endpoint path."""
    dns_rebinding_protection: bool = True
    """Check Host and Origin as the SDK does for loopback servers (421/403)."""
    allowed_hosts: tuple[str, ...] = DEFAULT_ALLOWED_HOSTS
    allowed_origins: tuple[str, ...] = DEFAULT_ALLOWED_ORIGINS
    max_sessions: int = 10_000
    """Live sessions at which a new one is refused with 503 (the 2.x SDK default)."""
    max_body_size: int | _FlavourDefault | None = FLAVOUR_DEFAULT
    """Bodies over this get 413 (2.x: 4 MiB; 1.x: no limit)."""
    idle_timeout: float | _FlavourDefault | None = FLAVOUR_DEFAULT
    """Seconds of inactivity after which a session is forgotten (2.x: 1800; 1.x: never)."""
    sse_ping_interval: float = 15.0
    """Seconds between keepalive comments on open SSE streams (sse-starlette's 15 s)."""
    echo_tool: bool = True
    """Serve the built-in ``echo(text)`` tool."""
    server_name: str = "fake-mcp"
    server_version: str = "0.1.0"
    instructions: str | None = None
    assert_all_faults_fired: bool = True
    """Fail the test at teardown if a scripted fault never fired."""
    fail_on_server_error: bool = True
    """Fail the test at teardown if the fake raised while answering (a handler's exception included)."""
    assert_no_requests_after_close: bool = False
    """Fail the test at teardown if a request arrived after ``fake_mcp_server.mark_client_closed()``."""
    hold_timeout: float | None = 30.0
    """Seconds into the test after which every request a fault still holds (``hang()``, a gate never opened, a
    held stream) has its connection reset and the test fails at teardown saying what was held; None: no bound.
    It bounds the fake's waits, not the test: pytest-timeout bounds a test as a whole."""
    fail_on_unknown_tool: bool = True
    """Fail the test at teardown if the client called a tool the fake does not serve (a typo in the test or a
    wrongly routed call; the client got an ``isError`` result it may have swallowed)."""
    list_changed: bool = False
    """Announce each change of the tools, resources or prompts made during the test (``add_tool`` over a name,
    ``remove_tool``, ...) with ``notifications/<list>/list_changed`` on each session's GET stream, and say
    ``listChanged: true`` in the ``initialize`` capabilities, as a real server built to announce does. Off: changes
    take effect silently, as ``MCPServer.remove_tool`` does. See docs/changing-tools.md."""
    leaks: str = "warn"
    """At teardown, an httpx/httpx2 client the test built that talked to the fake and was left open when the test
    ended (closed later only as its event loop shut down, or not at all), and the sessions it left on the server:
    ``"warn"`` (a warning in pytest's summary), ``"fail"`` (the test fails) or ``"ignore"`` (for a test that means
    to leave it open). See docs/fixtures.md#leaks."""
    era: str | _FlavourDefault = FLAVOUR_DEFAULT
    """Which protocol eras the fake serves: ``"handshake"`` (sessions and ``initialize``), ``"modern"`` (the
    stateless 2026-07-28 era only) or ``"dual"`` (both, routed per request by ``MCP-Protocol-Version``, as an
    mcp 2.x server does). Default: ``"dual"`` with ``flavour="mcp2"``, ``"handshake"`` with ``flavour="mcp1"``.
    See docs/eras.md."""
    auth: bool = False
    """Serve an OAuth authorization server beside the endpoint and require a bearer token on it, as an SDK server
    with ``AuthSettings`` does: 401 challenges, metadata, registration, PKCE, tokens. See docs/authorization.md."""
    auth_scopes: tuple[str, ...] = ("mcp",)
    """With ``auth``: the scopes every request's token must carry (the SDK's ``required_scopes``)."""
    token_lifetime: float = 3600.0
    """With ``auth``: seconds an access token lives (its ``expires_in``)."""
    event_store: bool = False
    """Keep every SSE event in an event store, as an SDK server built with ``event_store=`` does: events carry
    ``id:`` lines, answers at 2025-11-25+ open with a priming event, and a GET with ``Last-Event-ID`` replays what
    the client missed. Off: no ids, and such a GET gets 500, as a server without a store. See
    docs/resumable-streams.md."""
    retry_interval: int | None = None
    """With ``event_store``: the ``retry:`` (milliseconds) the priming events carry, the SDK's ``retry_interval``;
    None: no ``retry:`` line (clients wait their default, 1 s)."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        try:
            flavour = Flavour(self.flavour)
        except ValueError:
            raise ScriptError(
                f"flavour={self.flavour!r} is not known; use flavour='mcp2' (default) or flavour='mcp1'"
            ) from None
        object.__setattr__(self, "flavour", flavour)
        if not self.path.startswith("/"):
            raise ScriptError(f"path={self.path!r} must start with '/', e.g. path='/mcp'")
        if self.max_sessions < 1:
            raise ScriptError(f"max_sessions={self.max_sessions!r} must be >= 1")
        if self.sse_ping_interval <= 0:
            raise ScriptError(f"sse_ping_interval={self.sse_ping_interval!r} must be > 0")
        if isinstance(self.max_body_size, _FlavourDefault):
            object.__setattr__(self, "max_body_size", _FOUR_MIB if flavour is Flavour.MCP2 else None)
        if isinstance(self.era, _FlavourDefault):
            object.__setattr__(self, "era", "dual" if flavour is Flavour.MCP2 else "handshake")
        if self.era not in ERAS:
            raise ScriptError(f"era={self.era!r} is not known; use one of {', '.join(map(repr, ERAS))}")
        if self.leaks not in LEAKS:
            raise ScriptError(f"leaks={self.leaks!r} is not known; use one of {', '.join(map(repr, LEAKS))}")
        if flavour is Flavour.MCP1 and self.era != "handshake":
            raise ScriptError(
                f"era={self.era!r} needs flavour='mcp2': mcp 1.x servers know only the handshake era; "
                "use era='handshake' (the mcp1 default) or flavour='mcp2'"
            )
        if isinstance(self.idle_timeout, _FlavourDefault):
            object.__setattr__(self, "idle_timeout", 1800.0 if flavour is Flavour.MCP2 else None)
        limit = self.hold_timeout
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0):
            raise ScriptError(f"hold_timeout={self.hold_timeout!r} must be > 0 (seconds), or None for no bound")
        scopes = self.auth_scopes
        if not isinstance(scopes, tuple | list) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
            raise ScriptError(f"auth_scopes={self.auth_scopes!r} must be a tuple of scope names, e.g. ('mcp',)")
        object.__setattr__(self, "auth_scopes", tuple(self.auth_scopes))
        lifetime = self.token_lifetime
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
            raise ScriptError(
                f"token_lifetime={lifetime!r} must be > 0 seconds; to expire tokens mid-test script "
                "fake_mcp_server.on('tools/call').expire_tokens()"
            )
        retry = self.retry_interval
        if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int) or retry < 0):
            raise ScriptError(f"retry_interval={retry!r} must be whole milliseconds >= 0 (e.g. 100), or None")
        if retry is not None and not self.event_store:
            raise ScriptError(
                f"retry_interval={retry!r} needs event_store=True: only priming events carry retry:, and only a "
                "server with an event store sends them"
            )
        if isinstance(self.idle_timeout, int | float) and self.idle_timeout <= 0:
            raise ScriptError(f"idle_timeout={self.idle_timeout!r} must be > 0, or None for no expiry")

    @property
    def server_flavour(self) -> Flavour:
        flavour = self.flavour  # a Flavour since __post_init__; read several times per request (issue 11)
        return flavour if isinstance(flavour, Flavour) else Flavour(flavour)

    @property
    def served_era(self) -> str:
        """``"handshake"``, ``"modern"`` or ``"dual"`` (the flavour's default resolved)."""
        return str(self.era)

    @property
    def body_limit(self) -> int | None:
        return self.max_body_size if isinstance(self.max_body_size, int) else None

    @property
    def idle_limit(self) -> float | None:
        return float(self.idle_timeout) if isinstance(self.idle_timeout, int | float) else None

    def merged(self, **changes: Any) -> FakeMCPOptions:
        """A copy with ``changes`` applied (typos fail with Python's own TypeError)."""
        return replace(self, **changes)
