"""AuthServer: the OAuth authorization server beside the fake, and the bearer check on its endpoint.

It answers as an SDK server built with ``AuthSettings`` and an in-memory provider does (measured on mcp 1.x and
2.x, docs/authorization.md): protected-resource metadata (RFC 9728), authorization-server metadata (RFC 8414),
dynamic client registration (RFC 7591), an authorization endpoint that approves at once and redirects with the
code (PKCE S256 required), a token endpoint for the ``authorization_code`` and ``refresh_token`` grants
(refresh tokens rotate: each is good for one refresh), resource indicators (RFC 8707) and the 401/403 challenges.
Every grant it answers is an :class:`AuthEvent`, which the auth oracles read beside the journal.

Past the soft size cap on purpose: one server's endpoints share its records of clients, codes and tokens, and
each answer is a few measured lines; split by endpoint, every grant would reach into another module's state.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlencode

from .._wire._protocol import INVALID_REQUEST, Flavour, ParseFailure, dumps

if TYPE_CHECKING:
    from .._wire._options import FakeMCPOptions
    from .._wire._types import JSONObject
    from ._request import RequestContext

__all__ = ["PRM_PREFIX", "AuthEvent", "AuthServer", "bearer_of", "challenge_body", "challenge_headers"]

PRM_PREFIX: Final = "/.well-known/oauth-protected-resource"
ASM_PATH: Final = "/.well-known/oauth-authorization-server"
_ENDPOINTS: Final = ("/register", "/authorize", "/token")
_METADATA_HEADERS: Final = (("cache-control", "public, max-age=3600"), ("vary", "Origin"))
_TOKEN_HEADERS: Final = (("cache-control", "no-store"), ("pragma", "no-cache"), ("vary", "Origin"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthEvent:
    """One answer of the authorization server (or one bearer refusal on the endpoint), for the auth oracles."""

    seq: int
    """The journal exchange it answered."""
    endpoint: str
    """``"register"``, ``"authorize"``, ``"token"`` or ``"challenge"`` (a 401/403 on the MCP endpoint)."""
    status: int
    grant: str | None = None
    """For ``"token"``: ``"authorization_code"`` or ``"refresh_token"``."""
    presented: str | None = None
    """The refresh token a refresh presented, or the bearer token a challenge refused (None: none sent)."""
    renews: str | None = None
    """For a refresh: the access token issued with the refresh token it presented."""
    issued: str | None = None
    """The access token it issued."""
    client_id: str | None = None
    error: str | None = None
    session_id: str | None = None


@dataclass(slots=True, kw_only=True)
class _Token:
    access: str
    refresh: str
    client_id: str
    scopes: tuple[str, ...]
    resource: str | None
    expires_at: float
    expired: bool = False
    refresh_live: bool = True
    sessions: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    scopes: tuple[str, ...]
    resource: str | None


def bearer_of(headers: Mapping[str, str]) -> str | None:
    """The bearer token an ``Authorization`` header carries, or None."""
    value = headers.get("authorization")
    if value is None or not value.lower().startswith("bearer "):
        return None
    return value[7:]


def challenge_headers(
    request: RequestContext, error: str, description: str, scope: str | None = None
) -> list[tuple[str, str]]:
    """The SDK's ``WWW-Authenticate`` challenge (with ``scope=`` only where a fault asks for a step-up)."""
    parts = [f'error="{error}"', f'error_description="{description}"']
    if scope is not None:
        parts.append(f'scope="{scope}"')
    host = request.headers.get("host", "127.0.0.1")
    parts.append(f'resource_metadata="http://{host}{PRM_PREFIX}{request.scope.get("path", "")}"')
    return [("www-authenticate", f"Bearer {', '.join(parts)}")]


def challenge_body(error: str, description: str) -> bytes:
    """The SDK's challenge body: ``json.dumps`` with its default separators (spaces), unlike the other bodies."""
    return json.dumps({"error": error, "error_description": description}).encode()


