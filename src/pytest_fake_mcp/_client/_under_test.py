"""ContractClient: what the contract and race suites need of a client under test (call a tool, and close)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ContractClient"]


class ContractClient(Protocol):
    """What the suite needs of a client: call a tool, and close."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...

    async def aclose(self) -> None: ...
