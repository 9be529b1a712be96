"""`MemoryClient`: one read and write path over the hot (KV), warm (D1) and cold (R2) tiers of
the hot/warm/cold ADR, assembled by `MemoryBuilder`.

    memory = (
        MemoryBuilder()
        .with_hot(KVHotMemory(kv))
        .with_warm(D1WarmMemory(db))
        .with_cold(ArchiveColdMemory(db, bucket, clock))
        .with_rules(read_fallback=True, promote_on_read=True, write_through=False)
        .for_tenant("acme")
        .build()
    )
    found = await memory.get("agent-memory:acme:agent-7:episode:01J...")

Contract:

* Keys are item keys (`agent_memory.namespace`); a malformed one raises
  `InvalidNamespaceKey` before any tier is touched, and a client bound to a tenant
  (`for_tenant`) raises `NamespaceForbidden` for a key of any other tenant.
* `get` reads hot → warm → cold (warm and cold only with `read_fallback`) and returns the
  value with the tier it was found in. With `promote_on_read`, a warm hit is copied to hot
  (TTL `hot_ttl`), and a cold hit to hot, and to warm only when the kind's placement says
  `cold_promotes_to_warm` (episodes do not: see `agent_memory.placement`).
* `set` writes the kind's tier (placement table). With `write_through`, a warm or cold write
  also writes the hot copy (TTL `hot_ttl`); without it, a stale hot copy is deleted, so a
  read never returns an older value than the last write.
* `delete` removes the item from every tier.
* PII: a value carrying a `_personal` mark (`governance.personal_marking`) is never written
  to hot, neither by promotion nor by write-through (nor by `set` of a hot kind: refused);
  the ADR keeps personal data in the warm tier. Cold keeps the warm tier's bytes as they are.
* A tier the deployment lacks (None) is skipped; a miss in every present tier is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_memory.namespace import InvalidNamespaceKey, ItemKey, check_tenant
from agent_memory.placement import DEFAULT_TABLE, PlacementTable, Tier
from agent_memory.tiered.episodes import is_personal
from bindings.ports.memory_tiers import ColdMemory, HotMemory, WarmMemory

DEFAULT_HOT_TTL = 900  # the ADR's default TTL (15 min) for copies promoted to hot


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
        if self._hot is not None:
            value = await self._hot.get(item.key)
            if value is not None:
                return TieredRead(value=value, tier="hot")
        if not self.rules.read_fallback:
            return None
        if self._warm is not None:
            value = await self._warm.read(item.key)
            if value is not None:
                promoted = await self._promote(item, value, to_warm=False)
                return TieredRead(value=value, tier="warm", promoted_to=promoted)
        if self._cold is not None:
            value = await self._cold.download_text(item.key)
            if value is not None:
                to_warm = self.rules.placement.placement(item.kind).cold_promotes_to_warm
                promoted = await self._promote(item, value, to_warm=to_warm)
                return TieredRead(value=value, tier="cold", promoted_to=promoted)
        return None

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
        for tier in (self._hot, self._warm):
            if tier is not None:
                await tier.delete(item.key)
        if self._cold is not None:
            await self._cold.delete(item.key)

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

    def with_rules(
        self,
        *,
        read_fallback: bool = True,
        promote_on_read: bool = True,
        write_through: bool = False,
        hot_ttl: int | None = DEFAULT_HOT_TTL,
        placement: PlacementTable = DEFAULT_TABLE,
    ) -> MemoryBuilder:
        self._rules = MemoryRules(
            read_fallback=read_fallback,
            promote_on_read=promote_on_read,
            write_through=write_through,
            hot_ttl=hot_ttl,
            placement=placement,
        )
        return self

    def for_tenant(self, tenant: str) -> MemoryBuilder:
        """Bind the client to `tenant`: keys of any other tenant are refused."""
        self._tenant = tenant
        return self

    def build(self) -> MemoryClient:
        return MemoryClient(
            hot=self._hot, warm=self._warm, cold=self._cold, rules=self._rules, tenant=self._tenant
        )
