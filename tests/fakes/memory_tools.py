"""A stand-in for the memory tools' dispatcher the gateway is handed: the real tools' schemas
(the memory core defines each tool once), calls recorded, ADR-0030-shaped answers. Tests
that check the gateway's side of MCP use it; the real dispatcher is tested in
tests/semantic/test_tools.py."""

from __future__ import annotations

from typing import Any

from agent_memory.agent.memory_tools import MEMORY_TOOLS


class FakeMemoryTools:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail = fail

    def specs(self) -> list[dict[str, Any]]:
        return [t.mcp_tool() for t in MEMORY_TOOLS.values()]

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((tenant, tool_name, arguments))
        if self.fail:
            raise RuntimeError("vector index down")
        if tool_name == "store_memory":
            return {"stored": True}
        return {"entries": [{"content": "prefers dark mode", "score": 0.9}]}
