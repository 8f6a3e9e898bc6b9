"""How-to: ``fake-mcp serve`` (docs/cli.md): the same fake as a standalone process, its URL on the first line."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import pytest
from _howto_sdk import sdk_session


# --8<-- [start:serve]
@pytest.mark.asyncio
async def test_serve_prints_its_url_first():
    # `fake-mcp serve` is this console script; `python -m pytest_fake_mcp serve` is the same thing.
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest_fake_mcp", "serve", "--port", "0", "--json", "--flavour", "mcp1",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(20):
            url = (await server.stdout.readline()).decode().strip()  # e.g. http://127.0.0.1:53211/mcp
            async with sdk_session(url) as session:
                result = await session.call_tool("echo", {"text": "hi"})
    finally:
        if server.returncode is None:
            server.send_signal(signal.SIGINT)  # SIGINT or SIGTERM stops it cleanly
        await asyncio.wait_for(server.wait(), 20)

    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url)
    assert result.content[0].text == "hi"
    assert server.returncode == 0


# --8<-- [end:serve]
