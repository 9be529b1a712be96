"""The hot/warm/cold ADR: one `MemoryClient` over KV (hot), D1 (warm) and R2 (cold), built
by `MemoryBuilder` (`Memory.placement_client()` for a deployment). Its read, promotion, write
and PII rules are docs/tiered-memory.md, "MemoryClient".

The tiers are views of the stores: hot is the working tier's namespaced KV; warm is
`EpisodicStore` (an episode is immutable, so `upsert` inserts if absent); cold is the prune's
archives in R2, found through its cold item index (`ArchiveLedger`). An episode's text is its
`memory_episodes` row in archive form (JSON decoded, sorted keys) in every tier. Only the
`episode` kind lives in warm and cold; other kinds miss there and are refused for writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from agent_memory.cursors import decode_pair, encode_cursor_value
from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.writes import personal_marking
from agent_memory.lifecycle.prune import (
    ArchiveLedger,
    archive_key,
    decode_archive,
    encode_archive,
    encode_lines,
    row_from_archive,
)
from agent_memory.namespace import (
    InvalidNamespaceKey,
    ItemKey,
    NamespaceForbidden,
    NamespaceKey,
    check_tenant,
)
from agent_memory.placement import DEFAULT_TABLE, PlacementTable, Tier
from agent_memory.tiers.episodic import Episode, EpisodicStore, episode_from_row, open_episodes
from agent_memory.tiers.working import NamespacedKV, NamespaceFlags, ReadCounts
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.kv import KV_MIN_EXPIRATION_TTL, KVNamespace
from bindings.ports.object_store import ObjectStore

EPISODE_KIND = "episode"
DEFAULT_HOT_TTL = 900  # the ADR's default TTL (15 min) for copies promoted to hot
CLIENT_PRUNE_ID = "memory-client"
MAX_HISTORY_PAGE = 100


# The three tier ports of the hot/warm/cold ADR. Values are text; keys follow
# `agent_memory.namespace`. A missing item reads as None, deleting one is not an error; `ttl`
# is seconds (KV's minimum 60 applies, None: no expiry); `upsert`/`upload_text` replace what
# the key held. This module implements each over the KV, D1 and object-store ports.
class HotMemory(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl: int | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...


class WarmMemory(Protocol):
    async def read(self, key: str) -> str | None: ...

    async def upsert(self, key: str, value: str) -> None: ...

    async def delete(self, key: str) -> None: ...


class ColdMemory(Protocol):
    async def download_text(self, key: str) -> str | None: ...

    async def upload_text(self, key: str, value: str) -> None: ...

    async def delete(self, key: str) -> None: ...


def item_text(row: dict[str, Any]) -> str:
    """A `memory_episodes` row (as D1 returns it, or as archived) → the item text."""
    out = dict(row)
    if isinstance(out.get("data"), str):
        out["data"] = json.loads(out["data"])
    return json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def item_row(text: str) -> dict[str, Any]:
    """The item text → the row as the table stores it (JSON columns encoded)."""
    row = json.loads(text)
    if not isinstance(row, dict):
        raise ValueError("an episode item is a JSON object")
    return row_from_archive(row, "episodes")


def episode_from_item(text: str) -> Episode:
    """The item text, from any tier → the episodic tier's model (its row mapping)."""
    return episode_from_row(item_row(text))


async def open_episode_item(text: str, personal: PersonalData) -> Episode:
    """The item text, from any tier → the episode with its sealed personal fields opened
    (a field whose subject key was erased reads as erased: `PersonalData.open_many`)."""
    return (await open_episodes([item_row(text)], personal))[0]


