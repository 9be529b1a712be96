"""The memory tools MCP clients see (ADR-0030: `recall_memory`, `store_memory`), as the
gateway is handed them: a `MemoryToolDispatcher`.

The gateway lists the dispatcher's tools for a tenant with `memory_enabled` when the
deployment has the semantic tier, validates their arguments with the schemas the dispatcher
gives (the memory core defines each tool once: `agent_memory.agent.memory_tools`), and
hands the call to it. The dispatcher is built outside the hot-path modules (it reaches D1,
Vectorize and the embedder); this module only names its shape, so importing it drags in
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class MemoryToolDispatcher(Protocol):
    """Runs a memory tool for a tenant. Bound to the request's bindings by its builder."""

    def specs(self) -> Sequence[Mapping[str, Any]]:
        """The tools as MCP lists them: `{"name", "description", "inputSchema"}` each."""
        ...

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run `tool_name` with validated `arguments`.

        Returns a JSON-serialisable result (sent to the client as text). Raising means the
        tool failed; the client then sees an MCP tool error (`isError: true`). Input the memory
        refuses (blank query, oversized content...) is a `ValueError` carrying a stable string
        `code`: the client sees that code and message; any other exception is reported as an
        internal error without details.
        """
        ...
