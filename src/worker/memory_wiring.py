"""Wiring the semantic memory tools into the agent loop, MCP and the reconcile cadence.

The memory core reaches the edge through hooks (the agent room cannot import the
lifecycle room, the gateway cannot import memory): `install_memory_tools()` registers
`recall_memory` / `store_memory` for `long_term_enabled` agents and the context-assembly
prefetch (`agent_memory.agent.memory_tools.install`), and counts new facts towards the
tenant's next background reconcile (`worker.lifecycle_jobs.reconcile_after_writes`).

It imports the semantic memory (recall, the stemmer), so it is not part of start-up
(docs/pyodide.md "Start-up"): it runs where the tools are first used — when an
`AgentRuntime` core is made (`worker.runtime_core`) and on an MCP client's first memory
tool call (`SemanticDispatcher`, which the app registers with the gateway at import: listing
the tools imports nothing).
"""

from __future__ import annotations

from typing import Any

from bindings.environment import Bindings


def install_memory_tools() -> None:
    """Register the memory tools' hooks (idempotent; imports the semantic memory)."""
    from agent_memory.agent.memory_tools import install, register_write_observer
    from worker.lifecycle_jobs import reconcile_after_writes

    install()
    # New facts count towards the tenant's next background reconcile (issue 16).
    register_write_observer(reconcile_after_writes)


class SemanticDispatcher:
    """The gateway's `MemoryToolDispatcher`: semantic memory, imported on the first call.

    Delegates each call to `agent_memory.agent.memory_tools.SemanticMemoryDispatcher`,
    which binds a fresh `SemanticMemory` to the call's tenant.
    """

    def __init__(self, bindings: Bindings) -> None:
        self._bindings = bindings

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from agent_memory.agent.memory_tools import SemanticMemoryDispatcher

        install_memory_tools()
        return await SemanticMemoryDispatcher(self._bindings).call(tenant, tool_name, arguments)
