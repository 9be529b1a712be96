"""One agent turn over a tenant's `Memory`: context assembly, the tool loop and its tools.

* `context`: what a turn starts with (working-memory snapshot, recent episodes, optional
  semantic prefetch), each ranked with its tier's weights;
* `loop`: the model ⇄ tool loop with its step limit and timeout;
* `tools`: the tools an agent type may call (working memory, and the long-term memory
  tools for `long_term_enabled` types);
* `memory_tools`: `recall_memory` / `store_memory` (ADR-0030), defined once for agents and
  MCP clients.
The top of the core: uses `Memory`; nothing imports it except the Durable Object logic and
the edge.
"""
