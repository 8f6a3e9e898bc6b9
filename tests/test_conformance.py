"""``fake-mcp serve --profile conformance``: the official MCP conformance suite's 30 server scenarios pass,
and its server-to-client requests work with the Python SDK client too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from _node import NODE_DIR, require_node
from _sdk import sdk_session
from _served import serve

ACTIVE_SCENARIOS = 30


def test_official_conformance_suite_passes_every_active_server_scenario(tmp_path: Path) -> None:
    require_node()
    results = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, str(NODE_DIR / "conformance.py"), "--expect", str(ACTIVE_SCENARIOS), "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    scenarios = json.loads(results.read_text())["scenarios"]
    failing = {name: counts for name, counts in scenarios.items() if counts.get("FAILURE")}
    assert failing == {}
    assert len(scenarios) == ACTIVE_SCENARIOS


async def _sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled"), model="stub-model"
    )


async def _elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


@pytest.mark.asyncio
async def test_sampling_and_elicitation_reach_the_python_sdk_client_and_its_answers_come_back() -> None:
    with serve("--profile", "conformance") as served:
        async with sdk_session(served.url, sampling_callback=_sample, elicitation_callback=_elicit) as session:
            sampled = await session.call_tool("test_sampling", {"prompt": "hello"})
            elicited = await session.call_tool("test_elicitation", {"message": "who?"})
        exchanges = served.journal()
    assert sampled.content[0].text == "LLM response: sampled"  # type: ignore[union-attr]
    assert "action=accept" in elicited.content[0].text  # type: ignore[union-attr]
    assert "ada@example.com" in elicited.content[0].text  # type: ignore[union-attr]
    # Each request went out on the tools/call stream; each answer came back as a POST answered 202.
    calls = [e for e in exchanges if e["rpc_method"] == "tools/call"]
    answers = [e for e in exchanges if e["kind"] == "response"]
    assert [e["status"] for e in calls] == [200, 200]
    assert [e["status"] for e in answers] == [202, 202]


@pytest.mark.asyncio
async def test_logging_and_progress_notifications_arrive_before_the_result() -> None:
    seen: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(f"log {params.data}")

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(f"progress {progress:g}")

    with serve("--profile", "conformance") as served:
        async with sdk_session(served.url, logging_callback=on_log) as session:
            await session.call_tool("test_tool_with_logging", {})
            await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
    assert seen == [
        "log Tool execution started",
        "log Tool processing data",
        "log Tool execution completed",
        "progress 0",
        "progress 50",
        "progress 100",
    ]
