"""RequestMatcher: which requests a scripted fault acts on, by MCP message rather than by URL.

Every MCP POST goes to the same ``/mcp``, so a matcher looks at the JSON-RPC method, the tool (or
prompt/resource) it names, its arguments, the ``Mcp-Session-Id`` it carries, the HTTP method and the protocol
era that answers it.
``difference()`` returns ``(field, actual, expected)`` triples so failure messages can show near
misses field by field (pytest-httpserver's idea).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._fake._handlers import KNOWN_METHODS
from .._record._journal import Exchange
from .._wire._errors import ScriptError

if TYPE_CHECKING:
    from .._fake._request import RequestContext
    from .._wire._types import SessionId

__all__ = ["ANY", "RequestMatcher"]

_HTTP_METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})
EXCHANGE_ERAS: Final = ("handshake", "modern")
"""The eras an exchange can be answered by (a server may serve both; one request meets one)."""


class _Any:
    """Sentinel: this field matches anything (distinct from None, which means "absent")."""

    _instance: _Any | None = None

    def __new__(cls) -> _Any:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Fields:
    """The matchable parts of a request, from a live RequestContext or a journal Exchange."""

    http_method: str
    method: str | None
    target: str | None
    arguments: Any
    session_id: SessionId | None
    era: str | None


def _fields(request: RequestContext | Exchange) -> _Fields:
    if isinstance(request, Exchange):
        body = request.request_body
        http_method, method, target, session_id = (
            request.http_method,
            request.rpc_method,
            request.target,
            request.session_id,
        )
    else:
        incoming = request.incoming
        body = incoming.raw if incoming is not None else None
        http_method, method, session_id = request.http_method, request.rpc_method, request.session_id
        target = incoming.target if incoming is not None else None
    params = body.get("params") if isinstance(body, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return _Fields(
        http_method=http_method,
        method=method,
        target=target,
        arguments=arguments,
        session_id=session_id,
        era=request.era,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMatcher:
    """Which requests a fault acts on; every field left ``ANY`` matches anything.

    Example::

        RequestMatcher(method="tools/call", tool="search")        # POST tools/call of 'search'
        RequestMatcher(http_method="GET")                          # the standalone GET stream
        RequestMatcher(method="initialize", has_session=True)      # an initialize carrying a session id
        RequestMatcher(method="tools/call", era="modern")          # a tools/call the 2026-07-28 era answers
    """

    method: str | _Any = ANY
    """The JSON-RPC method, e.g. ``"tools/call"`` (implies POST)."""
    tool: str | _Any = ANY
    """The tool a ``tools/call`` names (implies ``method="tools/call"``)."""
    target: str | _Any = ANY
    """``params.name`` or ``params.uri``: a prompt or resource."""
    arguments: Mapping[str, Any] | _Any = ANY
    """Tool arguments that must all be present with these values (others may be there too)."""
    session_id: SessionId | _Any | None = ANY
    """The ``Mcp-Session-Id`` the request carries; None: carries none."""
    has_session: bool | _Any = ANY
    """True: carries any ``Mcp-Session-Id``; False: carries none."""
    http_method: str | _Any = ANY
    """``"GET"`` (the standalone stream), ``"DELETE"``, ``"POST"``, ..."""
    era: str | _Any = ANY
    """The era answering the request: ``"handshake"`` (sessions) or ``"modern"`` (2026-07-28, stateless)."""

    def __post_init__(self) -> None:
        method = self.method
        if isinstance(method, str):
            _check_method(method)
        if isinstance(self.tool, str):
            if isinstance(method, str) and method != "tools/call":
                raise ScriptError(
                    f"tool={self.tool!r} only matches 'tools/call', not method={method!r}; "
                    f"for a prompt or resource use target={self.tool!r}"
                )
            object.__setattr__(self, "method", "tools/call")
        if isinstance(self.http_method, str):
            verb = self.http_method.upper()
            if verb not in _HTTP_METHODS:
                raise ScriptError(f"http_method={self.http_method!r} is not an HTTP method; use e.g. 'GET' or 'DELETE'")
            object.__setattr__(self, "http_method", verb)
            if isinstance(self.method, str) and verb != "POST":
                raise ScriptError(
                    f"method={self.method!r} is a JSON-RPC method, sent only in POST bodies, "
                    f"so it never matches http_method={verb!r}; drop one of them"
                )
        if not isinstance(self.era, _Any) and self.era not in EXCHANGE_ERAS:
            hint = (
                "'dual' is what a server serves; each request is answered by one era"
                if self.era == "dual"
                else "leave era out to match both"
            )
            raise ScriptError(f"era={self.era!r} must be 'handshake' or 'modern' ({hint})")
        if not isinstance(self.arguments, _Any) and not isinstance(self.arguments, Mapping):
            raise ScriptError(f"arguments={self.arguments!r} must be a dict of tool arguments, e.g. {{'q': 'x'}}")

    def matches(self, request: RequestContext | Exchange) -> bool:
        """True if ``request`` (live, or a journal record) satisfies every field."""
        return not self.difference(request)

    def difference(self, request: RequestContext | Exchange) -> list[tuple[str, Any, Any]]:
        """The fields that do not match, as ``(field, actual, expected)``; empty if it matches."""
        fields = _fields(request)
        diffs: list[tuple[str, Any, Any]] = []
        wanted_verb = self.http_method if isinstance(self.http_method, str) else None
        if wanted_verb is None and isinstance(self.method, str):
            wanted_verb = "POST"
        if wanted_verb is not None and fields.http_method != wanted_verb:
            diffs.append(("http_method", fields.http_method, wanted_verb))
        if isinstance(self.method, str) and fields.method != self.method:
            diffs.append(("method", fields.method, self.method))
        if isinstance(self.tool, str) and fields.target != self.tool:
            diffs.append(("tool", fields.target, self.tool))
        if isinstance(self.target, str) and fields.target != self.target:
            diffs.append(("target", fields.target, self.target))
        if isinstance(self.arguments, Mapping):
            actual = fields.arguments if isinstance(fields.arguments, Mapping) else {}
            if any(key not in actual or actual[key] != value for key, value in self.arguments.items()):
                diffs.append(("arguments", fields.arguments, dict(self.arguments)))
        if not isinstance(self.session_id, _Any) and fields.session_id != self.session_id:
            diffs.append(("session_id", fields.session_id, self.session_id))
        if isinstance(self.has_session, bool) and (fields.session_id is not None) != self.has_session:
            diffs.append(("has_session", fields.session_id is not None, self.has_session))
        if isinstance(self.era, str) and fields.era != self.era:
            diffs.append(("era", fields.era, self.era))
        return diffs

    def __str__(self) -> str:
        verb = self.http_method if isinstance(self.http_method, str) else None
        if isinstance(self.method, str):
            what = f"POST {self.method}"
        elif verb == "GET":
            what = "GET stream"
        elif verb in ("POST", "DELETE"):
            what = verb
        elif verb is not None:
            what = f"{verb} request"
        else:
            what = "any request"
        if isinstance(self.tool, str):
            what += f" {self.tool!r}"
        if isinstance(self.target, str):
            what += f" of {self.target!r}"
        if isinstance(self.arguments, Mapping):
            what += f" with arguments {dict(self.arguments)!r}"
        if isinstance(self.session_id, str):
            where = f"in session {self.session_id[:8]}"
        elif self.session_id is None or self.has_session is False:
            where = "without a session id"
        elif self.has_session is True:
            where = "carrying a session id"
        else:
            where = "in any session"
        era = f" in the {self.era} era" if isinstance(self.era, str) else ""
        return f"{what} {where}{era}"

    def __repr__(self) -> str:
        given = [
            f"{name}={getattr(self, name)!r}"
            for name in ("method", "tool", "target", "arguments", "session_id", "has_session", "http_method", "era")
            if not isinstance(getattr(self, name), _Any)
        ]
        return f"RequestMatcher({', '.join(given)})"


def _check_method(method: str) -> None:
    if method.upper() in _HTTP_METHODS:
        raise ScriptError(
            f"{method!r} is an HTTP method, not a JSON-RPC method; use on(http_method={method.upper()!r})"
        )
    if method in KNOWN_METHODS:
        return
    close = difflib.get_close_matches(method, sorted(KNOWN_METHODS), n=1, cutoff=0.6)
    if close:
        raise ScriptError(f"method {method!r} is not an MCP method the fake knows; did you mean {close[0]!r}?")
    if "/" not in method:
        known = ", ".join(sorted(KNOWN_METHODS))
        raise ScriptError(f"method {method!r} is not an MCP method the fake knows; known methods: {known}")