def is_personal(text: str) -> bool:
    """True when the item carries a `_personal` mark (`governance.personal_marking`), at the
    top or one level down (an episode's `data`). Such items never go to the hot tier."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return personal_marking(value) is not None


class PersonalDataInHot(ValueError):
    """A value marked personal was written to a hot-tier kind; nothing was written."""

    code = "personal_data_tier"


@dataclass(frozen=True, slots=True)
class MemoryRules:
    """How the client moves items between tiers (see the module docstring)."""

    read_fallback: bool = True
    promote_on_read: bool = True
    write_through: bool = False
    hot_ttl: int | None = DEFAULT_HOT_TTL
    placement: PlacementTable = field(default=DEFAULT_TABLE)


@dataclass(frozen=True, slots=True)
class TieredRead:
    """A value and where it was found; `promoted_to` lists the tiers it was copied into."""

    value: str
    tier: Tier
    promoted_to: tuple[Tier, ...] = ()


class MemoryClient:
    """Reads and writes items across the three tiers (built by `MemoryBuilder`)."""

    def __init__(
        self,
        *,
        hot: HotMemory | None,
        warm: WarmMemory | None,
        cold: ColdMemory | None,
        rules: MemoryRules,
        tenant: str | None = None,
    ) -> None:
        self._hot = hot
        self._warm = warm
        self._cold = cold
        self.rules = rules
        self.tenant = tenant

    def _item(self, key: str) -> ItemKey:
        item = check_tenant(ItemKey.parse(key), self.tenant)
        if not self.rules.placement.knows(item.kind):
            raise InvalidNamespaceKey(f"memory kind {item.kind!r} is not in the placement table")
        return item

    async def get(self, key: str) -> TieredRead | None:
        item = self._item(key)
        if self._hot is not None and (value := await self._hot.get(item.key)) is not None:
            return TieredRead(value=value, tier="hot")
        if not self.rules.read_fallback:
            return None
        if self._warm is not None and (value := await self._warm.read(item.key)) is not None:
            promoted = await self._promote(item, value, to_warm=False)
            return TieredRead(value=value, tier="warm", promoted_to=promoted)
        if self._cold is None or (value := await self._cold.download_text(item.key)) is None:
            return None
        to_warm = self.rules.placement.placement(item.kind).cold_promotes_to_warm
        promoted = await self._promote(item, value, to_warm=to_warm)
        return TieredRead(value=value, tier="cold", promoted_to=promoted)

    async def _promote(self, item: ItemKey, value: str, *, to_warm: bool) -> tuple[Tier, ...]:
        if not self.rules.promote_on_read:
            return ()
        promoted: list[Tier] = []
        if to_warm and self._warm is not None:
            await self._warm.upsert(item.key, value)
            promoted.append("warm")
        if self._hot is not None and not is_personal(value):
            await self._hot.set(item.key, value, ttl=self.rules.hot_ttl)
            promoted.append("hot")
        return tuple(promoted)

    async def set(self, key: str, value: str) -> Tier:
        """Write `value` to the kind's tier (and hot, with `write_through`); returns the tier."""
        item = self._item(key)
        placement = self.rules.placement.placement(item.kind)
        personal = is_personal(value)
        if placement.tier == "hot":
            if personal:
                raise PersonalDataInHot(
                    f"{item.kind} items live in the hot tier (KV), which never holds personal data"
                )
            await self._require(self._hot, "hot").set(item.key, value, ttl=placement.ttl_seconds)
            return "hot"
        if placement.tier == "warm":
            await self._require(self._warm, "warm").upsert(item.key, value)
        else:
            await self._require(self._cold, "cold").upload_text(item.key, value)
        if self._hot is not None:
            if self.rules.write_through and not personal:
                await self._hot.set(item.key, value, ttl=self.rules.hot_ttl)
            else:
                await self._hot.delete(item.key)
        return placement.tier

    async def delete(self, key: str) -> None:
        """Remove the item from every tier (hot first, so no stale copy outlives the rest)."""
        item = self._item(key)
        for tier in (self._hot, self._warm, self._cold):
            if tier is not None:
                await tier.delete(item.key)

    @staticmethod
    def _require(tier: HotMemory | WarmMemory | ColdMemory | None, name: str) -> Any:
        if tier is None:
            raise TierMissing(f"the {name} tier is not configured")
        return tier


class TierMissing(RuntimeError):
    """A write needs a tier this client was built without."""


