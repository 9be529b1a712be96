"""The hot/warm/cold ADR: one `MemoryClient` over KV (hot), D1 (warm) and R2 (cold).

* `client`: `MemoryBuilder`, `MemoryClient`, `MemoryRules` — tiered reads with fallback and
  promotion, writes to each kind's tier (the placement table, `agent_memory.placement`);
* `hot`, `warm`, `cold`: the three ports (`bindings.ports.memory_tiers`) over the existing
  KV, D1 and object-store ports — core code, so the same in CPython and Pyodide;
* `episodes`: the one text form of an episode in every tier and its way back to the model;
* `backfill`: copies legacy hot keys to their canonical keys (namespace migration phase 2).

A room above `lifecycle`: the cold tier reads the prune's archives (`lifecycle.cold`) and the
index the prune writes; nothing below imports this room. The key grammar lives beside the
other naming rules (`agent_memory.namespace`), the flags' KV logic with the working tier
that uses it (`tiers.namespaced_kv`).
"""

from agent_memory.tiered.client import (
    DEFAULT_HOT_TTL,
    MemoryBuilder,
    MemoryClient,
    MemoryRules,
    PersonalDataInHot,
    TieredRead,
    TierMissing,
)
from agent_memory.tiered.cold import ArchiveColdMemory, ArchivedItem, ArchivedPage
from agent_memory.tiered.episodes import (
    EPISODE_KIND,
    episode_from_item,
    is_personal,
    open_episode_item,
)
from agent_memory.tiered.hot import KVHotMemory
from agent_memory.tiered.warm import D1WarmMemory

__all__ = [
    "DEFAULT_HOT_TTL",
    "EPISODE_KIND",
    "ArchiveColdMemory",
    "ArchivedItem",
    "ArchivedPage",
    "D1WarmMemory",
    "KVHotMemory",
    "MemoryBuilder",
    "MemoryClient",
    "MemoryRules",
    "PersonalDataInHot",
    "TierMissing",
    "TieredRead",
    "episode_from_item",
    "is_personal",
    "open_episode_item",
]
