"""Tier 3, semantic memory: one tenant's facts in D1 (source of truth) + Vectorize.

Use `SemanticMemory` (bound to one tenant at construction) to learn, recall, rank and
delete facts; the models (`FactInput`, `RecallFilters`, `Fact`, `RecallResult`, …) and the
errors (`MemoryInputError`, `SemanticTierUnavailable`) are what callers pass and catch.
`namespace_for_tenant` / `embedding_tag` name a tenant's vectors (the eraser and the
reconciler address them too). Modules starting with `_` are this package's own.
"""

from agent_memory.tiers.semantic.links import LinkedRow, linked_rows
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import (
    DEFAULT_AGENT_TYPE,
    DEFAULT_CONFIDENCE,
    DEFAULT_PREDICATE,
    DEFAULT_SUBJECT,
    DEFAULT_TOP_K,
    MAX_CONTENT_CHARS,
    MAX_METADATA_BYTES,
    MAX_QUERY_CHARS,
    MAX_RANK_LIMIT,
    MAX_TOP_K,
    DeleteResult,
    Fact,
    FactInput,
    FactStatus,
    LearnResult,
    LinkedFact,
    MemoryInputError,
    RecalledFact,
    RecallFilters,
    RecallRequest,
    RecallResult,
    SemanticTierUnavailable,
    check_metadata,
    embedding_tag,
    namespace_for_tenant,
    open_facts,
)

__all__ = [
    "DEFAULT_AGENT_TYPE",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_PREDICATE",
    "DEFAULT_SUBJECT",
    "DEFAULT_TOP_K",
    "MAX_CONTENT_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_RANK_LIMIT",
    "MAX_TOP_K",
    "DeleteResult",
    "Fact",
    "FactInput",
    "FactStatus",
    "LearnResult",
    "LinkedFact",
    "LinkedRow",
    "MemoryInputError",
    "RecallFilters",
    "RecallRequest",
    "RecallResult",
    "RecalledFact",
    "SemanticMemory",
    "SemanticTierUnavailable",
    "check_metadata",
    "embedding_tag",
    "linked_rows",
    "namespace_for_tenant",
    "open_facts",
]
