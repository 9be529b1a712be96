"""Hot-tier (KV) items under their canonical item keys, with the namespace migration of the
hot/warm/cold ADR: compat read, read-repair and the two flags.

    canonical  <service>:<tenantId>:<sessionId>:<kind>:<entityId>   (agent_memory.namespace)
    legacy     agent_working:<tenantId>:<sessionId>:<entityId>       (ADR-043, kind `working`)

| phase | `MEMORY_NAMESPACE_COMPAT_READ` | `MEMORY_NAMESPACE_WRITE_CANONICAL` | reads | writes |
|---|---|---|---|---|
| 0 legacy (the default) | false | false | legacy key | legacy key |
| 1 dual read | true | false | canonical, then legacy (+ read-repair) | legacy key |
| 2 canonical write | true | true | canonical, then legacy (+ read-repair) | canonical key |
| 3 canonical only | false | true | canonical key | canonical key |

* Read-repair: a legacy hit under compat read writes the value to the canonical key (same
  metadata, the kind's TTL) before it is returned; the legacy key is left as it was.
* A write that goes to the legacy key (phases 0 and 1) also refreshes a canonical copy when
  one exists (made by read-repair, the backfill, or phase 2 before a rollback), so a
  canonical copy never goes stale and no phase change can surface an old value. Nothing but
  an explicit delete of the item ever removes a canonical key: rolling back from phase 2 or
  3 to phase 1 loses nothing.
* A delete removes both keys.
* Listing (`entries`) merges both prefixes where both can be read (the canonical entry wins).
* Every read under compat read is counted (`ReadCounts`: canonical hit, legacy hit, miss);
  `flush_counts` adds them to D1 `namespace_reads` for the daily brief.
Kinds without a legacy pattern are canonical in every phase.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agent_memory.namespace import ItemKey, NamespaceKey, legacy_working_key
from bindings.ports.d1 import D1Database
from bindings.ports.kv import KVNamespace, KVValueWithMetadata

Outcome = Literal["canonical", "legacy", "miss"]
LegacyKey = Callable[[ItemKey], str]


@dataclass(frozen=True, slots=True)
class NamespaceFlags:
    """The two migration flags (settings `MEMORY_NAMESPACE_COMPAT_READ` / `_WRITE_CANONICAL`)."""

    compat_read: bool = False
    write_canonical: bool = False

    @property
    def phase(self) -> str:
        if self.compat_read:
            return "canonical-write" if self.write_canonical else "dual-read"
        return "canonical-only" if self.write_canonical else "legacy"

    @property
    def reads_canonical(self) -> bool:
        return self.compat_read or self.write_canonical

    @property
    def reads_legacy(self) -> bool:
        return self.compat_read or not self.write_canonical


@dataclass
class ReadCounts:
    """Reads under compat read, per outcome; `flush_counts` persists and resets them."""

    canonical: int = 0
    legacy: int = 0
    miss: int = 0

    def record(self, outcome: Outcome) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    @property
    def total(self) -> int:
        return self.canonical + self.legacy + self.miss


async def flush_counts(db: D1Database, tenant: str, counts: ReadCounts, now_s: float) -> None:
    """Add `counts` to the tenant's row of the day in `namespace_reads`, then reset them."""
    if counts.total == 0:
        return
    day = datetime.datetime.fromtimestamp(now_s, tz=datetime.UTC).date().isoformat()
    await (
        db.prepare(
            "INSERT INTO namespace_reads (tenant_id, day, canonical_hits, legacy_hits, misses) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, day) DO UPDATE SET "
            "canonical_hits = canonical_hits + excluded.canonical_hits, "
            "legacy_hits = legacy_hits + excluded.legacy_hits, misses = misses + excluded.misses"
        )
        .bind(tenant, day, counts.canonical, counts.legacy, counts.miss)
        .run()
    )
    counts.canonical = counts.legacy = counts.miss = 0


def legacy_pattern(kind: str) -> LegacyKey | None:
    """The legacy key of `kind`'s items, or None when the kind never had one."""
    return legacy_working_key if kind == "working" else None


@dataclass(frozen=True, slots=True)
class KVEntry:
    """One listed item: its entity id, KV name, metadata and expiration (epoch s)."""

    entity: str
    name: str
    metadata: dict[str, Any] | None
    expiration: int | None