class AuthServer:
    """The authorization server's state for one test: clients, codes, tokens, the scopes required now."""

    def __init__(self, options: Callable[[], FakeMCPOptions], now: Callable[[], float]) -> None:
        self._options = options
        self._now = now
        self.clients: dict[str, JSONObject] = {}
        self._codes: dict[str, _Code] = {}
        self.tokens: dict[str, _Token] = {}
        self._by_refresh: dict[str, _Token] = {}
        self.required: list[str] = list(options().auth_scopes)
        """The scopes every request's token must carry; a step-up fault adds one."""
        self.events: list[AuthEvent] = []

    # --- routing ------------------------------------------------------------------------------

    def owns(self, path: str) -> bool:
        """Whether ``path`` is one of the authorization server's (or the resource metadata's)."""
        return path in _ENDPOINTS or path == ASM_PATH or path == PRM_PREFIX + self._options().path

    async def answer(self, request: RequestContext) -> None:
        """Answer an auth endpoint, or refuse an endpoint request without a good token (else leave it be)."""
        path = request.path
        options = self._options()
        if path == options.path:
            await self._check_bearer(request)
            return
        request.era = None  # no protocol era answers it
        verb = request.http_method
        allowed = "GET" if path.startswith("/.well-known/") else "POST" if path != "/authorize" else "GET, POST"
        if verb not in allowed.split(", "):
            await request.respond(
                405, b"Method Not Allowed", content_type="text/plain; charset=utf-8", headers=[("allow", allowed)]
            )
        elif path == ASM_PATH:
            await self._json(request, 200, self._server_metadata(request), _METADATA_HEADERS)
        elif path.startswith(PRM_PREFIX):
            await self._json(request, 200, self._resource_metadata(request), _METADATA_HEADERS)
        elif path == "/register":
            await self._register(request)
        elif path == "/authorize":
            await self._authorize(request)
        else:
            await self._token(request)

    def grant_of(self, request: RequestContext) -> str | None:
        """The ``grant_type`` of a token request (None: not one)."""
        if request.path != "/token" or request.http_method != "POST":
            return None
        return parse_qs(request.body.decode("latin-1")).get("grant_type", [""])[0]

    # --- the resource server's check ----------------------------------------------------------

    async def _check_bearer(self, request: RequestContext) -> None:
        token = bearer_of(request.headers)
        record = self.tokens.get(token) if token is not None else None
        if record is not None and record.expires_at <= self._now():
            record.expired = True
        if record is None or record.expired:
            await self.refuse(request, token, 401, "invalid_token", "Authentication required")
            return
        missing = [s for s in self.required if s not in record.scopes]
        if missing:
            await self.refuse(request, token, 403, "insufficient_scope", f"Required scope: {missing[0]}")
            return
        if request.session_id is not None:
            record.sessions.add(request.session_id)

    async def refuse(
        self,
        request: RequestContext,
        token: str | None,
        status: int,
        error: str,
        description: str,
        *,
        scope: str | None = None,
    ) -> None:
        """Answer a challenge (the SDK's, or a fault's) and note it."""
        self.events.append(
            AuthEvent(
                seq=request.seq,
                endpoint="challenge",
                status=status,
                presented=token,
                error=error,
                session_id=request.session_id,
            )
        )
        await request.respond(
            status,
            challenge_body(error, description),
            content_type="application/json",
            headers=challenge_headers(request, error, description, scope),
        )

    async def refuse_token_request(self, request: RequestContext, error: str, text: str) -> None:
        """Refuse a token request as the token endpoint refuses one (a fault's ``refuse_refresh``)."""
        form = {k: v[0] for k, v in parse_qs(request.body.decode("latin-1")).items()}
        grant, presented = form.get("grant_type"), form.get("refresh_token")
        request.message = ParseFailure(code=INVALID_REQUEST, message="an OAuth form", body={"grant_type": grant})
        old = self._by_refresh.get(presented or "")
        await self._error(
            request,
            "token",
            400,
            error,
            text,
            grant=grant,
            presented=presented,
            renews=old.access if old is not None else None,
            headers=_TOKEN_HEADERS,
        )

    async def refuse_registration(self, request: RequestContext, status: int) -> None:
        """Refuse a registration: 400 ``invalid_client_metadata``, or 404 (an SDK server without registration)."""
        request.era = None
        if status == 404:
            self._note(request, "register", 404, error="not_found")
            await request.respond(404, b"Not Found", content_type="text/plain; charset=utf-8")
            return
        await self._error(request, "register", status, "invalid_client_metadata", "Client registration refused")

    def expire(self, *, session_id: str | None = None) -> int:
        """Expire every live access token (or those used in ``session_id``); how many were live."""
        count = 0
        for record in self.tokens.values():
            if record.expired or (session_id is not None and session_id not in record.sessions):
                continue
            record.expired = True
            count += 1
        return count

    def revoke_refresh(self) -> int:
        """Revoke every live refresh token; how many were live."""
        live = [r for r in self.tokens.values() if r.refresh_live]
        for record in live:
            record.refresh_live = False
        return len(live)

    def require(self, scope: str) -> None:
        """Require ``scope`` on every request from now on (a step-up)."""
        if scope not in self.required:
            self.required.append(scope)

    # --- metadata -----------------------------------------------------------------------------

    def _issuer(self, request: RequestContext) -> str:
        origin = f"http://{request.headers.get('host', '127.0.0.1')}"
        return origin + "/" if self._options().server_flavour is Flavour.MCP1 else origin

    def _resource_metadata(self, request: RequestContext) -> JSONObject:
        origin = f"http://{request.headers.get('host', '127.0.0.1')}"
        return {
            "resource": origin + self._options().path,
            "authorization_servers": [self._issuer(request)],
            "scopes_supported": list(self.required),
            "bearer_methods_supported": ["header"],
        }

    def _server_metadata(self, request: RequestContext) -> JSONObject:
        issuer = self._issuer(request)
        base = issuer.rstrip("/")
        return {
            "issuer": issuer,
            "authorization_endpoint": base + "/authorize",
            "token_endpoint": base + "/token",
            "registration_endpoint": base + "/register",
            "scopes_supported": self._supported(),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
        }

    def _supported(self) -> list[str]:
        return list(dict.fromkeys([*self._options().auth_scopes, *self.required]))

    # --- registration, authorization, tokens -----------------------------------------------------

    async def _register(self, request: RequestContext) -> None:
        flavour = self._options().server_flavour
        try:
            metadata = json.loads(request.body or b"null")
        except ValueError:
            metadata = None
        refusal = _registration_refusal(metadata, flavour, self._supported())
        if refusal is not None:
            await self._error(request, "register", 400, "invalid_client_metadata", refusal)
            return
        options = self._options()
        # client_id_issued_at is wall-clock epoch seconds, as a real server's (not the test's monotonic clock)
        info = _registered(metadata, options.server_flavour, " ".join(options.auth_scopes), time.time())
        client_id = str(info["client_id"])
        self.clients[client_id] = info
        self._note(request, "register", 201, client_id=client_id)
        await self._json(request, 201, info, (("vary", "Origin"),))

    async def _authorize(self, request: RequestContext) -> None:
        query = request.scope.get("query_string", b"").decode("latin-1")
        if request.http_method == "POST":
            query = request.body.decode("latin-1")
        params = {k: v[0] for k, v in parse_qs(query).items()}
        state = params.get("state")
        client = self.clients.get(params.get("client_id", ""))
        if client is None:
            text = f"Client ID '{params.get('client_id')}' not found"
            await self._error(request, "authorize", 400, "invalid_request", text, state=state)
            return
        redirect = params.get("redirect_uri") or client["redirect_uris"][0]
        if redirect not in client["redirect_uris"]:
            text = f"Redirect URI '{redirect}' not registered for client"
            await self._error(request, "authorize", 400, "invalid_request", text, state=state)
            return
        error = self._authorize_error(params, request)
        if error is not None:
            self._note(request, "authorize", 302, client_id=client["client_id"], error=error[0])
            await self._redirect(request, redirect, error=error[0], error_description=error[1], state=state)
            return
        code = secrets.token_urlsafe(16)
        scopes = tuple(params.get("scope", str(client.get("scope", ""))).split())
        self._codes[code] = _Code(
            client_id=client["client_id"],
            redirect_uri=redirect,
            challenge=params["code_challenge"],
            scopes=scopes or tuple(self.required),
            resource=params.get("resource"),
        )
        self._note(request, "authorize", 302, client_id=client["client_id"])
        await self._redirect(request, redirect, code=code, state=state)

    def _authorize_error(self, params: dict[str, str], request: RequestContext) -> tuple[str, str] | None:
        if params.get("response_type") != "code":
            return "unsupported_response_type", "response_type must be 'code'"
        if "code_challenge" not in params:
            return "invalid_request", "code_challenge: Field required"
        if params.get("code_challenge_method", "S256") != "S256":
            return "invalid_request", "code_challenge_method: Input should be 'S256'"
        unknown = [s for s in params.get("scope", "").split() if s not in self._supported()]
        if unknown:
            return "invalid_scope", f"Client was not registered with scope {unknown[0]}"
        if not self._resource_ok(params.get("resource"), request):
            return "invalid_target", f"resource {params.get('resource')!r} is not this server"
        return None

    def _resource_ok(self, resource: str | None, request: RequestContext) -> bool:
        """RFC 8707: a resource the client names must be this MCP endpoint (a trailing slash aside)."""
        if resource is None:
            return True
        mine = f"http://{request.headers.get('host', '127.0.0.1')}{self._options().path}"
        return resource.rstrip("/").lower() == mine.rstrip("/").lower()

    async def _token(self, request: RequestContext) -> None:
        form = {k: v[0] for k, v in parse_qs(request.body.decode("latin-1")).items()}
        grant = form.get("grant_type")
        # The journal's request_body for a form: the grant alone (a diagram reads it; secrets stay out).
        request.message = ParseFailure(code=INVALID_REQUEST, message="an OAuth form", body={"grant_type": grant})
        client = self._authenticate(request, form)
        if isinstance(client, str):
            invalid = "invalid_client" if self._options().server_flavour is Flavour.MCP2 else "unauthorized_client"
            await self._error(request, "token", 401, invalid, client, grant=grant, headers=_TOKEN_HEADERS)
            return
        if grant == "authorization_code":
            await self._code_grant(request, form, client)
        elif grant == "refresh_token":
            await self._refresh_grant(request, form, client)
        else:
            tags = "'authorization_code', 'refresh_token'"
            if self._options().server_flavour is Flavour.MCP2:
                tags += ", 'urn:ietf:params:oauth:grant-type:jwt-bearer'"
            text = f": Input tag '{grant}' found using 'grant_type' does not match any of the expected tags: {tags}"
            await self._error(request, "token", 400, "invalid_request", text, grant=grant, headers=_TOKEN_HEADERS)

    def _authenticate(self, request: RequestContext, form: dict[str, str]) -> JSONObject | str:
        """The client a token request names and proves (``client_secret_post`` or ``_basic``), or why not."""
        client_id, secret = form.get("client_id"), form.get("client_secret")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            try:
                client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            except ValueError:
                return "Invalid Basic authentication header"
        client = self.clients.get(client_id or "")
        if client is None:
            return "Invalid client_id"
        if client.get("client_secret") and client["client_secret"] != secret:
            return "Invalid client_secret"
        return client

    async def _code_grant(self, request: RequestContext, form: dict[str, str], client: JSONObject) -> None:
        code = self._codes.get(form.get("code", ""))
        why = None
        if code is None or code.client_id != client["client_id"]:
            why = "authorization code does not exist"
        elif form.get("redirect_uri", code.redirect_uri) != code.redirect_uri:
            why = "redirect_uri did not match the one used when creating auth code"
        elif _s256(form.get("code_verifier", "")) != code.challenge:
            why = "incorrect code_verifier"
        elif not self._resource_ok(form.get("resource"), request):
            await self._token_error(request, "authorization_code", "invalid_target", "resource is not this server")
            return
        if why is not None or code is None:
            await self._token_error(request, "authorization_code", "invalid_grant", why or "")
            return
        del self._codes[form["code"]]
        record = self._issue(client["client_id"], code.scopes, form.get("resource") or code.resource)
        self._note(request, "token", 200, grant="authorization_code", issued=record.access, client_id=record.client_id)
        await self._json(request, 200, self._token_body(record), _TOKEN_HEADERS)

    async def _refresh_grant(self, request: RequestContext, form: dict[str, str], client: JSONObject) -> None:
        presented = form.get("refresh_token", "")
        old = self._by_refresh.get(presented)
        if old is None or not old.refresh_live or old.client_id != client["client_id"]:
            renews = old.access if old is not None else None
            text = "refresh token does not exist"
            await self._token_error(request, "refresh_token", "invalid_grant", text, presented, renews)
            return
        scopes = tuple(form["scope"].split()) if form.get("scope") else old.scopes
        extra = [s for s in scopes if s not in old.scopes]
        if extra:
            text = f"cannot request scope `{extra[0]}` not provided by refresh token"
            await self._token_error(request, "refresh_token", "invalid_scope", text, presented, old.access)
            return
        old.refresh_live = False  # rotation: a refresh token is good for one refresh
        record = self._issue(old.client_id, scopes, old.resource)
        record.sessions.update(old.sessions)
        self._note(
            request,
            "token",
            200,
            grant="refresh_token",
            presented=presented,
            renews=old.access,
            issued=record.access,
            client_id=record.client_id,
        )
        await self._json(request, 200, self._token_body(record), _TOKEN_HEADERS)

    def issue_for_test(self, scopes: tuple[str, ...]) -> str:
        """An access token minted for the test, with no grant: as good as one the token endpoint issues."""
        return self._issue("pytest-fake-mcp-test", scopes, None).access

    def _issue(self, client_id: str, scopes: tuple[str, ...], resource: str | None) -> _Token:
        lifetime = self._options().token_lifetime
        record = _Token(
            access=f"at-{secrets.token_urlsafe(12)}",
            refresh=f"rt-{secrets.token_urlsafe(12)}",
            client_id=client_id,
            scopes=scopes,
            resource=resource,
            expires_at=self._now() + lifetime,
        )
        self.tokens[record.access] = record
        self._by_refresh[record.refresh] = record
        return record

    def _token_body(self, record: _Token) -> JSONObject:
        return {
            "access_token": record.access,
            "token_type": "Bearer",
            "expires_in": int(self._options().token_lifetime),
            "scope": " ".join(record.scopes),
            "refresh_token": record.refresh,
        }

    # --- answers ------------------------------------------------------------------------------

    async def _token_error(
        self,
        request: RequestContext,
        grant: str,
        error: str,
        text: str,
        presented: str | None = None,
        renews: str | None = None,
    ) -> None:
        await self._error(
            request, "token", 400, error, text, grant=grant, presented=presented, renews=renews, headers=_TOKEN_HEADERS
        )

    async def _error(
        self,
        request: RequestContext,
        endpoint: str,
        status: int,
        error: str,
        text: str,
        *,
        state: str | None = None,
        grant: str | None = None,
        presented: str | None = None,
        renews: str | None = None,
        headers: tuple[tuple[str, str], ...] = (("vary", "Origin"),),
    ) -> None:
        self._note(request, endpoint, status, grant=grant, presented=presented, renews=renews, error=error)
        body: JSONObject = {"error": error, "error_description": text}
        if state is not None:
            body["state"] = state
        if endpoint == "authorize":
            headers = (("cache-control", "no-store"),)
        await self._json(request, status, body, headers)

    def _note(self, request: RequestContext, endpoint: str, status: int, **fields: str | None) -> None:
        self.events.append(AuthEvent(seq=request.seq, endpoint=endpoint, status=status, **fields))

    async def _json(
        self, request: RequestContext, status: int, body: JSONObject, headers: tuple[tuple[str, str], ...]
    ) -> None:
        await request.respond(status, dumps(body), content_type="application/json", headers=headers)

    async def _redirect(self, request: RequestContext, to: str, **params: str | None) -> None:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        location = f"{to}{'&' if '?' in to else '?'}{query}"
        await request.respond(302, b"", headers=[("cache-control", "no-store"), ("location", location)])


