"""Auth faults and the auth oracles: each oracle firing on a deliberately broken client and passing on a good one."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import httpx
import pytest

from _auth_clients import OAuthState, Refresher, call_echo, login, open_session
from pytest_fake_mcp import FakeMCPServer, FakeMCPServerFactory, ScriptError, VerificationError
from pytest_fake_mcp._fake._auth import AuthEvent

AUTH_JSON = pytest.mark.fake_mcp_server(auth=True, json_response=True)


async def _logged_in(server: FakeMCPServer, **broken: bool) -> tuple[httpx.AsyncClient, str, Refresher]:
    state = OAuthState(origin=server.origin, resource=server.url)
    async with httpx.AsyncClient(timeout=10) as http:
        await login(http, state)
    auth = Refresher(state, **broken)
    http = httpx.AsyncClient(auth=auth, timeout=10)
    session = await open_session(http, server.url)
    return http, session, auth


async def _two_calls_meet_expiry(server: FakeMCPServer, **broken: bool) -> Refresher:
    """Two concurrent calls both meet the 401 of an expired token (held together, then expired)."""
    server.on("tools/call").barrier(2)
    server.on("tools/call").expire_tokens()
    http, session, auth = await _logged_in(server, **broken)
    async with aclosing(http), asyncio.timeout(15):
        answers = await asyncio.gather(*(call_echo(http, server.url, session, t) for t in "ab"))
    assert [a.status_code for a in answers] == [200, 200]
    return auth


# --- single-flight refresh ---------------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_single_flight_refresh_fires_on_two_refreshes_for_one_expiry(fake_mcp_server: FakeMCPServer) -> None:
    auth = await _two_calls_meet_expiry(fake_mcp_server, single_flight=False)
    assert auth.refreshes == 2
    # Both refreshes present the same refresh token; the server rotates it, so one is refused and its request
    # logs in anew. Which refresh reaches the server first is the loop's choice: if the refused one was sent
    # first it renewed nothing and is not counted, and only the login after it is redundant.
    with pytest.raises(
        AssertionError,
        match=r"assert_single_flight_refresh\(\): (1 redundant token grant|2 redundant token grants) among 4",
    ) as info:
        fake_mcp_server.assert_single_flight_refresh()
    assert "grant again for" in str(info.value)
    assert "POST /token refresh_token" in str(info.value)  # the diagram shows the auth exchanges


@AUTH_JSON
@pytest.mark.asyncio
async def test_single_flight_refresh_passes_on_one_refresh_for_two_401s(fake_mcp_server: FakeMCPServer) -> None:
    auth = await _two_calls_meet_expiry(fake_mcp_server, single_flight=True)
    assert auth.refreshes == 1
    fake_mcp_server.assert_single_flight_refresh()
    fake_mcp_server.assert_no_refused_token_reused()
    fake_mcp_server.assert_no_reregistration()
    fake_mcp_server.assert_session_kept_across_auth()


# --- refused tokens ------------------------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_refused_token_reuse_fires_when_the_client_retries_with_the_same_token(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("tools/call").expire_tokens()
    http, session, _ = await _logged_in(fake_mcp_server, reuse_refused=True)
    async with aclosing(http):
        answer = await call_echo(http, fake_mcp_server.url, session, "a")
    assert answer.status_code == 401
    assert answer.json() == {"error": "invalid_token", "error_description": "Authentication required"}
    with pytest.raises(AssertionError, match=r"1 request carried a token after its 401"):
        fake_mcp_server.assert_no_refused_token_reused()


# --- registration ------------------------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_reregistration_fires_on_a_client_that_registers_per_renewal(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").expire_tokens()
    http, session, _ = await _logged_in(fake_mcp_server, register_each_time=True)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 200
    with pytest.raises(AssertionError, match=r"2 registrations succeeded, expected at most 1"):
        fake_mcp_server.assert_no_reregistration()
    fake_mcp_server.assert_no_reregistration(clients=2)


@AUTH_JSON
@pytest.mark.asyncio
async def test_refused_registration_answers_400_invalid_client_metadata(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on().refuse_registration()
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(f"{fake_mcp_server.origin}/register", json={"redirect_uris": ["http://x/cb"]})
        again = await http.post(f"{fake_mcp_server.origin}/register", json={"redirect_uris": ["http://x/cb"]})
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_client_metadata", "error_description": "Client registration refused"}
    assert again.status_code == 201  # once, as every scripted fault by default


# --- the session across a refresh ------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_session_kept_fires_when_a_401_makes_the_client_open_a_new_session(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("tools/call").expire_tokens()
    http, session, _ = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        http.auth = None  # type: ignore[assignment]  # this client treats a 401 as a lost session
        first = await call_echo(http, fake_mcp_server.url, session, "a")
        assert first.status_code == 401
        state = OAuthState(origin=fake_mcp_server.origin, resource=fake_mcp_server.url)
        await login(http, state)
        http.headers["authorization"] = f"Bearer {state.tokens.access}"
        await open_session(http, fake_mcp_server.url)
    with pytest.raises(AssertionError, match=r"1 exchange took a token problem for session loss") as info:
        fake_mcp_server.assert_session_kept_across_auth()
    assert "a new session after the 401" in str(info.value)


@AUTH_JSON
@pytest.mark.asyncio
async def test_session_kept_fires_when_a_404_makes_the_client_renew_its_token(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").drop_session()
    http, session, auth = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 404
        async with httpx.AsyncClient(timeout=10) as plain:
            await login(plain, auth.state)  # this client takes the 404 for a token problem
        session = await open_session(http, fake_mcp_server.url)
        assert (await call_echo(http, fake_mcp_server.url, session, "b")).status_code == 200
    with pytest.raises(AssertionError, match=r"2 exchanges took a token problem") as info:
        fake_mcp_server.assert_session_kept_across_auth()
    assert "/token after the 404" in str(info.value)


@AUTH_JSON
@pytest.mark.asyncio
async def test_expiry_and_session_loss_together_allow_the_new_session(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").expire_tokens().drop_session()
    http, session, _ = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 404  # renewed, then 404
        session = await open_session(http, fake_mcp_server.url)
        assert (await call_echo(http, fake_mcp_server.url, session, "b")).status_code == 200
    fake_mcp_server.assert_session_kept_across_auth()  # it tried its session first: the 404 ended it
    fake_mcp_server.assert_single_flight_refresh()


# --- refresh faults ---------------------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_refused_refresh_falls_back_to_a_new_authorization(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").expire_tokens()
    fake_mcp_server.on().refuse_refresh()
    http, session, _ = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 200
    token = [e for e in fake_mcp_server.journal.exchanges if e.path == "/token"]
    assert [(e.request_body, e.status) for e in token] == [
        ({"grant_type": "authorization_code"}, 200),
        ({"grant_type": "refresh_token"}, 400),
        ({"grant_type": "authorization_code"}, 200),
    ]
    fake_mcp_server.assert_single_flight_refresh()  # a refused refresh renewed nothing: the login is not redundant
    assert {e.era for e in fake_mcp_server.journal.exchanges if e.path != "/mcp"} == {None}  # answered by no era


@AUTH_JSON
@pytest.mark.asyncio
async def test_revoked_refresh_tokens_answer_invalid_grant(fake_mcp_server: FakeMCPServer) -> None:
    state = OAuthState(origin=fake_mcp_server.origin, resource=fake_mcp_server.url)
    async with httpx.AsyncClient(timeout=10) as http:
        await login(http, state)
        assert fake_mcp_server.revoke_refresh_tokens() == 1
        form = {"grant_type": "refresh_token", "refresh_token": state.tokens.refresh}
        form |= {"client_id": state.client_id, "client_secret": state.client_secret}
        answer = await http.post(f"{fake_mcp_server.origin}/token", data=form)
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_grant", "error_description": "refresh token does not exist"}


@AUTH_JSON
@pytest.mark.asyncio
async def test_delayed_refresh_answers_late_but_answers(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").expire_tokens()
    fake_mcp_server.on().delay_refresh(0.2)
    http, session, _ = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 200
    (refresh,) = [e for e in fake_mcp_server.journal.exchanges if e.request_body == {"grant_type": "refresh_token"}]
    assert refresh.status == 200
    assert (refresh.duration or 0) >= 0.2


# --- stray 401, expiry now ---------------------------------------------------------------------------------


@AUTH_JSON
@pytest.mark.asyncio
async def test_unauthorized_answers_the_challenge_once_and_the_token_stays_good(
    fake_mcp_server: FakeMCPServer,
) -> None:
    fake_mcp_server.on("tools/call").unauthorized()
    http, session, auth = await _logged_in(fake_mcp_server, reuse_refused=True)
    async with aclosing(http):
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 200  # retried, same token
    assert auth.refreshes == 0
    with pytest.raises(AssertionError, match=r"carried a token after its 401"):
        fake_mcp_server.assert_no_refused_token_reused()


@AUTH_JSON
@pytest.mark.asyncio
async def test_expire_tokens_now_refuses_the_next_request(fake_mcp_server: FakeMCPServer) -> None:
    http, session, auth = await _logged_in(fake_mcp_server)
    async with aclosing(http):
        assert fake_mcp_server.expire_tokens() == 1
        assert (await call_echo(http, fake_mcp_server.url, session, "a")).status_code == 200
    assert auth.refreshes == 1
    assert [e.status for e in fake_mcp_server.journal.exchanges if e.rpc_method == "tools/call"] == [401, 200]


@AUTH_JSON
@pytest.mark.asyncio
async def test_expire_tokens_of_one_session_leaves_the_other_sessions_tokens(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").nth(1).expire_tokens(session_only=True)
    first, session_a, auth_a = await _logged_in(fake_mcp_server)
    second, session_b, auth_b = await _logged_in(fake_mcp_server)
    async with aclosing(first), aclosing(second):
        await call_echo(first, fake_mcp_server.url, session_a, "a")
        await call_echo(second, fake_mcp_server.url, session_b, "b")
    assert (auth_a.refreshes, auth_b.refreshes) == (1, 0)


# --- scripting errors ----------------------------------------------------------------------------------------


def test_auth_server_faults_refuse_a_matcher_they_never_match(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"script it as fake_mcp_server.on\(\).refuse_refresh\(\)"):
        fake_mcp_server.on("tools/call").refuse_refresh()
    with pytest.raises(ScriptError, match=r"must be one scope name"):
        fake_mcp_server.on("tools/call").insufficient_scope("a b")
    with pytest.raises(ScriptError, match=r"must be 400 or 404"):
        fake_mcp_server.on().refuse_registration(status=500)


def test_auth_readers_without_auth_name_the_marker(fake_mcp_server: FakeMCPServer) -> None:
    with pytest.raises(ScriptError, match=r"fake_mcp_server\(auth=True\)"):
        fake_mcp_server.expire_tokens()
    with pytest.raises(ScriptError, match=r"fake_mcp_server\(auth=True\)"):
        fake_mcp_server.assert_single_flight_refresh()


def test_an_auth_fault_on_a_server_without_auth_fails_at_its_line_naming_the_marker(
    fake_mcp_server: FakeMCPServer,
) -> None:
    for script in (
        lambda: fake_mcp_server.on("tools/call").expire_tokens(),
        lambda: fake_mcp_server.on("tools/call").insufficient_scope("admin"),
        lambda: fake_mcp_server.on().refuse_refresh(),
        lambda: fake_mcp_server.on().delay_refresh(0.1),
        lambda: fake_mcp_server.on().refuse_registration(),
    ):
        with pytest.raises(
            ScriptError, match=r"does not serve: switch it on with @pytest\.mark\.fake_mcp_server\(auth"
        ):
            script()
    fake_mcp_server.on("tools/call").unauthorized().optional()  # a stray 401 needs no authorization server


@pytest.mark.fake_mcp_server(auth=True)
def test_an_auth_fault_on_a_server_with_auth_is_scripted(fake_mcp_server: FakeMCPServer) -> None:
    fake_mcp_server.on("tools/call").expire_tokens().optional()
    fake_mcp_server.on().refuse_refresh().optional()


# --- teardown ----------------------------------------------------------------------------------------------


def test_an_auth_fault_that_never_fired_fails_the_lease(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    with (
        pytest.raises(VerificationError, match=r"Refuse the refresh \(400 invalid_grant\)"),
        fake_mcp_server_factory.lease(auth=True) as server,
    ):
        server.on().refuse_refresh()  # no client ever refreshes


def test_an_auth_fault_that_fired_passes_the_lease(fake_mcp_server_factory: FakeMCPServerFactory) -> None:
    with fake_mcp_server_factory.lease(auth=True, json_response=True) as server:
        server.on().refuse_registration()
        assert httpx.post(f"{server.origin}/register", json={"redirect_uris": ["http://x/cb"]}).status_code == 400


# --- what counts as a redundant grant (the oracle's rule, on records) ------------------------------------


def _grant(seq: int, grant: str, status: int = 200, renews: str | None = None) -> AuthEvent:
    return AuthEvent(seq=seq, endpoint="token", status=status, grant=grant, renews=renews)


def _challenge(seq: int, token: str | None) -> AuthEvent:
    return AuthEvent(seq=seq, endpoint="challenge", status=401, presented=token)


@pytest.mark.parametrize(
    ("events", "redundant"),
    [
        pytest.param([_challenge(1, None), _grant(2, "authorization_code")], [], id="first-login"),
        pytest.param(
            [_grant(1, "refresh_token", renews="t1"), _grant(2, "refresh_token", renews="t2")], [], id="proactive"
        ),
        pytest.param(
            [_challenge(1, "t1"), _grant(2, "refresh_token", 400, "t1"), _grant(3, "authorization_code")],
            [],
            id="refused-refresh-then-login",
        ),
        pytest.param(
            [
                _challenge(1, "t1"),
                _challenge(2, "t1"),
                _grant(3, "refresh_token", renews="t1"),
                _grant(4, "refresh_token", 400, "t1"),
            ],
            [4],
            id="two-refreshes-one-expiry",
        ),
        pytest.param(
            [
                _challenge(1, "t1"),
                _grant(2, "authorization_code"),
                _challenge(3, "t1"),
                _grant(4, "authorization_code"),
            ],
            [4],
            id="login-again-for-a-late-401",
        ),
        pytest.param(
            [
                _challenge(1, "t1"),
                _grant(2, "authorization_code"),
                _challenge(3, "t2"),
                _grant(4, "authorization_code"),
            ],
            [],
            id="two-expiries",
        ),
    ],
)
def test_redundant_grants_are_those_for_an_expiry_already_renewed(
    events: list[AuthEvent], redundant: list[int]
) -> None:
    from pytest_fake_mcp._oracles._auth import redundant_grants

    assert sorted(redundant_grants(events)) == redundant


@pytest.mark.fake_mcp_server(json_response=True)
@pytest.mark.asyncio
async def test_unauthorized_answers_the_challenge_on_a_server_without_auth(fake_mcp_server: FakeMCPServer) -> None:
    """A 401 from a server that serves no metadata: the client's discovery then meets 404s."""
    fake_mcp_server.on("tools/call").unauthorized()
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, fake_mcp_server.url)
        answer = await call_echo(http, fake_mcp_server.url, session, "a")
        metadata = await http.get(f"{fake_mcp_server.origin}/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].endswith(
        f'resource_metadata="{fake_mcp_server.origin}/.well-known/oauth-protected-resource/mcp"'
    )
    assert metadata.status_code == 404
