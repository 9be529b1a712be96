"""The cold tier's own lifecycle (the placement table's `cold_retention_days`): archive
objects of a kind whose cold retention has passed are deleted by the prune.

By default that is the `log` kind — archives of finished runs and memory events — 90 days
after they were archived (the hot/warm/cold ADR: "logs/ → delete after 90 days"); archived
episodes have no cold retention and stay until erased. Age is counted from the archive's
ledger row (`lifecycle_archives.created_at`, the moment the prune wrote it), as an R2
lifecycle rule counts from the object's upload. On Cloudflare the same rule can also be set
on the bucket (`wrangler r2 bucket lifecycle add agent-memory-cold expire-logs logs/
--expire-days 90`, docs/tiered-memory.md): the prune's pass keeps the ledger in step and is
what enforces it for the local object store.

Per tenant and kind, oldest first, at most `batch_rows` objects per round: one R2 delete of
their keys, then one D1 statement dropping their ledger rows. Interrupted in between, the
next prune deletes the (already missing) objects again — R2 ignores missing keys — and then
the rows: nothing is left half-expired for long and nothing else is touched.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from agent_memory.lifecycle._prune_models import Meter, PruneBudget
from agent_memory.lifecycle.cold import ArchiveKind
from agent_memory.placement import PlacementTable
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from bindings.ports.d1 import D1Database
from bindings.ports.object_store import OBJECT_STORE_MAX_DELETE_KEYS, ObjectStore

DAY_MS = 86_400_000
# Which archive kinds hold which memory kind (agent_memory.placement).
ARCHIVE_KINDS: dict[str, tuple[ArchiveKind, ...]] = {
    "episode": ("episodes",),
    "log": ("runs", "events"),
}


def cold_cutoffs(table: PlacementTable, now_ms: int) -> dict[ArchiveKind, int]:
    """Archive kind → the archive time before which its objects are past cold retention."""
    out: dict[ArchiveKind, int] = {}
    for kind, archive_kinds in ARCHIVE_KINDS.items():
        days = table.placement(kind).cold_retention_days
        if days is not None:
            for archive_kind in archive_kinds:
                out[archive_kind] = now_ms - days * DAY_MS
    return out


class ColdExpiry:
    """Deletes a tenant's archive objects past their kind's cold retention."""

    def __init__(self, db: D1Database, cold: ObjectStore, budget: PruneBudget) -> None:
        self._db = db
        self._cold = cold
        self._budget = budget

    async def expire(self, tenant: str, cutoffs: dict[ArchiveKind, int], meter: Meter) -> int:
        """Delete every expired archive of `tenant`; how many objects went."""
        removed = 0
        for kind, cutoff in cutoffs.items():
            while True:
                limit = min(self._budget.batch_rows, OBJECT_STORE_MAX_DELETE_KEYS)
                meter.check(2 + -(-limit // IDS_PER_STATEMENT))  # select, delete, ledger
                result = await (
                    self._db.prepare(
                        "SELECT archive_key FROM lifecycle_archives WHERE tenant_id = ? "
                        "AND kind = ? AND created_at < ? ORDER BY created_at LIMIT ?"
                    )
                    .bind(tenant, kind, cutoff, limit)
                    .all()
                )
                meter.spend()
                keys = [str(r["archive_key"]) for r in result.results]
                if not keys:
                    break
                await self._cold.delete(keys)
                meter.spend()
                for part in chunks(keys):
                    marks = ", ".join("?" * len(part))
                    await (
                        self._db.prepare(
                            "DELETE FROM lifecycle_archives WHERE tenant_id = ? "
                            f"AND archive_key IN ({marks})"
                        )
                        .bind(tenant, *part)
                        .run()
                    )
                    meter.spend()
                removed += len(keys)
        return removed
