"""Security posture of ``fake-mcp serve``: loopback by default, DNS-rebinding protection, a loopback-only
control API, bounded bodies, and nothing from a request reaching a shell or the file system."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import pytest_fake_mcp
from _served import serve
from pytest_fake_mcp._cli._control import MAX_CONTROL_BODY, ControlFront
from pytest_fake_mcp._cli._main import is_loopback, main
from pytest_fake_mcp._cli._profiles import PROFILES
from pytest_fake_mcp._fake._app import FakeMCPApp
from pytest_fake_mcp._host._listener import Listener
from pytest_fake_mcp._host._server import FakeMCPServer

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
EVIL = "evil.example.com"


# --- where it listens --------------------------------------------------------------------------------


def test_serve_binds_loopback_by_default_without_a_warning() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_fake_mcp", "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    process.terminate()
    _, err = process.communicate(timeout=30)
    assert url.startswith("http://127.0.0.1:")
    assert "warning" not in err


def test_a_non_loopback_host_only_when_asked_and_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the bind fails after the warning, and nothing is exposed.
    assert main(["serve", "--host", "192.0.2.1"]) == 1
    err = capsys.readouterr().err
    assert "warning: listening on 192.0.2.1, so other machines can reach the fake MCP endpoint" in err
    assert "the control API (/_fake/) still answers loopback clients only" in err
    assert "cannot listen on 192.0.2.1" in err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.0.2.1", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# --- DNS rebinding -----------------------------------------------------------------------------------


def test_dns_rebinding_protection_is_on_by_default() -> None:
    with serve() as served, httpx.Client(timeout=10) as client:
        port = served.origin.rsplit(":", 1)[1]
        foreign_host = client.post(served.url, json=INIT, headers={**HEADERS, "host": f"{EVIL}:{port}"})
        foreign_origin = client.post(served.url, json=INIT, headers={**HEADERS, "origin": f"http://{EVIL}"})
        local = client.post(served.url, json=INIT, headers={**HEADERS, "origin": f"http://127.0.0.1:{port}"})
    assert (foreign_host.status_code, foreign_origin.status_code, local.status_code) == (421, 403, 200)


# --- the control API: loopback only, not from a web page -----------------------------------------------


@pytest.fixture
def front() -> ControlFront:
    """A control front over a fake that is not listening: the refusals come before any server call."""
    app = FakeMCPApp()
    return ControlFront(FakeMCPServer(app, Listener(app)), reinstall=PROFILES["default"])


@pytest.mark.asyncio
@pytest.mark.parametrize("peer", ["192.0.2.7", "10.1.2.3", "2001:db8::1"])
async def test_control_api_refuses_a_non_loopback_peer(front: ControlFront, peer: str) -> None:
    transport = httpx.ASGITransport(app=front, client=(peer, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        refused = await client.post("/_fake/reset")
        journal = await client.get("/_fake/journal")
    assert (refused.status_code, journal.status_code) == (403, 403)
    assert refused.json() == {"error": "the control API answers loopback clients only"}


@pytest.mark.asyncio
@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.0.53", "::1"])
async def test_control_api_answers_a_loopback_peer(front: ControlFront, peer: str) -> None:
    transport = httpx.ASGITransport(app=front, client=(peer, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        journal = await client.get("/_fake/journal")
    assert journal.status_code == 200
    assert journal.json() == {"exchanges": [], "events": []}


def test_control_api_refuses_a_foreign_host_or_origin_and_does_nothing() -> None:
    with serve() as served:
        port = served.origin.rsplit(":", 1)[1]
        with httpx.Client(timeout=10) as client:
            sid = client.post(served.url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
        rebound = served.http.post("/_fake/drop_session", json={}, headers={"host": f"{EVIL}:{port}"})
        cross_site = served.http.post("/_fake/drop_session", json={}, headers={"origin": f"https://{EVIL}"})
        same_site = served.http.post("/_fake/drop_session", json={}, headers={"origin": f"http://localhost:{port}"})
    assert rebound.status_code == 421
    assert cross_site.status_code == 403
    assert "not a loopback origin" in cross_site.json()["error"]
    assert same_site.json() == {"dropped": [sid]}  # the refused two dropped nothing


# --- bounded bodies -----------------------------------------------------------------------------------


def test_control_bodies_are_bounded() -> None:
    with serve() as served:
        big = b'{"session_id": "' + b"x" * MAX_CONTROL_BODY + b'"}'
        response = served.http.post("/_fake/drop_session", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert f"at most {MAX_CONTROL_BODY} bytes" in response.json()["error"]


@pytest.mark.parametrize("flavour", ["mcp2", "mcp1"])
def test_mcp_bodies_are_bounded_in_both_flavours(flavour: str) -> None:
    # The 1.x SDK has no limit; fake-mcp serve bounds both (--max-body-size, 4 MiB by default).
    with serve("--flavour", flavour, "--max-body-size", "1000") as served, httpx.Client(timeout=10) as client:
        padded = {**INIT, "params": {**INIT["params"], "padding": "x" * 1000}}  # type: ignore[dict-item]
        too_big = client.post(served.url, json=padded, headers=HEADERS)
        fits = client.post(served.url, json=INIT, headers=HEADERS)
    assert (too_big.status_code, fits.status_code) == (413, 200)


# --- nothing reaches a shell or the file system -----------------------------------------------------------

_FORBIDDEN_MODULES = {"subprocess", "shutil", "tempfile", "pickle", "marshal", "shelve", "pty", "ctypes", "pathlib"}
_FORBIDDEN_BUILTINS = {"open", "eval", "exec", "compile", "__import__", "breakpoint"}
_FILE_METHODS = {"write_text", "write_bytes", "read_text", "read_bytes", "mkdir", "unlink", "touch", "rmdir"}
_OS_ALLOWED = {"path", "sep", "getcwd", "environ", "getpid"}
_WRITES_TRACE_FILES = {"plugin.py"}
"""The pytest plugin writes ``--fake-mcp-trace`` files: a path from the command line, never from a request."""


def _risky(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in _FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _FORBIDDEN_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FORBIDDEN_BUILTINS:
            found.append(f"{node.func.id}() at line {node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FILE_METHODS:
            found.append(f".{node.func.attr}() at line {node.lineno}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr not in _OS_ALLOWED
        ):
            found.append(f"os.{node.attr} at line {node.lineno}")
    return found


def test_no_module_that_serves_requests_can_reach_a_shell_or_the_file_system() -> None:
    package = Path(pytest_fake_mcp.__file__).parent
    modules = sorted(p for p in package.rglob("*.py") if p.name not in _WRITES_TRACE_FILES)
    names = {p.relative_to(package).as_posix() for p in modules}
    assert {"_fake/_app.py", "_cli/_control.py", "_cli/_main.py", "_cli/_profiles.py", "_fake/_catalog.py"} <= names
    risky = {
        p.relative_to(package).as_posix(): found
        for p in modules
        if (found := _risky(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert risky == {}


def test_the_scan_finds_what_it_looks_for() -> None:
    source = "import subprocess\nfrom pathlib import Path\nopen('x')\nPath('y').write_text('z')\nos.system('ls')\n"
    assert _risky(ast.parse(source)) == [
        "import subprocess",
        "from pathlib import ...",
        "open() at line 3",
        ".write_text() at line 4",
        "os.system at line 5",
    ]


def test_hostile_request_values_touch_no_file(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", f"{marker}", "../../../../etc/passwd"]
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_fake_mcp", "serve", "--profile", "conformance"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=workdir,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        origin = url.rsplit("/", 1)[0]
        with httpx.Client(timeout=10) as client:
            sid = client.post(url, json=INIT, headers=HEADERS).headers["mcp-session-id"]
            headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            reads = []
            for n, value in enumerate(hostile):
                client.post(f"{origin}/_fake/faults", json={"method": "tools/call", "tool": value, "respond": 500})
                client.post(f"{origin}/_fake/drop_session", json={"session_id": value})
                call = {"name": "echo", "arguments": {"text": value}}
                echo = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": call}
                client.post(url, json=echo, headers=headers)
                read = {
                    "jsonrpc": "2.0",
                    "id": 100 + n,
                    "method": "resources/read",
                    "params": {"uri": f"file://{value}"},
                }
                reads.append(client.post(url, json=read, headers=headers).text)
            etc = {"jsonrpc": "2.0", "id": 999, "method": "resources/read", "params": {"uri": "file:///etc/passwd"}}
            reads.append(client.post(url, json=etc, headers=headers).text)
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert not marker.exists()
    assert list(workdir.iterdir()) == []
    assert all("Resource not found" in text and "root:" not in text for text in reads)
