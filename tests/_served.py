"""``fake-mcp serve`` in a subprocess, with its control API at hand (for the control and conformance tests)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx

__all__ = ["Served", "serve"]


class Served:
    """A running ``fake-mcp serve``: its MCP URL, its origin and the control API."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.origin = url.rsplit("/", 1)[0]
        self.http = httpx.Client(base_url=self.origin, timeout=10)

    def control(self, name: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.http.post(f"/_fake/{name}", json=body if body is not None else {})

    def journal(self) -> list[dict[str, Any]]:
        response = self.http.get("/_fake/journal")
        assert response.status_code == 200, response.text
        exchanges: list[dict[str, Any]] = response.json()["exchanges"]
        return exchanges


@contextlib.contextmanager
def serve(*args: str) -> Iterator[Served]:
    """``fake-mcp serve`` in a subprocess, stopped with SIGTERM (bounded) at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_fake_mcp", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = None
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()  # blocks until the server listens (or exits)
        assert url, f"fake-mcp serve printed no URL: {process.communicate(timeout=30)}"
        served = Served(process, url)
        yield served
    finally:
        if served is not None:
            served.http.close()
        process.terminate()
        process.communicate(timeout=30)
