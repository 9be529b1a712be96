"""The four memory tiers, each bound to one tenant (and instance) at construction.

* `working`: one agent instance's scratch space in KV (1 h TTL, 128 KB budget);
* `episodic`: the tenant's agent runs and episodes in D1, written off the response path;
* `semantic`: the tenant's facts in D1 + Vectorize with hybrid, explainable recall;
* `procedural`: a Thompson-sampling bandit over an agent type's workflows (DO SQLite).
Every write goes through `governance`'s write gate; ranking comes from `retrieval`. The
tiers never import `lifecycle` or `agent`, which work on top of them.
"""

from agent_memory.tiers.procedural import ProceduralMemory, UnknownWorkflowError
from agent_memory.tiers.working import (
    WORKING_MEMORY_BUDGET_BYTES,
    WORKING_MEMORY_PREFIX,
    WorkingMemory,
    WorkingMemoryError,
)

__all__ = [
    "WORKING_MEMORY_BUDGET_BYTES",
    "WORKING_MEMORY_PREFIX",
    "ProceduralMemory",
    "UnknownWorkflowError",
    "WorkingMemory",
    "WorkingMemoryError",
]
