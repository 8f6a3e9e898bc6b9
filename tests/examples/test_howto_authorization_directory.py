"""How-to: authorization for a whole directory, by overriding ``fake_mcp_options`` (docs/authorization.md)."""

from __future__ import annotations

import pytest

from pytest_fake_mcp import FakeMCPServer


# --8<-- [start:auth-fixture]
# conftest.py: every fake_mcp_server under this directory wants a token with both scopes
@pytest.fixture
def fake_mcp_options(fake_mcp_options):  # ini defaults and markers already applied
    return fake_mcp_options.merged(auth=True, auth_scopes=("mcp", "read"))


# --8<-- [end:auth-fixture]


def test_the_directory_options_switch_authorization_on(fake_mcp_server: FakeMCPServer) -> None:
    import httpx

    assert httpx.post(fake_mcp_server.url, json={}).status_code == 401
    metadata = httpx.get(f"{fake_mcp_server.origin}/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["scopes_supported"] == ["mcp", "read"]
