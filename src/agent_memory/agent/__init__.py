"""One agent turn over the tiers: context assembly, the tool loop and the memory tools.

* `context`: what a turn starts with (working-memory snapshot, recent episodes, optional
  semantic prefetch);
* `loop`: the model ⇄ tool loop with its step limit and timeout;
* `tools`: the platform tools an agent type may call (working memory, …);
* `memory_tools`: `recall_memory` / `store_memory` (ADR-0030) for agents and MCP clients.
The top of the core: may use `tiers`, `governance` and `retrieval`; nothing imports it
except the Durable Object logic and the edge.
"""

from agent_memory.agent.context import assemble_context, render_context
from agent_memory.agent.loop import LoopOutcome, run_agent_loop
from agent_memory.agent.memory_tools import (
    RECALL_MEMORY_SCHEMA,
    STORE_MEMORY_SCHEMA,
    SemanticMemoryDispatcher,
)
from agent_memory.agent.tools import ToolContext, platform_tools

__all__ = [
    "RECALL_MEMORY_SCHEMA",
    "STORE_MEMORY_SCHEMA",
    "LoopOutcome",
    "SemanticMemoryDispatcher",
    "ToolContext",
    "assemble_context",
    "platform_tools",
    "render_context",
    "run_agent_loop",
]
