"""Auth faults: tokens expired or refused on the endpoint, a step-up, and a refresh or registration refused or slow.

The first three act on MCP requests (``on("tools/call").expire_tokens()``); the others on the authorization
server's own requests, so they are scripted on every request (``on().refuse_refresh()``) and fire only on
theirs: a refresh at the token endpoint, a registration. Each needs ``auth=True`` but ``unauthorized()``,
which a server without an authorization server can answer too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .._fake._auth import bearer_of, challenge_body, challenge_headers
from ._fault import Fault, Firing

if TYPE_CHECKING:
    from .._fake._auth import AuthServer
    from .._wire._options import FakeMCPOptions

__all__ = ["Challenge", "DelayRefresh", "ExpireTokens", "RefuseRefresh", "RefuseRegistration", "StepUp"]

from .._wire._protocol import AUTH_SERVER_PATHS as _AUTH_PATHS


def _on_endpoint(firing: Firing) -> bool:
    """The request is for the MCP endpoint, not the authorization server."""
    return not firing.request.path.startswith(_AUTH_PATHS)


class _NeedsAuth(Fault):
    """A fault that acts on the authorization server: scripting it on a server without one fails at its line.

    It fires only when the server serves one and `acts_on` the request; `act` does the rest.
    """

    __slots__ = ()

    def unserved(self, options: FakeMCPOptions) -> str | None:
        if options.auth:
            return None
        return (
            "it acts on the authorization server, which this server does not serve: switch it on with "
            "@pytest.mark.fake_mcp_server(auth=True) (docs/authorization.md)"
        )

    def fires(self, firing: Firing) -> bool:
        return firing.auth is not None and self.acts_on(firing, firing.auth)

    async def apply(self, firing: Firing) -> None:
        if firing.auth is not None:
            await self.act(firing, firing.auth)

    def acts_on(self, firing: Firing, auth: AuthServer) -> bool:
        """Whether it acts on this request (the server serves an authorization server)."""
        return _on_endpoint(firing)

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireTokens(_NeedsAuth):
    """Expire every live access token (or those the request's session used) now; the request meets the 401."""

    session_only: bool = False
    revoke_refresh: bool = False

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        request = firing.request
        auth.expire(session_id=request.session_id if self.session_only else None)
        if self.revoke_refresh:
            auth.revoke_refresh()

    def __str__(self) -> str:
        which = "the session's access tokens" if self.session_only else "every access token"
        return f"Expire {which}" + (" and revoke the refresh tokens" if self.revoke_refresh else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Challenge(Fault):
    """Answer 401 with the SDK's ``invalid_token`` challenge; the token stays good."""

    answers: ClassVar[bool] = True

    def fires(self, firing: Firing) -> bool:
        return _on_endpoint(firing)

    async def apply(self, firing: Firing) -> None:
        request = firing.request
        error, text = "invalid_token", "Authentication required"
        if firing.auth is not None:
            await firing.auth.refuse(request, bearer_of(request.headers), 401, error, text)
            return
        await request.respond(
            401,
            challenge_body(error, text),
            content_type="application/json",
            headers=challenge_headers(request, error, text),
        )

    def __str__(self) -> str:
        return "Answer 401 invalid_token"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepUp(_NeedsAuth):
    """Require ``scope`` from now on and answer 403 ``insufficient_scope`` naming the scopes needed."""

    answers: ClassVar[bool] = True
    scope: str

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        auth.require(self.scope)
        request = firing.request
        text = f"Required scope: {self.scope}"
        await auth.refuse(
            request, bearer_of(request.headers), 403, "insufficient_scope", text, scope=" ".join(auth.required)
        )

    def __str__(self) -> str:
        return f"Answer 403 insufficient_scope, requiring {self.scope!r} from now on"


@dataclass(frozen=True, slots=True, kw_only=True)
class RefuseRefresh(_NeedsAuth):
    """Refuse a refresh at the token endpoint with 400 ``invalid_grant`` (the refresh token is gone)."""

    answers: ClassVar[bool] = True

    def acts_on(self, firing: Firing, auth: AuthServer) -> bool:
        return auth.grant_of(firing.request) == "refresh_token"

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        await auth.refuse_token_request(firing.request, "invalid_grant", "refresh token does not exist")

    def __str__(self) -> str:
        return "Refuse the refresh (400 invalid_grant)"


@dataclass(frozen=True, slots=True, kw_only=True)
class DelayRefresh(_NeedsAuth):
    """Hold a refresh at the token endpoint ``seconds`` before the server answers it."""

    seconds: float

    def acts_on(self, firing: Firing, auth: AuthServer) -> bool:
        return auth.grant_of(firing.request) == "refresh_token"

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        await asyncio.sleep(self.seconds)  # the fault's own latency, not a synchronisation

    def __str__(self) -> str:
        return f"Delay the refresh {self.seconds}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class RefuseRegistration(_NeedsAuth):
    """Refuse a dynamic client registration: 400 ``invalid_client_metadata``, or 404 (no registration)."""

    answers: ClassVar[bool] = True
    status: int = 400

    def acts_on(self, firing: Firing, auth: AuthServer) -> bool:
        request = firing.request
        return request.path == "/register" and request.http_method == "POST"

    async def act(self, firing: Firing, auth: AuthServer) -> None:
        await auth.refuse_registration(firing.request, self.status)

    def __str__(self) -> str:
        return f"Refuse the registration ({self.status})"