class MemoryBuilder:
    """Assembles a `MemoryClient` (the ADR's builder)."""

    def __init__(self) -> None:
        self._hot: HotMemory | None = None
        self._warm: WarmMemory | None = None
        self._cold: ColdMemory | None = None
        self._rules = MemoryRules()
        self._tenant: str | None = None

    def with_hot(self, hot: HotMemory | None) -> MemoryBuilder:
        self._hot = hot
        return self

    def with_warm(self, warm: WarmMemory | None) -> MemoryBuilder:
        self._warm = warm
        return self

    def with_cold(self, cold: ColdMemory | None) -> MemoryBuilder:
        self._cold = cold
        return self

    def with_rules(self, **rules: Any) -> MemoryBuilder:
        """`MemoryRules` fields: `read_fallback`, `promote_on_read`, `write_through`,
        `hot_ttl`, `placement`."""
        self._rules = MemoryRules(**rules)
        return self

    def for_tenant(self, tenant: str) -> MemoryBuilder:
        """Bind the client to `tenant`: keys of any other tenant are refused."""
        self._tenant = tenant
        return self

    def build(self) -> MemoryClient:
        return MemoryClient(
            hot=self._hot, warm=self._warm, cold=self._cold, rules=self._rules, tenant=self._tenant
        )


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
        self._of = partial(NamespacedKV, kv, flags=flags, counts=counts, repair_ttl=repair_ttl)

    def _keys(self, item: ItemKey) -> NamespacedKV:
        return self._of(item.namespace, item.kind)

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


def _episode(key: str, write: str | None = None) -> ItemKey | None:
    """The item key if it names an episode; else None, or refused when `write` names the tier
    written to (only episodes live in warm and cold)."""
    item = ItemKey.parse(key)
    if item.kind == EPISODE_KIND:
        return item
    if write is not None:
        raise InvalidNamespaceKey(f"the {write} tier holds episodes, not {item.kind!r} items")
    return None


class D1WarmMemory:
    """`WarmMemory` over a D1 database."""

    def __init__(self, db: D1Database, personal: PersonalData | None = None) -> None:
        self._db = db
        # Seals marked personal fields on upsert (without it they are refused, never
        # stored in plaintext: `EpisodicStore`).
        self._personal = personal

    async def read(self, key: str) -> str | None:
        item = _episode(key)
        if item is None:
            return None
        row = await self._store(item.tenant).namespaced_row(item.entity, item.namespace_key)
        return None if row is None else item_text(row)

    async def upsert(self, key: str, value: str) -> None:
        item = _episode(key, "warm")
        assert item is not None
        episode = episode_from_item(value)
        if (episode.episode_id, episode.instance_id) != (item.entity, item.session):
            raise InvalidNamespaceKey("the episode does not belong to this item key")
        await self._store(item.tenant).append_episode(episode)

    async def delete(self, key: str) -> None:
        if (item := _episode(key)) is not None:
            await self._store(item.tenant).delete_namespaced(item.entity, item.namespace_key)

    def _store(self, tenant: str) -> EpisodicStore:
        return EpisodicStore(self._db, tenant, personal=self._personal)


@dataclass(frozen=True, slots=True)
class ArchivedItem:
    """One entry of the cold index."""

    item_key: str
    entity_id: str
    created_at: int
    archived_at: int


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    items: list[ArchivedItem]
    next_cursor: str | None = None