_MCP2_FIELDS: Final = (
    "response_types", "scope", "client_name", "client_uri", "logo_uri", "contacts", "tos_uri", "policy_uri",
    "jwks_uri", "jwks", "software_id", "software_version", "redirect_uris", "token_endpoint_auth_method",
    "grant_types", "application_type", "client_id", "client_secret", "client_id_issued_at",
    "client_secret_expires_at",
)  # fmt: skip
"""The keys of mcp 2.x's registration answer, in its order (its ``OAuthClientInformationFull`` fields)."""
_MCP1_FIELDS: Final = (
    "redirect_uris", "token_endpoint_auth_method", "grant_types", "response_types", "scope", "client_name",
    "client_uri", "logo_uri", "contacts", "tos_uri", "policy_uri", "jwks_uri", "jwks", "software_id",
    "software_version", "client_id", "client_secret", "client_id_issued_at",
)  # fmt: skip
"""The keys of mcp 1.x's, in its order: no ``application_type`` and no ``client_secret_expires_at``."""
_MCP1_NOT_AN_OBJECT: Final = ": Input should be a valid dictionary or instance of OAuthClientMetadata"
_URL_FIELDS: Final = frozenset(("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri"))
"""Optional URLs both lines read an empty string in as absent."""


_AUTH_METHODS: Final = ("none", "client_secret_post", "client_secret_basic", "private_key_jwt")
_BAD_AUTH_METHOD: Final = (
    "token_endpoint_auth_method: Input should be 'none', 'client_secret_post', 'client_secret_basic'"
    " or 'private_key_jwt'"
)
_JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_PRE_REGISTERED: Final = "the identity-assertion grant requires a pre-registered client"


