"""Who may remember what, and the record of it: the rules every tier obeys on write.

* `agent_types`: the registry of agent types (prompt, tools, memory configuration,
  workflows) — what each kind of agent may do and remember (ADR-043);
* `proposals` / `policy`: every write is a `WriteProposal` checked by a `WritePolicy`
  through a `WriteGate` before it commits; a refusal is `WriteDenied` (ADR-0051);
* `personal_data` / `data_keys`: fields marked personal are sealed (AES-256-GCM) under
  per-subject data keys stored wrapped in D1; erasing a subject destroys its keys;
* `events`: the `memory_written` / `memory_retrieved` audit log (hashes and ids, never
  content).
Sits below the tiers: it imports nothing from `tiers`, `lifecycle` or `agent`.
"""

from agent_memory.governance.agent_types import (
    AGENT_TYPES,
    AgentType,
    MemoryConfig,
    WorkflowSpec,
    agent_type_names,
    get_agent_type,
    register_agent_type,
    unregister_agent_type,
)
from agent_memory.governance.data_keys import DataKeys, PersonalDataUnavailable
from agent_memory.governance.events import EventLog, RetrievedItem, memory_retrieved, memory_written
from agent_memory.governance.personal_data import PersonalData, public_view
from agent_memory.governance.policy import WriteGate, WritePolicy
from agent_memory.governance.proposals import (
    WriteDenied,
    WriteProposal,
    canonical_json,
    personal_marking,
)

__all__ = [
    "AGENT_TYPES",
    "AgentType",
    "DataKeys",
    "EventLog",
    "MemoryConfig",
    "PersonalData",
    "PersonalDataUnavailable",
    "RetrievedItem",
    "WorkflowSpec",
    "WriteDenied",
    "WriteGate",
    "WritePolicy",
    "WriteProposal",
    "agent_type_names",
    "canonical_json",
    "get_agent_type",
    "memory_retrieved",
    "memory_written",
    "personal_marking",
    "public_view",
    "register_agent_type",
    "unregister_agent_type",
]
