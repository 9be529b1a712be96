"""The warm tier over D1 (`WarmMemory`): episodes in `memory_episodes`.

* `read(key)` of `<ns>:episode:<episode_id>` is the row of that episode *in that namespace*
  (`namespace_key`, the column migration 0010 derives from tenant and instance), as item
  text (`agent_memory.tiered.episodes`); any other kind reads as a miss here (working memory
  lives in hot, facts are served by the semantic tier).
* `upsert(key, text)` inserts the episode through `EpisodicStore.append_episode` — the write
  policy, its `memory_written` event and the episode limit apply — if absent: an episode is
  immutable, so the same key always names the same record. Refused for other kinds.
* `delete(key)` removes the episode row.
It is a view of `EpisodicStore`, which owns the episodes' statements: the warm tier and the
episodic tier are one store.
"""

from __future__ import annotations

from agent_memory.governance.personal_data import PersonalData
from agent_memory.namespace import InvalidNamespaceKey, ItemKey
from agent_memory.tiered.episodes import EPISODE_KIND, episode_from_item, item_text
from agent_memory.tiers.episodic import EpisodicStore
from bindings.ports.d1 import D1Database


class D1WarmMemory:
    """`WarmMemory` over a D1 database."""

    def __init__(self, db: D1Database, personal: PersonalData | None = None) -> None:
        self._db = db
        # Seals marked personal fields on upsert (without it they are refused, never
        # stored in plaintext: `EpisodicStore`).
        self._personal = personal

    async def read(self, key: str) -> str | None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            return None
        row = await self._store(item.tenant).namespaced_row(item.entity, item.namespace_key)
        return None if row is None else item_text(row)

    async def upsert(self, key: str, value: str) -> None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            raise InvalidNamespaceKey(f"the warm tier holds episodes, not {item.kind!r} items")
        episode = episode_from_item(value)
        if (episode.episode_id, episode.instance_id) != (item.entity, item.session):
            raise InvalidNamespaceKey("the episode does not belong to this item key")
        await self._store(item.tenant).append_episode(episode)

    async def delete(self, key: str) -> None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            return
        await self._store(item.tenant).delete_namespaced(item.entity, item.namespace_key)

    def _store(self, tenant: str) -> EpisodicStore:
        return EpisodicStore(self._db, tenant, personal=self._personal)