def _registration_refusal(metadata: object, flavour: Flavour, supported: list[str]) -> str | None:
    """The ``error_description`` of the 400 a real SDK server answers this registration with (None: it registers).

    Its model's checks first, every failure joined by newlines, then its handler's, first one wins.
    """
    if not isinstance(metadata, dict):
        return ": Input should be an object" if flavour is Flavour.MCP2 else _MCP1_NOT_AN_OBJECT
    errors: list[str] = []
    uris = metadata.get("redirect_uris")
    if uris == []:
        errors.append("redirect_uris: List should have at least 1 item after validation, not 0")
    elif not isinstance(uris, list):
        errors.append("redirect_uris: Field required")
    method = metadata.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        errors.append(_BAD_AUTH_METHOD)
    if flavour is Flavour.MCP2 and metadata.get("application_type", "native") not in ("web", "native"):
        errors.append("application_type: Input should be 'web' or 'native'")
    if errors:
        return "\n".join(errors)
    if flavour is Flavour.MCP2 and method == "private_key_jwt":
        return "token_endpoint_auth_method 'private_key_jwt' is not supported"
    invalid = [s for s in str(metadata.get("scope") or "").split() if s not in supported]
    if invalid:
        return f"Requested scopes are not valid: {', '.join(invalid)}"
    grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
    grants = grants if isinstance(grants, list) else []
    if flavour is Flavour.MCP1 and not {"authorization_code", "refresh_token"} <= set(grants):
        return "grant_types must be authorization_code and refresh_token"
    if flavour is Flavour.MCP2 and "authorization_code" not in grants:
        return "grant_types must include 'authorization_code'"
    if flavour is Flavour.MCP2 and _JWT_BEARER in grants:
        return f"grant_types must not include '{_JWT_BEARER}'; {_PRE_REGISTERED}"
    responses = metadata.get("response_types", ["code"])
    if not isinstance(responses, list) or "code" not in responses:
        return "response_types must include 'code' for authorization_code grant"
    return None