class ArchiveColdMemory:
    """`ColdMemory` over the cold bucket and its D1 index."""

    def __init__(self, db: D1Database, store: ObjectStore, clock: Clock) -> None:
        self._db = db
        self._store = store
        self._clock = clock
        self._objects: dict[str, list[dict[str, Any]]] = {}

    def _ledger(self, item: ItemKey) -> ArchiveLedger:
        return ArchiveLedger(self._db, item.tenant)

    async def _index(self, item: ItemKey) -> str | None:
        return await self._ledger(item).archive_of(item.namespace_key, item.kind, item.entity)

    async def _rows(self, object_key: str) -> list[dict[str, Any]] | None:
        if object_key not in self._objects:
            body = await self._store.get(object_key)
            if body is None:
                return None
            self._objects[object_key] = decode_archive(body.data)
        return self._objects[object_key]

    async def download_text(self, key: str) -> str | None:
        item = _episode(key)
        object_key = None if item is None else await self._index(item)
        if item is None or object_key is None:
            return None
        for row in await self._rows(object_key) or []:
            if row.get("episode_id") == item.entity and row.get("tenant_id") == item.tenant:
                return item_text(row)
        return None

    async def upload_text(self, key: str, value: str) -> None:
        item = _episode(key, "cold")
        assert item is not None
        row = item_row(value)
        owner = (row.get("tenant_id"), row.get("instance_id"), row.get("episode_id"))
        if owner != (item.tenant, item.session, item.entity):
            raise InvalidNamespaceKey("the episode does not belong to this item key")
        created = int(row["created_at"])
        object_key = archive_key(item.tenant, "episodes", created, item.entity)
        data = encode_archive([row], "episodes")
        now_ms = int(self._clock.now() * 1000)
        first = f"{created}/{item.entity}"
        await self._store.put(
            object_key,
            data,
            custom_metadata={
                "tenant": item.tenant,
                "kind": "episodes",
                "rows": "1",
                "first": first,
                "last": first,
                "prune_id": CLIENT_PRUNE_ID,
            },
        )
        self._objects.pop(object_key, None)
        await self._ledger(item).record_item(
            object_key,
            namespace_key=item.namespace_key,
            kind=item.kind,
            row=row,
            entity=item.entity,
            size=len(data),
            prune_id=CLIENT_PRUNE_ID,
            now_ms=now_ms,
        )

    async def delete(self, key: str) -> None:
        item = _episode(key)
        object_key = None if item is None else await self._index(item)
        if item is None or object_key is None:
            return
        rows = await self._rows(object_key)
        if rows is not None:
            kept = [r for r in rows if r.get("episode_id") != item.entity]
            await self._rewrite(item, object_key, kept, len(rows) - len(kept))
        await self._ledger(item).unindex_item(item.namespace_key, item.kind, item.entity)

    async def _rewrite(
        self, item: ItemKey, object_key: str, kept: list[dict[str, Any]], removed: int
    ) -> None:
        self._objects.pop(object_key, None)
        if removed == 0:
            return
        if not kept:
            await self._store.delete(object_key)
            await self._ledger(item).forget(object_key)
            return
        body = await self._store.get(object_key)
        metadata = dict(body.custom_metadata) if body is not None else {}
        data = encode_lines(kept)
        await self._store.put(
            object_key, data, custom_metadata={**metadata, "rows": str(len(kept))}
        )
        await self._ledger(item).rewritten(
            object_key,
            object_key,
            rows=len(kept),
            size=len(data),
            now_ms=int(self._clock.now() * 1000),
        )

    async def history(
        self,
        tenant: str,
        *,
        namespace: NamespaceKey | None = None,
        subject: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> ArchivedPage:
        """The tenant's archived episodes — of one namespace (session) and/or one subject
        when given — newest first, `limit` per page; `next_cursor` continues. Raises
        `InvalidCursorError` for a cursor this method did not return."""
        limit = max(1, min(limit, MAX_HISTORY_PAGE))
        if namespace is not None and namespace.tenant != tenant:
            raise NamespaceForbidden("this namespace is another tenant's")
        rows = await ArchiveLedger(self._db, tenant).indexed(
            EPISODE_KIND,
            namespace_key=None if namespace is None else namespace.key,
            subject=subject,
            before=None if cursor is None else decode_pair(cursor, "c", "e"),
            limit=limit + 1,
        )
        items = [
            ArchivedItem(
                item_key=f"{r['namespace_key']}:{EPISODE_KIND}:{r['entity_id']}",
                entity_id=str(r["entity_id"]),
                created_at=int(r["created_at"]),
                archived_at=int(r["archived_at"]),
            )
            for r in rows
        ]
        if len(items) <= limit:
            return ArchivedPage(items=items)
        last = items[limit - 1]
        next_cursor = encode_cursor_value({"c": last.created_at, "e": last.entity_id})
        return ArchivedPage(items=items[:limit], next_cursor=next_cursor)
