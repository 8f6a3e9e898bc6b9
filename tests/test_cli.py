"""``fake-mcp serve``: the fake standalone; its first stdout line is the URL; SIGINT/SIGTERM stop it cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from pytest_fake_mcp._cli._main import main

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@contextlib.contextmanager
def serve(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_fake_mcp", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rstrip("\n")  # blocks until the server is listening
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def stop(process: subprocess.Popen[str], signum: int) -> tuple[int, str, str]:
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_first_line_is_the_url_and_a_signal_stops_it_cleanly(signum: int) -> None:
    with serve("--port", "0") as (process, url):
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/mcp")
        response = httpx.post(url, json=INIT, headers=HEADERS, timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert "mcp-session-id" in response.headers
        code, out, err = stop(process, signum)
    assert code == 0
    assert out == ""  # nothing after the URL line
    assert "Traceback" not in err


def test_json_and_mcp1_flavour_options_shape_the_answers() -> None:
    with serve("--json", "--flavour", "mcp1") as (process, url):
        response = httpx.post(url, json=INIT, headers=HEADERS, timeout=10)
        assert response.headers["content-type"] == "application/json"
        missing = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=HEADERS)
        assert missing.status_code == 400
        assert missing.json()["id"] == "server-error"  # the 1.x error body
        assert stop(process, signal.SIGTERM)[0] == 0


@pytest.mark.parametrize("switched_on", [False, True], ids=["default", "switched-on"])
def test_auth_event_store_and_list_changed_switch_on_what_the_options_do(switched_on: bool) -> None:
    flags = ["--auth", "--event-store", "--list-changed"] if switched_on else []
    with serve("--port", "0", *flags) as (process, url):
        bare = httpx.post(url, json=INIT, headers=HEADERS, timeout=10)
        assert (bare.status_code == 401) is switched_on  # --auth: a token is required
        assert ("resource_metadata=" in bare.headers.get("www-authenticate", "")) is switched_on
        if switched_on:
            metadata = httpx.get(url.replace("/mcp", "/.well-known/oauth-authorization-server"), timeout=10)
            assert metadata.status_code == 200
            assert metadata.json()["code_challenge_methods_supported"] == ["S256"]
        assert stop(process, signal.SIGTERM)[0] == 0
    with serve("--port", "0", *[f for f in flags if f != "--auth"]) as (process, url):
        opened = httpx.post(url, json=INIT, headers=HEADERS, timeout=10)
        assert opened.text.startswith("id: ") is switched_on  # --event-store: the priming event with an id
        assert ('"tools":{"listChanged":true}' in opened.text) is switched_on  # --list-changed
        assert stop(process, signal.SIGTERM)[0] == 0


def test_max_body_size_bounds_the_mcp1_flavour_too_as_its_help_says(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "get 413 (default 4 MiB with either --flavour: a served port stays bounded, where the fixture's mcp1 " in (
        shown
    )
    with serve("--flavour", "mcp1") as (process, url):
        over = httpx.post(url, content=b" " * (4 * 1024 * 1024 + 1), headers=HEADERS, timeout=10)
        assert over.status_code == 413
        assert stop(process, signal.SIGTERM)[0] == 0


@pytest.mark.asyncio
async def test_a_real_sdk_client_talks_to_the_standalone_server() -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with serve() as (process, url):
        async with (
            asyncio.timeout(20),
            streamable_http_client(url) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            result = await session.call_tool("echo", {"text": "hi"})
        assert result.content[0].text == "hi"
        assert stop(process, signal.SIGINT)[0] == 0


def test_a_port_in_use_is_reported_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_requires_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
