"""Tier 2, episodic memory: a tenant's agent runs and their episodes in D1.

`EpisodicStore` (bound to one tenant) reads and writes `agent_runs` / `memory_episodes`
idempotently; `EpisodicWriter` runs those writes off the response path, in order, with
retries, and hands a write that still fails to its failure sink. The records (`RunRecord`,
`Episode`, `RunPage`) and errors (`InvalidCursorError`, `EpisodeLimitReached`) are what
callers pass and catch.
"""

from agent_memory.cursors import InvalidCursorError
from agent_memory.tiers.episodic.models import (
    EPISODE_LIMIT_CODE,
    MAX_EPISODE_CHARS,
    MAX_PAGE_SIZE,
    RECENT_EPISODES,
    Episode,
    EpisodeKind,
    EpisodeLimitReached,
    RunPage,
    RunRecord,
    RunStatus,
    WriteOp,
    decode_cursor,
    encode_cursor,
    open_episodes,
)
from agent_memory.tiers.episodic.store import EpisodicStore
from agent_memory.tiers.episodic.writer import (
    DEFAULT_ATTEMPTS,
    DEFAULT_BASE_DELAY,
    EpisodicWriter,
    FailedWrite,
    FailureSink,
    Outbox,
    PendingWrite,
    Sleep,
)

__all__ = [
    "DEFAULT_ATTEMPTS",
    "DEFAULT_BASE_DELAY",
    "EPISODE_LIMIT_CODE",
    "MAX_EPISODE_CHARS",
    "MAX_PAGE_SIZE",
    "RECENT_EPISODES",
    "Episode",
    "EpisodeKind",
    "EpisodeLimitReached",
    "EpisodicStore",
    "EpisodicWriter",
    "FailedWrite",
    "FailureSink",
    "InvalidCursorError",
    "Outbox",
    "PendingWrite",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "Sleep",
    "WriteOp",
    "decode_cursor",
    "encode_cursor",
    "open_episodes",
]
