"""The memory tools MCP clients see (ADR-0030): `recall_memory` and `store_memory`.

The gateway lists them for a tenant with `memory_enabled` when the deployment has the
semantic tier, validates their arguments with the schemas below, and hands the call to a
`MemoryToolDispatcher`. The dispatcher is implemented outside the hot-path modules (it
reaches D1, Vectorize and the embedder); this module only names its shape, so importing
it drags in nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

# ADR-0030 "recall_memory": input is a MemoryQuery (text + optional top_k).
RECALL_MEMORY_TOOL: dict[str, Any] = {
    "name": "recall_memory",
    "description": (
        "Search the agent's long-term memory for entries matching a query. Returns the most "
        "semantically similar entries. Use this when you need to remember context from a "
        "previous interaction or session."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": (
                    "The search query. Specific, well-formed queries return better results."
                ),
            },
            "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["query"],
    },
}

# ADR-0030 "store_memory": explicit writes; the result is {"stored": true}.
STORE_MEMORY_TOOL: dict[str, Any] = {
    "name": "store_memory",
    "description": (
        "Save a piece of information to long-term memory so it can be recalled in future "
        "turns or sessions. Use sparingly — only for facts, decisions, or context that is "
        "genuinely worth remembering."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": True},
        },
        "required": ["content"],
    },
}

MEMORY_TOOLS: dict[str, dict[str, Any]] = {
    RECALL_MEMORY_TOOL["name"]: RECALL_MEMORY_TOOL,
    STORE_MEMORY_TOOL["name"]: STORE_MEMORY_TOOL,
}


class MemoryToolDispatcher(Protocol):
    """Runs a memory tool for a tenant. Bound to the request's bindings by its builder."""

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run `tool_name` (`recall_memory` or `store_memory`) with validated `arguments`.

        Returns a JSON-serialisable result (sent to the client as text). Raising means the
        tool failed; the client then sees an MCP tool error (`isError: true`). Input the memory
        refuses (blank query, oversized content...) is a `ValueError` carrying a stable string
        `code`: the client sees that code and message; any other exception is reported as an
        internal error without details.
        """
        ...