class NamespacedKV:
    """One namespace's items of one kind in KV, keyed per the migration flags."""

    def __init__(
        self,
        kv: KVNamespace,
        namespace: NamespaceKey,
        kind: str,
        *,
        flags: NamespaceFlags | None = None,
        counts: ReadCounts | None = None,
        repair_ttl: int | None = None,
    ) -> None:
        self._kv = kv
        self.namespace = namespace
        self.kind = kind
        self.flags = flags or NamespaceFlags()
        self.counts = counts
        self._legacy = legacy_pattern(kind)
        self._repair_ttl = repair_ttl

    def item(self, entity: str) -> ItemKey:
        return ItemKey(self.namespace, self.kind, entity)

    def canonical_key(self, entity: str) -> str:
        return self.item(entity).key

    def legacy_key(self, entity: str) -> str | None:
        return None if self._legacy is None else self._legacy(self.item(entity))

    def _reads_legacy(self) -> bool:
        return self._legacy is not None and self.flags.reads_legacy

    def _reads_canonical(self) -> bool:
        return self._legacy is None or self.flags.reads_canonical

    def _writes_canonical(self) -> bool:
        return self._legacy is None or self.flags.write_canonical

    async def get_with_metadata(self, entity: str) -> KVValueWithMetadata:
        """The item's value and metadata (both None when missing), per the read order."""
        canonical = self.canonical_key(entity)
        if self._reads_canonical():
            found = await self._kv.get_with_metadata(canonical)
            if found.value is not None:
                self._count("canonical")
                return found
        legacy = self.legacy_key(entity)
        if legacy is None or not self._reads_legacy():
            self._count("miss")
            return KVValueWithMetadata(value=None)
        found = await self._kv.get_with_metadata(legacy)
        if found.value is None:
            self._count("miss")
            return found
        self._count("legacy")
        if self.flags.compat_read:  # read-repair: the canonical key gets the value
            await self._kv.put(
                canonical,
                found.value,
                expiration_ttl=self._repair_ttl,
                metadata=self._metadata(found.metadata),
            )
        return found

    async def get(self, entity: str) -> str | None:
        return (await self.get_with_metadata(entity)).value

    async def put(
        self,
        entity: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Write per the flags (see the module docstring); `namespaceKey` rides in metadata."""
        canonical = self.canonical_key(entity)
        meta = self._metadata(metadata)
        if self._writes_canonical():
            await self._kv.put(canonical, value, expiration_ttl=expiration_ttl, metadata=meta)
            return
        legacy = self.legacy_key(entity)
        assert legacy is not None
        await self._kv.put(legacy, value, expiration_ttl=expiration_ttl, metadata=meta)
        if await self._kv.get(canonical) is not None:  # keep a canonical copy fresh
            await self._kv.put(canonical, value, expiration_ttl=expiration_ttl, metadata=meta)

    async def delete(self, entity: str) -> None:
        await self._kv.delete(self.canonical_key(entity))
        legacy = self.legacy_key(entity)
        if legacy is not None:
            await self._kv.delete(legacy)

    async def entries(self) -> list[KVEntry]:
        """Every live item of the namespace and kind, by entity id (canonical wins)."""
        found: dict[str, KVEntry] = {}
        if self._reads_legacy():
            legacy_prefix = self.legacy_key("x")
            assert legacy_prefix is not None
            for entry in await self._list(legacy_prefix[:-1]):
                found[entry.entity] = entry
        if self._reads_canonical():
            for entry in await self._list(self.canonical_key("x")[:-1]):
                found[entry.entity] = entry
        return [found[name] for name in sorted(found)]

    async def _list(self, prefix: str) -> list[KVEntry]:
        out: list[KVEntry] = []
        cursor: str | None = None
        while True:
            page = await self._kv.list(prefix=prefix, cursor=cursor)
            for key in page.keys:
                out.append(
                    KVEntry(
                        entity=key.name[len(prefix) :],
                        name=key.name,
                        metadata=key.metadata,
                        expiration=key.expiration,
                    )
                )
            if page.list_complete or not page.cursor:
                return out
            cursor = page.cursor

    def _metadata(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        return {**(metadata or {}), "ns": self.namespace.key}

    def _count(self, outcome: Outcome) -> None:
        if self.counts is not None and self.flags.compat_read:
            self.counts.record(outcome)


__all__ = [
    "KVEntry",
    "NamespaceFlags",
    "NamespacedKV",
    "ReadCounts",
    "flush_counts",
    "legacy_pattern",
]
