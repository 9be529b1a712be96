"""The namespace backfill (migration phase 2, docs/tiered-memory.md): copy every legacy
working-memory KV key (`agent_working:{tenant}:{instance}:{key}`) to its canonical item key
(`agent-memory:{tenant}:{instance}:working:{key}`).

* A canonical key that already exists is never overwritten: it was written by canonical
  writes or read-repair and is at least as new as the legacy copy.
* The copy keeps the legacy entry's value, metadata (plus `ns`, the namespace key) and
  absolute expiration; an entry with under 60 s left (KV's minimum) is left to expire.
* Nothing is deleted, legacy or canonical: the legacy keys expire by their TTL (1 h), and a
  rollback to compat read finds both.
* Bounded: at most `max_keys` legacy keys per call; `next_cursor` resumes (None when done).
  Each key costs at most 3 KV calls (canonical get, legacy get, put).
A legacy key that does not parse as a working-memory key of a valid namespace is counted in
`invalid` and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_memory.namespace import LEGACY_WORKING_PREFIX, SEPARATOR, InvalidNamespaceKey, ItemKey
from bindings.ports.clock import Clock
from bindings.ports.kv import KV_MIN_EXPIRATION_TTL, KVNamespace

DEFAULT_MAX_KEYS = 250


@dataclass
class BackfillReport:
    scanned: int = 0
    copied: int = 0
    already_canonical: int = 0
    expiring: int = 0
    invalid: int = 0
    dry_run: bool = False
    next_cursor: str | None = None

    def merge(self, other: BackfillReport) -> None:
        self.scanned += other.scanned
        self.copied += other.copied
        self.already_canonical += other.already_canonical
        self.expiring += other.expiring
        self.invalid += other.invalid
        self.next_cursor = other.next_cursor


def legacy_prefix(tenant: str | None) -> str:
    return LEGACY_WORKING_PREFIX + SEPARATOR + (f"{tenant}{SEPARATOR}" if tenant else "")


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
    """Copy up to `max_keys` legacy keys (of `tenant`, or of every tenant) to canonical keys."""
    report = BackfillReport(dry_run=dry_run)
    now = clock.now()
    page = await kv.list(prefix=legacy_prefix(tenant), cursor=cursor, limit=max(1, max_keys))
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
