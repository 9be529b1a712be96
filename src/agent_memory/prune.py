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

One batch (`_archive_batch`), per tenant and kind, oldest rows first:

1. SELECT up to `batch_rows` rows past the cutoff, ordered by (time, id); keep those in the
   ISO week of the first (an archive object never spans two weeks);
2. PUT them to R2 as gzip NDJSON under a key derived from the first row
   (`agent_memory.cold.archive_key`) — before anything is deleted;
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

Per-statement bound parameters stay ≤ 8 (D1 allows 100). Logs one line per tenant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.cold import ArchiveKind, archive_key, encode_archive, iso_week, week_bounds
from agent_memory.retention import TenantTable, get_lifecycle, known_tenants
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Error, D1Statement
from bindings.ports.object_store import ObjectStore
from bindings.ports.sql import Row, SqlValue

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 500
DEFAULT_MAX_OPERATIONS = 900  # under the paid plan's 1000 D1 queries per invocation
DEFAULT_MAX_SECONDS = 600.0  # under a cron invocation's 15 minutes
OPERATIONS_PER_BATCH = 5  # select, put, and a D1 batch of 3 statements
RANGE_RETRIES = 3

StopReason = Literal["operations", "time"]
Progress = Callable[["TenantPruneCounts"], None]


class PruneBudget(BaseModel):
    """How much one invocation may do."""

    max_operations: int = Field(default=DEFAULT_MAX_OPERATIONS, ge=OPERATIONS_PER_BATCH + 2)
    max_seconds: float = Field(default=DEFAULT_MAX_SECONDS, gt=0)
    batch_rows: int = Field(default=DEFAULT_BATCH_ROWS, ge=1, le=5_000)


class TenantPruneCounts(BaseModel):
    """One tenant's part of a prune job. `*_deleted` are job totals (exact across
    invocations); `*_now` what this invocation did."""

    tenant_id: str
    retention_days: int
    cutoff_ms: int
    episodes_deleted: int = 0
    runs_deleted: int = 0
    events_deleted: int = 0
    batches: int = 0
    episodes_now: int = 0
    runs_now: int = 0
    events_now: int = 0
    batches_now: int = 0
    archives_now: list[str] = Field(default_factory=list)
    done: bool = False
    # Dry runs only: what a prune would archive and delete now.
    episodes_due: int | None = None
    runs_due: int | None = None
    events_due: int | None = None
    error: str | None = None


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


