"""Tier 1, working memory: one agent instance's JSON items in KV (docs/agent-runtime.md,
"Memory tiers"), and the hot/warm/cold ADR's namespace migration of their keys, read and
written per the two flags with read-repair and the backfill (docs/tiered-memory.md, "Migration
phases"). Only a delete removes a canonical key.

Bad keys raise `InvalidWorkingMemoryKey`, non-JSON values `WorkingMemoryError`; every write
refreshes the 1 h TTL. The 128 KiB per-instance budget is checked *before* the write
(`WorkingMemoryBudgetExceeded`, nothing written), from the key listing's metadata
(`{"bytes", "written_at"}`), so no second copy of the accounting can drift; the check spans
awaits, so concurrent turns share its `write_lock`.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_memory.governance.writes import WriteDenied, WriteGate, WriteProposal
from agent_memory.namespace import (
    LEGACY_WORKING_PREFIX,
    SEPARATOR,
    SERVICE,
    SESSION_RE,
    TENANT_RE,
    InvalidMemoryKey,
    InvalidNamespaceKey,
    ItemKey,
    NamespaceKey,
    legacy_working_key,
    validate_key,
)
from bindings.ports.clock import Clock, SystemClock
from bindings.ports.d1 import D1Database
from bindings.ports.errors import BindingLimitError
from bindings.ports.kv import KV_MIN_EXPIRATION_TTL, KVKey, KVNamespace, KVValueWithMetadata
from bindings.settings import Settings
from http_messages import CodedError

Outcome = Literal["canonical", "legacy", "miss"]


@dataclass(frozen=True, slots=True)
class NamespaceFlags:
    """The two migration flags (settings `MEMORY_NAMESPACE_COMPAT_READ` / `_WRITE_CANONICAL`)."""

    compat_read: bool = False
    write_canonical: bool = False

    @classmethod
    def of(cls, settings: Settings) -> NamespaceFlags:
        """The flags as this deployment sets them."""
        return cls(settings.memory_namespace_compat_read, settings.memory_namespace_write_canonical)

    @property
    def phase(self) -> str:
        if self.compat_read:
            return "canonical-write" if self.write_canonical else "dual-read"
        return "canonical-only" if self.write_canonical else "legacy"


@dataclass
class ReadCounts:
    """Reads under compat read, per outcome; `flush_counts` persists and resets them."""

    canonical: int = 0
    legacy: int = 0
    miss: int = 0

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


class NamespacedKV:
    """One namespace's items of one kind in KV, keyed per the migration flags (only the
    `working` kind has a legacy key; other kinds are canonical in every phase)."""

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
        self._repair_ttl = repair_ttl
        legacy = kind == "working"
        self._reads_legacy = legacy and (self.flags.compat_read or not self.flags.write_canonical)
        self._reads_canonical = not legacy or self.flags.compat_read or self.flags.write_canonical
        self._writes_canonical = not legacy or self.flags.write_canonical

    def canonical_key(self, entity: str) -> str:
        return ItemKey(self.namespace, self.kind, entity).key

    def legacy_key(self, entity: str) -> str:
        return legacy_working_key(ItemKey(self.namespace, self.kind, entity))

    async def get_with_metadata(self, entity: str) -> KVValueWithMetadata:
        """The item's value and metadata (both None when missing), per the read order."""
        canonical = self.canonical_key(entity)
        if self._reads_canonical:
            found = await self._kv.get_with_metadata(canonical)
            if found.value is not None:
                self._count("canonical")
                return found
        if not self._reads_legacy:
            self._count("miss")
            return KVValueWithMetadata(value=None)
        found = await self._kv.get_with_metadata(self.legacy_key(entity))
        self._count("miss" if found.value is None else "legacy")
        if found.value is not None and self.flags.compat_read:  # read-repair
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
        """Write per the flags (see the module docstring); `ns` (the namespace key) rides in
        the metadata."""
        canonical = self.canonical_key(entity)
        meta = self._metadata(metadata)
        if not self._writes_canonical:
            legacy = self.legacy_key(entity)
            # One round trip: whether a canonical copy exists does not depend on this put.
            _, copy = await asyncio.gather(
                self._kv.put(legacy, value, expiration_ttl=expiration_ttl, metadata=meta),
                self._kv.get(canonical),
            )
            if copy is None:  # else keep the canonical copy fresh
                return
        await self._kv.put(canonical, value, expiration_ttl=expiration_ttl, metadata=meta)

    async def delete(self, entity: str) -> None:
        await self._kv.delete(self.canonical_key(entity))
        if self.kind == "working":
            await self._kv.delete(self.legacy_key(entity))

    async def entries(self) -> list[tuple[str, KVKey]]:
        """Every live item of the namespace and kind as (entity id, listed key), by entity id
        (the canonical entry wins)."""
        found: dict[str, KVKey] = {}
        prefixes = [self.legacy_key("x")[:-1]] if self._reads_legacy else []
        if self._reads_canonical:
            prefixes.append(self.canonical_key("x")[:-1])
        for prefix in prefixes:
            cursor: str | None = None
            while True:
                page = await self._kv.list(prefix=prefix, cursor=cursor)
                found.update((key.name[len(prefix) :], key) for key in page.keys)
                if page.list_complete or not page.cursor:
                    break
                cursor = page.cursor
        return sorted(found.items())

    def _metadata(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        return {**(metadata or {}), "ns": self.namespace.key}

    def _count(self, outcome: Outcome) -> None:
        if self.counts is not None and self.flags.compat_read:
            setattr(self.counts, outcome, getattr(self.counts, outcome) + 1)


# The daily brief's figures on this store's tables: scalar subqueries the brief joins into
# one statement per tenant (?1 tenant, ?2 now in ms; `lifecycle.brief`).
# Hot reads by outcome since the start of the previous UTC day.
BRIEF_FIGURES = ", ".join(
    f"(SELECT COALESCE(SUM({column}), 0) FROM namespace_reads WHERE tenant_id = ?1 "
    f"AND day >= date(?2 / 1000, 'unixepoch', '-1 day')) AS namespace_{column}"
    for column in ("canonical_hits", "legacy_hits", "misses")
)

WORKING_MEMORY_PREFIX = "agent_working"
WORKING_MEMORY_TTL_SECONDS = 3600
WORKING_MEMORY_BUDGET_BYTES = 128 * 1024


class WorkingMemoryError(CodedError, ValueError):
    """A working-memory operation was refused; nothing was written."""

    status, code = 422, "validation_error"


class InvalidWorkingMemoryKey(WorkingMemoryError, InvalidMemoryKey):
    """The key (or its tenant / instance segment) is empty, a wildcard or malformed."""

    code = "invalid_key"


class WorkingMemoryWriteDenied(WorkingMemoryError):
    """The write policy refused the write (`agent_memory.governance.writes`); `denied` says why."""

    code = "memory_write_denied"

    def __init__(self, denied: WriteDenied) -> None:
        super().__init__(str(denied))
        self.denied = denied


class WorkingMemoryBudgetExceeded(WorkingMemoryError):
    """The write would take the instance past its byte budget."""

    status, code = 413, "working_memory_budget_exceeded"

    def __init__(self, *, key: str, needed: int, used: int, budget: int) -> None:
        super().__init__(
            f"working memory budget exceeded: writing {key!r} needs {needed} bytes, "
            f"the instance already uses {used} of {budget}; delete keys or store less"
        )
        self.key, self.needed, self.used, self.budget = key, needed, used, budget
        self.details = {"needed": needed, "used": used, "budget": budget}


class WorkingRead(BaseModel):
    """One key read with its value and, when recorded, its write time (epoch seconds)."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: Any
    written_at: float | None = None


class WorkingEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    bytes: int
    expiration: int | None = None


class WorkingWrite(BaseModel):
    """What a successful `set` did, for the run log."""

    model_config = ConfigDict(frozen=True)

    key: str
    bytes: int
    used_after: int
    budget: int


class WorkingMemory:
    """The working memory of one session: an agent's (`namespace.agent_session`, what the
    `Memory` front door gives) or any session id a caller names."""

    def __init__(
        self,
        kv: KVNamespace,
        tenant: str,
        session: str,
        *,
        budget_bytes: int = WORKING_MEMORY_BUDGET_BYTES,
        ttl_seconds: int = WORKING_MEMORY_TTL_SECONDS,
        write_lock: asyncio.Lock | None = None,
        gate: WriteGate | None = None,
        agent_type: str | None = None,
        run_id: str | None = None,
        clock: Clock | None = None,
        namespace: NamespaceFlags | None = None,
        read_counts: ReadCounts | None = None,
    ) -> None:
        if not TENANT_RE.fullmatch(tenant or ""):
            raise InvalidWorkingMemoryKey(f"invalid tenant segment {tenant!r}")
        if not SESSION_RE.fullmatch(session or ""):
            raise InvalidWorkingMemoryKey(f"invalid session segment {session!r}")
        self._keys = NamespacedKV(
            kv,
            NamespaceKey(SERVICE, tenant, session),
            "working",
            flags=namespace,
            counts=read_counts,
            repair_ttl=ttl_seconds,
        )
        self.budget_bytes = budget_bytes
        self.ttl_seconds = ttl_seconds
        self._lock = write_lock or asyncio.Lock()
        self._gate = gate or WriteGate(tenant)
        self._session = session
        self._agent_type = agent_type
        self._run_id = run_id
        self._clock: Clock = clock or SystemClock()

    async def get(self, key: str) -> Any | None:
        """The stored JSON value, or None when missing or expired."""
        raw = await self._keys.get(validate_key(key, InvalidWorkingMemoryKey))
        return None if raw is None else json.loads(raw)

    async def read(self, key: str) -> WorkingRead | None:
        """The value under `key` with its write time (epoch seconds; None for an entry
        written before write times were recorded), or None when missing or expired."""
        found = await self._keys.get_with_metadata(validate_key(key, InvalidWorkingMemoryKey))
        if found.value is None:
            return None
        written = (found.metadata or {}).get("written_at")
        return WorkingRead(
            key=key,
            value=json.loads(found.value),
            written_at=float(written) if isinstance(written, int | float) else None,
        )

    async def entries(self) -> list[WorkingEntry]:
        """Every live key of the instance with its accounted size, in key order."""
        found = []
        for name, item in await self._keys.entries():
            size = (item.metadata or {}).get("bytes")
            size = size if isinstance(size, int) else 0  # not ours: counted by key bytes only
            found.append(
                WorkingEntry(key=name, bytes=len(name.encode()) + size, expiration=item.expiration)
            )
        return found

    async def set(self, key: str, value: Any) -> WorkingWrite:
        """Write `value` under `key` with a fresh TTL, or raise without writing anything."""
        validate_key(key, InvalidWorkingMemoryKey)
        try:
            encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise WorkingMemoryError(f"working memory values must be JSON: {exc}") from None
        proposal = WriteProposal(
            tier="working",
            key=f"{self._session}:{key}",
            value=value,
            source="working_memory",
            agent_type=self._agent_type,
            run_id=self._run_id,
        )
        try:
            self._gate.check(proposal)
        except WriteDenied as denied:
            raise WorkingMemoryWriteDenied(denied) from None
        value_bytes = len(encoded.encode("utf-8"))
        needed = len(key.encode("utf-8")) + value_bytes
        async with self._lock:
            # The caller's admission (a token check) in the same round trip as the budget read.
            listed, _ = await asyncio.gather(self.entries(), self._gate.admitted())
            used = sum(entry.bytes for entry in listed if entry.key != key)
            if used + needed > self.budget_bytes:
                raise WorkingMemoryBudgetExceeded(
                    key=key, needed=needed, used=used, budget=self.budget_bytes
                )
            # The write time rides in the metadata so a single read can be scored for
            # recency without listing the instance (`read`).
            metadata = {"bytes": value_bytes, "written_at": round(self._clock.now(), 3)}
            await self._keys.put(key, encoded, expiration_ttl=self.ttl_seconds, metadata=metadata)
        await self._gate.committed([proposal])
        return WorkingWrite(
            key=key, bytes=needed, used_after=used + needed, budget=self.budget_bytes
        )

    async def delete(self, key: str) -> None:
        await self._keys.delete(validate_key(key, InvalidWorkingMemoryKey))

    async def snapshot(self, listed: Sequence[WorkingEntry] | None = None) -> dict[str, Any]:
        """Every live key (of `listed`, when the caller has listed them) with its value (what
        a turn sees at its start); the values are read concurrently."""
        listed = await self.entries() if listed is None else listed
        raws = await asyncio.gather(*(self._keys.get(entry.key) for entry in listed))
        # None: expired between list and get
        return {
            e.key: json.loads(raw) for e, raw in zip(listed, raws, strict=True) if raw is not None
        }


DEFAULT_MAX_KEYS = 250


class BackfillReport(BaseModel):
    """What one namespace backfill step (or the whole loop) did."""

    scanned: int = 0
    copied: int = 0
    already_canonical: int = 0
    expiring: int = 0
    invalid: int = 0
    dry_run: bool = False
    next_cursor: str | None = None

    def merge(self, other: BackfillReport) -> None:
        for name in ("scanned", "copied", "already_canonical", "expiring", "invalid"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.next_cursor = other.next_cursor


def _canonical(name: str) -> ItemKey | None:
    parts = name.split(SEPARATOR)
    if len(parts) < 4 or parts[0] != LEGACY_WORKING_PREFIX:
        return None
    try:
        return ItemKey.build(parts[1], parts[2], "working", SEPARATOR.join(parts[3:]))
    except InvalidNamespaceKey:
        return None


async def backfill_namespace(
    kv: KVNamespace,
    clock: Clock,
    *,
    tenant: str | None = None,
    dry_run: bool = False,
    cursor: str | None = None,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> BackfillReport:
    """Copy up to `max_keys` legacy keys (of `tenant`, or of every tenant) to canonical keys,
    never overwriting one, keeping value, metadata and absolute expiration (under 60 s left:
    left to expire); deletes nothing. Repeat with `next_cursor` until it is None; another
    cursor is an `InvalidBackfillCursor`."""
    report = BackfillReport(dry_run=dry_run)
    now = clock.now()
    prefix = LEGACY_WORKING_PREFIX + SEPARATOR + (f"{tenant}{SEPARATOR}" if tenant else "")
    try:
        page = await kv.list(prefix=prefix, cursor=cursor, limit=max(1, max_keys))
    except BindingLimitError:  # KV's refusal of a cursor it did not hand out
        raise InvalidBackfillCursor("cursor is not one this backfill returned") from None
    for entry in page.keys:
        report.scanned += 1
        item = _canonical(entry.name)
        if item is None:
            report.invalid += 1
            continue
        if entry.expiration is not None and entry.expiration - now < KV_MIN_EXPIRATION_TTL:
            report.expiring += 1
            continue
        if await kv.get(item.key) is not None:
            report.already_canonical += 1
            continue
        found = await kv.get_with_metadata(entry.name)
        if found.value is None:  # expired since the listing
            report.expiring += 1
            continue
        report.copied += 1
        if not dry_run:
            await kv.put(
                item.key,
                found.value,
                expiration=entry.expiration,
                metadata={**(found.metadata or {}), "ns": item.namespace_key},
            )
    report.next_cursor = None if page.list_complete else page.cursor
    return report


async def backfill_all(
    kv: KVNamespace, clock: Clock, *, tenant: str | None = None, dry_run: bool = False
) -> BackfillReport:
    """`backfill_namespace` until every legacy key was seen (the CLI's loop)."""
    total = BackfillReport(dry_run=dry_run)
    cursor: str | None = None
    while True:
        step = await backfill_namespace(kv, clock, tenant=tenant, dry_run=dry_run, cursor=cursor)
        total.merge(step)
        if step.next_cursor is None:
            return total
        cursor = step.next_cursor


class InvalidBackfillCursor(CodedError, ValueError):
    """A cursor this backfill did not return."""

    status, code = 422, "invalid_cursor"
