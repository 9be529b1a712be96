"""The weekly prune (cron `0 3 * * SUN`): episodes, finished runs and memory events past their
tenant's retention are archived to the cold tier, then deleted — in bounded, resumable
batches.

A prune is a *job* with a fixed id and fixed cutoffs:

* the weekly cron's job id is `weekly-{ISO week of its scheduled time}`; each tenant's
  cutoff is `scheduled time - retention` and is stored (`lifecycle_prune_progress`) the
  first time the job meets the tenant, so a retried or resumed invocation finishes *the
  same* job rather than starting a new one with a later cutoff;
* one invocation works within a `PruneBudget`: at most `max_operations` D1 statements +
  R2 calls (a Worker invocation may make 1000 D1 queries on the paid plan, 50 on the free
  one; `d1/platform/limits.mdx`) and `max_seconds` of wall time (a cron invocation whose
  interval is ≥ 1 h may run 15 min; `workers/platform/limits.mdx`). What is left is picked
  up by the next invocation: the daily cron resumes an unfinished job.

One batch (`ArchiveBatchWriter.archive_batch`), per tenant and kind, oldest rows first:

1. SELECT up to `batch_rows` rows past the cutoff, ordered by (time, id); keep those in the
   ISO week of the first (an archive object never spans two weeks);
2. PUT them to R2 as gzip NDJSON under a key derived from the first row
   (`agent_memory.lifecycle.cold.archive_key`) — before anything is deleted;
3. one D1 batch (a transaction): record the archive in `lifecycle_archives` together with
   the number of rows the key range [first, last] now holds (a CHECK makes the transaction
   fail unless that equals the rows archived), DELETE exactly that key range, and add the
   count to the tenant's progress.

So nothing is deleted that is not in an archive object, and nothing is counted twice:

* interrupted after 2 and before 3: the rows are still in D1; the next run selects the same
  first row, writes the same key (the object is replaced, not duplicated) and deletes;
* a row that appears inside the range between 1 and 3 (a late write with an old time)
  makes the CHECK fail: nothing is deleted and the batch is redone with the new row;
* counts are added in the same transaction as the delete, so they are exact per job.

Where the parts live (this module re-exports their public names):

* `_prune_models`: the budget, its meter and the per-tenant counts;
* `_prune_jobs`: the job ledger and each tenant's progress row;
* `_prune_archive`: the archived tables and the batch above (`ArchiveBatchWriter`);
* `_cold_expiry`: after a tenant's tables, archive objects past their kind's cold retention
  (the placement table: run and event archives, the `log` kind, 90 days) are deleted;
* here: `Pruner`, which runs a job over the tenants, its `PruneReport`, and
  `resume_unfinished`.

Per-statement bound parameters stay ≤ 8 (D1 allows 100). Logs one line per tenant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.lifecycle._cold_expiry import ColdExpiry, cold_cutoffs
from agent_memory.lifecycle._prune_archive import (
    EPISODES,
    EVENTS,
    PRUNED_TABLES,
    RANGE_RETRIES,
    RUNS,
    TABLES,
    ArchiveBatchWriter,
    RangeChanged,
)
from agent_memory.lifecycle._prune_jobs import PruneJobs
from agent_memory.lifecycle._prune_models import (
    DEFAULT_BATCH_ROWS,
    DEFAULT_MAX_OPERATIONS,
    DEFAULT_MAX_SECONDS,
    OPERATIONS_PER_BATCH,
    BudgetExhausted,
    Meter,
    PruneBudget,
    StopReason,
    TenantPruneCounts,
)
from agent_memory.lifecycle.cold import iso_week
from agent_memory.lifecycle.retention import get_lifecycle, known_tenants
from agent_memory.placement import DEFAULT_TABLE, PlacementTable
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.object_store import ObjectStore

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_MAX_OPERATIONS",
    "DEFAULT_MAX_SECONDS",
    "EPISODES",
    "EVENTS",
    "OPERATIONS_PER_BATCH",
    "PRUNED_TABLES",
    "RANGE_RETRIES",
    "RUNS",
    "TABLES",
    "BudgetExhausted",
    "Progress",
    "PruneBudget",
    "PruneReport",
    "Pruner",
    "RangeChanged",
    "StopReason",
    "TenantPruneCounts",
    "resume_unfinished",
    "weekly_prune_id",
]

log = logging.getLogger(__name__)

Progress = Callable[[TenantPruneCounts], None]


class PruneReport(BaseModel):
    prune_id: str
    dry_run: bool
    complete: bool
    stopped_by: StopReason | None = None
    operations: int = 0
    tenants: list[TenantPruneCounts] = Field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {
            "tenants": len(self.tenants),
            "episodes_deleted": sum(t.episodes_deleted for t in self.tenants),
            "runs_deleted": sum(t.runs_deleted for t in self.tenants),
            "events_deleted": sum(t.events_deleted for t in self.tenants),
            "batches": sum(t.batches for t in self.tenants),
            "episodes_now": sum(t.episodes_now for t in self.tenants),
            "runs_now": sum(t.runs_now for t in self.tenants),
            "events_now": sum(t.events_now for t in self.tenants),
            "batches_now": sum(t.batches_now for t in self.tenants),
            "archives_expired_now": sum(t.archives_expired_now for t in self.tenants),
            "episodes_due": sum(t.episodes_due or 0 for t in self.tenants),
            "runs_due": sum(t.runs_due or 0 for t in self.tenants),
            "events_due": sum(t.events_due or 0 for t in self.tenants),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "prune_id": self.prune_id,
            "dry_run": self.dry_run,
            "complete": self.complete,
            "stopped_by": self.stopped_by,
            "operations": self.operations,
            **self.totals(),
        }


def weekly_prune_id(scheduled_ms: int) -> str:
    return f"weekly-{iso_week(scheduled_ms)}"


class Pruner:
    """Runs prune jobs over a D1 database and a cold-tier bucket."""

    def __init__(
        self,
        db: D1Database,
        cold: ObjectStore | None,
        clock: Clock,
        *,
        default_retention_days: int,
        budget: PruneBudget | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        placement: PlacementTable = DEFAULT_TABLE,
    ) -> None:
        self._db = db
        self._cold = cold
        self._clock = clock
        self._default_days = default_retention_days
        self.budget = budget or PruneBudget()
        self._monotonic = monotonic
        self._jobs = PruneJobs(db, clock, default_retention_days=default_retention_days)
        self._archives = ArchiveBatchWriter(db, cold, clock, self.budget)
        self._placement = placement
        self._expiry = None if cold is None else ColdExpiry(db, cold, self.budget)

    # ------------------------------------------------------------------ entry points

    async def run(
        self,
        prune_id: str,
        scheduled_ms: int,
        *,
        tenants: Sequence[str] | None = None,
        progress: Progress | None = None,
        meter: Meter | None = None,
    ) -> PruneReport:
        """Run (or resume) job `prune_id` within the budget; see the module docstring.

        `tenants` limits the run to those tenants (the job is complete when they are);
        `meter` shares one budget between jobs."""
        if self._cold is None:
            raise RuntimeError("the prune archives to the cold tier: bind the R2 bucket COLD")
        meter = meter or self.meter()
        now_ms = int(self._clock.now() * 1000)
        status = await self._jobs.start(prune_id, scheduled_ms, now_ms, meter)
        names = list(tenants) if tenants is not None else await self._jobs.tenants(prune_id, meter)
        report = PruneReport(prune_id=prune_id, dry_run=False, complete=False)
        if status == "complete" and tenants is None:
            report.tenants = await self._jobs.job_counts(prune_id, names, meter)
            report.complete = True
            report.operations = meter.operations
            return report
        try:
            for tenant in names:
                counts = await self._prune_tenant(prune_id, tenant, scheduled_ms, meter)
                report.tenants.append(counts)
                self._log(prune_id, counts)
                if progress is not None:
                    progress(counts)
        except BudgetExhausted as stop:
            report.stopped_by = stop.reason
            if stop.counts is not None:
                report.tenants.append(stop.counts)
                self._log(prune_id, stop.counts)
                if progress is not None:
                    progress(stop.counts)
            log.warning(
                "prune %s: stopped by the %s budget after %d operations; the next run resumes",
                prune_id,
                stop.reason,
                meter.operations,
            )
        report.operations = meter.operations
        finished = report.stopped_by is None and all(
            t.done and t.error is None for t in report.tenants
        )
        if finished:
            # A job run for named tenants (an operator's prune) is complete when they are.
            await self._jobs.finish(prune_id, now_ms)
            report.complete = True
        return report

    def meter(self) -> Meter:
        """A fresh budget meter for one invocation."""
        return Meter(self.budget, self._monotonic)

    async def dry_run(
        self,
        scheduled_ms: int,
        *,
        tenants: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> PruneReport:
        """What a prune at `scheduled_ms` would archive and delete; writes nothing."""
        names = (
            list(tenants) if tenants is not None else await known_tenants(self._db, PRUNED_TABLES)
        )
        report = PruneReport(prune_id="dry-run", dry_run=True, complete=True)
        for tenant in names:
            lifecycle = await get_lifecycle(self._db, tenant, self._default_days)
            cutoff = lifecycle.cutoff_ms(scheduled_ms)
            counts = TenantPruneCounts(
                tenant_id=tenant,
                retention_days=lifecycle.episode_retention_days,
                cutoff_ms=cutoff,
                episodes_due=await self._archives.count_due(EPISODES, tenant, cutoff),
                runs_due=await self._archives.count_due(RUNS, tenant, cutoff),
                events_due=await self._archives.count_due(EVENTS, tenant, cutoff),
            )
            report.tenants.append(counts)
            report.operations += 4
            if progress is not None:
                progress(counts)
        return report

    async def unfinished_jobs(self) -> list[tuple[str, int]]:
        """(prune_id, scheduled_ms) of jobs that have not completed, oldest first."""
        return await self._jobs.unfinished()

    # ------------------------------------------------------------------ one tenant

    async def _prune_tenant(
        self, prune_id: str, tenant: str, scheduled_ms: int, meter: Meter
    ) -> TenantPruneCounts:
        counts = await self._jobs.tenant_counts(prune_id, tenant, scheduled_ms, meter)
        if counts.done:
            return counts
        try:
            for table in TABLES:
                while True:
                    meter.check(OPERATIONS_PER_BATCH + 1)
                    archived = await self._archives.archive_batch(
                        prune_id, tenant, table, counts.cutoff_ms, meter
                    )
                    if archived is None:
                        break
                    key, rows = archived
                    counts.batches += 1
                    counts.batches_now += 1
                    counts.archives_now.append(key)
                    if table is EPISODES:
                        counts.episodes_deleted += rows
                        counts.episodes_now += rows
                    elif table is RUNS:
                        counts.runs_deleted += rows
                        counts.runs_now += rows
                    else:
                        counts.events_deleted += rows
                        counts.events_now += rows
            # The cold tier's own retention (placement `cold_retention_days`: logs, 90 d).
            assert self._expiry is not None
            cutoffs = cold_cutoffs(self._placement, scheduled_ms)
            counts.archives_expired_now += await self._expiry.expire(tenant, cutoffs, meter)
        except BudgetExhausted as stop:
            stop.counts = counts
            raise
        except Exception as exc:
            # One tenant's failure must not stop the others; the job stays unfinished and
            # the next run retries this tenant from where it stopped.
            log.exception("prune %s: tenant %s failed", prune_id, tenant)
            counts.error = f"{type(exc).__name__}: {exc}"
            return counts
        await self._jobs.mark_done(prune_id, tenant, meter)
        counts.done = True
        return counts

    @staticmethod
    def _log(prune_id: str, counts: TenantPruneCounts) -> None:
        log.info(
            "prune %s: tenant %s retention=%dd episodes=%d (+%d) runs=%d (+%d) events=%d (+%d) "
            "batches=%d%s%s",
            prune_id,
            counts.tenant_id,
            counts.retention_days,
            counts.episodes_deleted,
            counts.episodes_now,
            counts.runs_deleted,
            counts.runs_now,
            counts.events_deleted,
            counts.events_now,
            counts.batches,
            " done" if counts.done else "",
            f" error={counts.error}" if counts.error else "",
        )


async def resume_unfinished(
    pruner: Pruner, *, progress: Progress | None = None
) -> list[PruneReport]:
    """Continue every unfinished job (oldest first) while the budget lasts."""
    reports = []
    meter = pruner.meter()
    for prune_id, scheduled_ms in await pruner.unfinished_jobs():
        report = await pruner.run(prune_id, scheduled_ms, progress=progress, meter=meter)
        reports.append(report)
        if not report.complete:
            break
    return reports