class BudgetExhausted(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason
        # The counts of the tenant being pruned when the budget ran out.
        self.counts: TenantPruneCounts | None = None


class RangeChanged(Exception):
    """Rows appeared inside a batch's key range between archive and delete."""


@dataclass(frozen=True)
class _Table:
    """How one archived table is selected, keyed and deleted."""

    kind: ArchiveKind
    table: str
    time_column: str
    id_column: str
    # Extra conditions beyond `tenant_id = ? AND time < cutoff` (with their own `?`s).
    extra_sql: str = ""
    extra_params: int = 0
    progress_column: str = "episodes_deleted"


EPISODES = _Table(
    kind="episodes", table="memory_episodes", time_column="created_at", id_column="episode_id"
)
RUNS = _Table(
    kind="runs",
    table="agent_runs",
    time_column="started_at",
    id_column="run_id",
    # Only finished runs go, and only once they finished before the cutoff too.
    extra_sql=" AND status IN ('completed', 'failed') AND finished_at < ?",
    extra_params=1,
    progress_column="runs_deleted",
)
# The audit trail ages with the memory it describes: events past retention go the same way.
EVENTS = _Table(
    kind="events",
    table="memory_events",
    time_column="created_at",
    id_column="event_id",
    progress_column="events_deleted",
)
TABLES = (EPISODES, RUNS, EVENTS)
PRUNED_TABLES: tuple[TenantTable, ...] = ("memory_episodes", "agent_runs", "memory_events")


def weekly_prune_id(scheduled_ms: int) -> str:
    return f"weekly-{iso_week(scheduled_ms)}"


@dataclass
class _Meter:
    budget: PruneBudget
    clock: Callable[[], float]
    started: float = field(default=0.0)
    operations: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spend(self, n: int = 1) -> None:
        self.operations += n

    def check(self, need: int) -> None:
        """Raise `BudgetExhausted` unless `need` more operations fit in the budget."""
        if self.operations + need > self.budget.max_operations:
            raise BudgetExhausted("operations")
        if self.clock() - self.started >= self.budget.max_seconds:
            raise BudgetExhausted("time")


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
    ) -> None:
        self._db = db
        self._cold = cold
        self._clock = clock
        self._default_days = default_retention_days
        self.budget = budget or PruneBudget()
        self._monotonic = monotonic

    # ------------------------------------------------------------------ entry points

    async def run(
        self,
        prune_id: str,
        scheduled_ms: int,
        *,
        tenants: Sequence[str] | None = None,
        progress: Progress | None = None,
        meter: _Meter | None = None,
    ) -> PruneReport:
        """Run (or resume) job `prune_id` within the budget; see the module docstring.

        `tenants` limits the run to those tenants (the job is complete when they are);
        `meter` shares one budget between jobs."""
        if self._cold is None:
            raise RuntimeError("the prune archives to the cold tier: bind the R2 bucket COLD")
        meter = meter or self.meter()
        now_ms = int(self._clock.now() * 1000)
        status = await self._start_job(prune_id, scheduled_ms, now_ms, meter)
        names = list(tenants) if tenants is not None else await self._tenants(prune_id, meter)
        report = PruneReport(prune_id=prune_id, dry_run=False, complete=False)
        if status == "complete" and tenants is None:
            report.tenants = await self._job_counts(prune_id, names, meter)
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
            await self._finish_job(prune_id, now_ms)
            report.complete = True
        return report

    def meter(self) -> _Meter:
        """A fresh budget meter for one invocation."""
        return _Meter(self.budget, self._monotonic)

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
                episodes_due=await self._count_due(EPISODES, tenant, cutoff),
                runs_due=await self._count_due(RUNS, tenant, cutoff),
                events_due=await self._count_due(EVENTS, tenant, cutoff),
            )
            report.tenants.append(counts)
            report.operations += 4
            if progress is not None:
                progress(counts)
        return report

    async def unfinished_jobs(self) -> list[tuple[str, int]]:
        """(prune_id, scheduled_ms) of jobs that have not completed, oldest first."""
        result = await self._db.prepare(
            "SELECT prune_id, scheduled_at FROM lifecycle_prunes WHERE status = 'running' "
            "ORDER BY scheduled_at"
        ).all()
        return [(str(r["prune_id"]), int(r["scheduled_at"])) for r in result.results]

    # ------------------------------------------------------------------ job bookkeeping

    async def _start_job(self, prune_id: str, scheduled_ms: int, now_ms: int, meter: _Meter) -> str:
        meter.check(2)
        results = await self._db.batch(
            [
                self._db.prepare(
                    "INSERT INTO lifecycle_prunes (prune_id, scheduled_at, status, started_at) "
                    "VALUES (?, ?, 'running', ?) ON CONFLICT (prune_id) DO NOTHING"
                ).bind(prune_id, scheduled_ms, now_ms),
                self._db.prepare(
                    "UPDATE lifecycle_prunes SET invocations = invocations + 1 "
                    "WHERE prune_id = ? RETURNING status"
                ).bind(prune_id),
            ]
        )
        meter.spend(2)
        rows = results[1].results
        return str(rows[0]["status"]) if rows else "running"

    async def _finish_job(self, prune_id: str, now_ms: int) -> None:
        await (
            self._db.prepare(
                "UPDATE lifecycle_prunes SET status = 'complete', finished_at = ? "
                "WHERE prune_id = ?"
            )
            .bind(now_ms, prune_id)
            .run()
        )

    async def _tenants(self, prune_id: str, meter: _Meter) -> list[str]:
        meter.check(4)
        names = set(await known_tenants(self._db, PRUNED_TABLES))
        meter.spend(len(PRUNED_TABLES))
        # Tenants whose rows are all gone still appear in the job's counts.
        result = await (
            self._db.prepare(
                "SELECT tenant_id FROM lifecycle_prune_progress WHERE prune_id = ? "
                "ORDER BY tenant_id"
            )
            .bind(prune_id)
            .all()
        )
        meter.spend()
        names.update(str(r["tenant_id"]) for r in result.results)
        return sorted(names)

    async def _job_counts(
        self, prune_id: str, tenants: Sequence[str], meter: _Meter
    ) -> list[TenantPruneCounts]:
        out = []
        for tenant in tenants:
            row = await self._progress_row(tenant, prune_id)
            meter.spend()
            if row is not None:
                out.append(_counts_from(tenant, row))
        return out

    async def _progress_row(self, tenant: str, prune_id: str) -> Row | None:
        return await (
            self._db.prepare(
                "SELECT cutoff_ms, retention_days, episodes_deleted, runs_deleted, "
                "events_deleted, batches, done FROM lifecycle_prune_progress "
                "WHERE tenant_id = ? AND prune_id = ?"
            )
            .bind(tenant, prune_id)
            .first()
        )

    # ------------------------------------------------------------------ one tenant

    async def _prune_tenant(
        self, prune_id: str, tenant: str, scheduled_ms: int, meter: _Meter
    ) -> TenantPruneCounts:
        meter.check(4)
        row = await self._progress_row(tenant, prune_id)
        meter.spend()
        if row is None:
            lifecycle = await get_lifecycle(self._db, tenant, self._default_days)
            cutoff = lifecycle.cutoff_ms(scheduled_ms)
            await (
                self._db.prepare(
                    "INSERT INTO lifecycle_prune_progress (tenant_id, prune_id, cutoff_ms, "
                    "retention_days, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (tenant_id, prune_id) DO NOTHING"
                )
                .bind(
                    tenant,
                    prune_id,
                    cutoff,
                    lifecycle.episode_retention_days,
                    int(self._clock.now() * 1000),
                )
                .run()
            )
            meter.spend(2)
            row = await self._progress_row(tenant, prune_id)
            meter.spend()
            if row is None:
                raise RuntimeError(f"prune progress row for {tenant!r} was not written")
        counts = _counts_from(tenant, row)
        if counts.done:
            return counts
        try:
            for table in TABLES:
                while True:
                    meter.check(OPERATIONS_PER_BATCH + 1)
                    archived = await self._archive_batch(prune_id, tenant, table, counts, meter)
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
        except BudgetExhausted as stop:
            stop.counts = counts
            raise
        except Exception as exc:
            # One tenant's failure must not stop the others; the job stays unfinished and
            # the next run retries this tenant from where it stopped.
            log.exception("prune %s: tenant %s failed", prune_id, tenant)
            counts.error = f"{type(exc).__name__}: {exc}"
            return counts
        await (
            self._db.prepare(
                "UPDATE lifecycle_prune_progress SET done = 1, updated_at = ? "
                "WHERE tenant_id = ? AND prune_id = ?"
            )
            .bind(int(self._clock.now() * 1000), tenant, prune_id)
            .run()
        )
        meter.spend()
        counts.done = True
        return counts

    def _where(self, table: _Table) -> str:
        return f"tenant_id = ? AND {table.time_column} < ?{table.extra_sql}"

    def _where_params(self, table: _Table, tenant: str, cutoff: int) -> list[SqlValue]:
        params: list[SqlValue] = [tenant, cutoff]
        return params + [cutoff] * table.extra_params

    def _range_sql(self, table: _Table) -> str:
        t, i = table.time_column, table.id_column
        return f" AND ({t}, {i}) >= (?, ?) AND ({t}, {i}) <= (?, ?)"

    async def _count_due(self, table: _Table, tenant: str, cutoff: int) -> int:
        value = (
            await self._db.prepare(
                f"SELECT COUNT(*) AS n FROM {table.table} WHERE {self._where(table)}"
            )
            .bind(*self._where_params(table, tenant, cutoff))
            .first_value("n")
        )
        return int(value or 0)

    async def _archive_batch(
        self,
        prune_id: str,
        tenant: str,
        table: _Table,
        counts: TenantPruneCounts,
        meter: _Meter,
    ) -> tuple[str, int] | None:
        """Archive then delete the next batch; (archive key, rows) or None when none is left."""
        for _attempt in range(RANGE_RETRIES):
            rows = await self._select_batch(table, tenant, counts.cutoff_ms)
            meter.spend()
            if not rows:
                return None
            try:
                return await self._archive_and_delete(prune_id, tenant, table, rows, counts, meter)
            except RangeChanged:
                log.warning(
                    "prune %s: tenant %s %s range changed while archiving; redoing the batch",
                    prune_id,
                    tenant,
                    table.kind,
                )
        raise RuntimeError(
            f"{table.kind} of tenant {tenant} kept changing under the prune; try again later"
        )

    async def _select_batch(self, table: _Table, tenant: str, cutoff: int) -> list[Row]:
        t, i = table.time_column, table.id_column
        result = await (
            self._db.prepare(
                f"SELECT * FROM {table.table} WHERE {self._where(table)} ORDER BY {t}, {i} LIMIT ?"
            )
            .bind(*self._where_params(table, tenant, cutoff), self.budget.batch_rows)
            .all()
        )
        rows = result.results
        if not rows:
            return []
        # An archive object holds one ISO week: cut the batch at the first row's week end.
        _, week_end = week_bounds(int(rows[0][t]))
        return [row for row in rows if int(row[t]) < week_end]

    async def _archive_and_delete(
        self,
        prune_id: str,
        tenant: str,
        table: _Table,
        rows: list[Row],
        counts: TenantPruneCounts,
        meter: _Meter,
    ) -> tuple[str, int]:
        assert self._cold is not None
        t, i = table.time_column, table.id_column
        first, last = rows[0], rows[-1]
        first_ms, last_ms = int(first[t]), int(last[t])
        key = archive_key(tenant, table.kind, first_ms, str(first[i]))
        body = encode_archive(rows, table.kind)
        # 1. Archive first: nothing is deleted that is not in the cold tier.
        await self._cold.put(
            key,
            body,
            custom_metadata={
                "tenant": tenant,
                "kind": table.kind,
                "rows": str(len(rows)),
                "first": f"{first_ms}/{first[i]}",
                "last": f"{last_ms}/{last[i]}",
                "prune_id": prune_id,
            },
        )
        meter.spend()
        # 2. Then, in one transaction: the ledger row (its CHECK fails unless the range
        #    holds exactly the archived rows), the delete of that range, the counts.
        where = self._where(table) + self._range_sql(table)
        params = [
            *self._where_params(table, tenant, counts.cutoff_ms),
            first_ms,
            str(first[i]),
            last_ms,
            str(last[i]),
        ]
        now_ms = int(self._clock.now() * 1000)
        statements: list[D1Statement] = [
            self._db.prepare(
                "INSERT INTO lifecycle_archives (tenant_id, archive_key, kind, iso_week, rows, "
                "matched, first_key, last_key, bytes, prune_id, created_at) "
                f"VALUES (?, ?, ?, ?, ?, (SELECT COUNT(*) FROM {table.table} WHERE {where}), "
                "?, ?, ?, ?, ?) ON CONFLICT (tenant_id, archive_key) DO UPDATE SET "
                "rows = excluded.rows, matched = excluded.matched, "
                "last_key = excluded.last_key, bytes = excluded.bytes, "
                "prune_id = excluded.prune_id, created_at = excluded.created_at"
            ).bind(
                tenant,
                key,
                table.kind,
                iso_week(first_ms),
                len(rows),
                *params,
                f"{first_ms}/{first[i]}",
                f"{last_ms}/{last[i]}",
                len(body),
                prune_id,
                now_ms,
            ),
            self._db.prepare(f"DELETE FROM {table.table} WHERE {where}").bind(*params),
            self._db.prepare(
                f"UPDATE lifecycle_prune_progress SET {table.progress_column} = "
                f"{table.progress_column} + ?, batches = batches + 1, updated_at = ? "
                "WHERE tenant_id = ? AND prune_id = ?"
            ).bind(len(rows), now_ms, tenant, prune_id),
        ]
        try:
            await self._db.batch(statements)
        except D1Error as exc:
            if "CHECK constraint failed" in str(exc):
                raise RangeChanged(str(exc)) from exc
            raise
        finally:
            meter.spend(len(statements))
        # The CHECK guarantees the DELETE removed exactly len(rows) rows. (Its
        # `meta.changes` is not used: it may also count the episode counter's trigger.)
        return key, len(rows)

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


def _counts_from(tenant: str, row: Row) -> TenantPruneCounts:
    return TenantPruneCounts(
        tenant_id=tenant,
        retention_days=int(row["retention_days"]),
        cutoff_ms=int(row["cutoff_ms"]),
        episodes_deleted=int(row["episodes_deleted"]),
        runs_deleted=int(row["runs_deleted"]),
        events_deleted=int(row["events_deleted"]),
        batches=int(row["batches"]),
        done=bool(row["done"]),
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
