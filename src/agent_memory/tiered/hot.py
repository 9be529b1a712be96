"""The hot tier over KV (`HotMemory`): items under their canonical item keys, with the
namespace migration's legacy keys and read-repair (`agent_memory.tiers.namespaced_kv`).

KV's limits hold: a TTL below 60 s is raised to 60 (KV's minimum `expirationTtl`), keys are
item keys (≤ 480 bytes by the namespace grammar, under KV's 512).
"""

from __future__ import annotations

from agent_memory.namespace import ItemKey
from agent_memory.tiers.working import NamespacedKV, NamespaceFlags, ReadCounts
from bindings.ports.kv import KV_MIN_EXPIRATION_TTL, KVNamespace


class KVHotMemory:
    """`HotMemory` over a KV namespace."""

    def __init__(
        self,
        kv: KVNamespace,
        *,
        flags: NamespaceFlags | None = None,
        counts: ReadCounts | None = None,
        repair_ttl: int | None = None,
    ) -> None:
        self._kv = kv
        self._flags = flags
        self.counts = counts
        self._repair_ttl = repair_ttl

    def _keys(self, item: ItemKey) -> NamespacedKV:
        return NamespacedKV(
            self._kv,
            item.namespace,
            item.kind,
            flags=self._flags,
            counts=self.counts,
            repair_ttl=self._repair_ttl,
        )

    async def get(self, key: str) -> str | None:
        item = ItemKey.parse(key)
        return await self._keys(item).get(item.entity)

    async def set(self, key: str, value: str, ttl: int | None = None) -> None:
        item = ItemKey.parse(key)
        expiration = None if ttl is None else max(ttl, KV_MIN_EXPIRATION_TTL)
        await self._keys(item).put(item.entity, value, expiration_ttl=expiration)

    async def delete(self, key: str) -> None:
        item = ItemKey.parse(key)
        await self._keys(item).delete(item.entity)
