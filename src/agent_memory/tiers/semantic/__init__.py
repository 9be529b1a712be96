from agent_memory.tiers.semantic.memory import *  # noqa: F403 (temporary, split follows)
from agent_memory.tiers.semantic.memory import (  # noqa: F401
    DEFAULT_SUBJECT,
    DEFAULT_TOP_K,
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    FactInput,
    MemoryInputError,
    RecallFilters,
    RecallRequest,
    SemanticMemory,
    SemanticTierUnavailable,
    check_metadata,
    embedding_tag,
    namespace_for_tenant,
)