def _registered(metadata: JSONObject, flavour: Flavour, default_scope: str, now: float) -> JSONObject:
    """The client record a real SDK server registers and answers with, key for key (docs/authorization.md).

    Only the RFC 7591 fields its model knows are kept (anything else, a ``client_id`` or ``client_secret`` the
    client sent included, is dropped), in the model's field order; a null is omitted on both lines and an empty
    string on 2.x too (so ``"scope": ""`` is echoed by 1.x and left out by 2.x). The id is a uuid4, the secret 32
    random bytes in hex, and a public client (``token_endpoint_auth_method: none``) gets no secret.
    """
    record: JSONObject = {
        "response_types": ["code"],
        "grant_types": ["authorization_code", "refresh_token"],
        "application_type": "native",
        **{k: v for k, v in metadata.items() if v is not None},
        "client_id": str(uuid.uuid4()),
        "client_id_issued_at": int(now),
    }
    record["scope"] = default_scope if record.get("scope") is None else record["scope"]
    record.setdefault("token_endpoint_auth_method", "client_secret_post")
    record.pop("client_secret", None)
    record.pop("client_secret_expires_at", None)
    if record["token_endpoint_auth_method"] != "none":
        record["client_secret"] = secrets.token_hex(32)
        record["client_secret_expires_at"] = 0
    if flavour is Flavour.MCP2:
        return {k: record[k] for k in _MCP2_FIELDS if k in record and record[k] != ""}
    return {k: record[k] for k in _MCP1_FIELDS if k in record and not (k in _URL_FIELDS and record[k] == "")}


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
