"""The memory tools the gateway's MCP server is handed: `SemanticDispatcher`.

The gateway never imports the memory core (its hot path stays KV-only); the app hands it
this dispatcher, which imports the tools' one definition (`agent_memory.agent.memory_tools`)
on first use — listing the tools loads their schemas, calling one loads the semantic memory
— so neither is part of the Worker's start-up (docs/pyodide.md "Start-up").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bindings.environment import Bindings


class SemanticDispatcher:
    """The gateway's `MemoryToolDispatcher` over `agent_memory.agent.memory_tools`."""

    def __init__(self, bindings: Bindings) -> None:
        self._bindings = bindings

    def specs(self) -> Sequence[Mapping[str, Any]]:
        from agent_memory.agent.memory_tools import McpMemoryTools

        return McpMemoryTools(self._bindings).specs()

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from agent_memory.agent.memory_tools import McpMemoryTools

        return await McpMemoryTools(self._bindings).call(tenant, tool_name, arguments)
