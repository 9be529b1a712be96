"""The weekly prune (cron `0 3 * * SUN`; docs/lifecycle.md, "Weekly prune" and "Archive
layout" describe the job, its batches and why nothing is lost): episodes, finished runs and
memory events past their tenant's retention are archived to the cold tier (R2, gzip NDJSON, one
ISO week per object), then deleted, in bounded, resumable batches; archives past their kind's
cold retention are deleted. Nothing is deleted that is not archived (`_archive_and_delete`).
"""

from __future__ import annotations

import datetime
import gzip
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.governance.feed import ChangeFeed
from agent_memory.ids import IDS_PER_STATEMENT, delete_ids
from agent_memory.lifecycle.retention import TenantTable, get_lifecycle, known_tenants
from agent_memory.placement import DEFAULT_TABLE, PlacementTable, parse_placement
from bindings.environment import Bindings
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Error, D1Statement
from bindings.ports.object_store import OBJECT_STORE_MAX_DELETE_KEYS, ObjectStore
from bindings.ports.sql import Row, SqlValue

ArchiveKind = Literal["episodes", "runs", "events"]

ARCHIVE_ROOT = "archive"
LOG_ROOT = "logs"
EXPORT_ROOT = "exports"  # tenant exports (lifecycle.portability), beside the archives
ARCHIVE_SUFFIX = ".ndjson.gz"

# Columns stored as JSON text, per archived table.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "episodes": ("data",),
    "runs": ("input", "output"),
    "events": ("payload",),
}

DAY_MS = 86_400_000
_MS_PER_WEEK = 7 * DAY_MS


def iso_week(ms: int) -> str:
    """`2026-W07`: the ISO year and week of an epoch-millisecond time (UTC)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    year, week, _ = moment.isocalendar()
    return f"{year:04d}-W{week:02d}"


def week_bounds(ms: int) -> tuple[int, int]:
    """[start, end) of the ISO week (Monday 00:00 UTC to the next Monday) holding `ms`."""
    # The epoch (1970-01-01) was a Thursday: Monday 1969-12-29 starts its ISO week.
    first_monday = -3 * DAY_MS
    start = first_monday + ((ms - first_monday) // _MS_PER_WEEK) * _MS_PER_WEEK
    return start, start + _MS_PER_WEEK


def tenant_prefixes(tenant_id: str) -> tuple[str, ...]:
    """Every prefix under which the tenant's archives live (one `list` each)."""
    return (f"{ARCHIVE_ROOT}/{tenant_id}/", f"{LOG_ROOT}/{tenant_id}/")


def archive_key(tenant_id: str, kind: ArchiveKind, first_ms: int, first_id: str) -> str:
    """The object key of the archive whose first row is (`first_ms`, `first_id`)."""
    root = ARCHIVE_ROOT if kind == "episodes" else LOG_ROOT
    return (
        f"{root}/{tenant_id}/{kind}/{iso_week(first_ms)}/{first_ms:013d}-{first_id}{ARCHIVE_SUFFIX}"
    )


def parse_archive_key(key: str) -> tuple[str, ArchiveKind, str] | None:
    """(tenant, kind, iso week) of an archive key, or None for any other key."""
    parts = key.split("/")
    if (
        len(parts) != 5
        or parts[0] not in (ARCHIVE_ROOT, LOG_ROOT)
        or not parts[4].endswith(ARCHIVE_SUFFIX)
    ):
        return None
    kind = parts[2]
    if kind in ("runs", "events") or (kind == "episodes" and parts[0] == ARCHIVE_ROOT):
        return parts[1], kind, parts[3]  # type: ignore[return-value]
    return None


def row_from_archive(row: dict[str, Any], kind: ArchiveKind) -> dict[str, Any]:
    """The row as the table stores it (JSON columns encoded again), e.g. for a restore."""
    out = dict(row)
    for column in JSON_COLUMNS[kind]:
        if column in out and out[column] is not None:
            out[column] = json.dumps(out[column], separators=(",", ":"), ensure_ascii=False)
    return out


def encode_archive(rows: Iterable[dict[str, Any]], kind: ArchiveKind) -> bytes:
    """Rows as stored → gzip(NDJSON) with JSON columns decoded, the same bytes for the same
    rows."""
    columns = JSON_COLUMNS[kind]
    return encode_lines(
        [
            {k: json.loads(v) if k in columns and isinstance(v, str) else v for k, v in r.items()}
            for r in rows
        ]
    )


def decode_archive(data: bytes) -> list[dict[str, Any]]:
    """gzip(NDJSON) → rows as archived (JSON columns decoded)."""
    text = gzip.decompress(data).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def json_lines(rows: Iterable[dict[str, Any]]) -> bytes:
    """Rows as JSON Lines (UTF-8, keys sorted: the same bytes for the same rows)."""
    return "".join(
        json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        + "\n"
        for row in rows
    ).encode("utf-8")


def encode_lines(rows: Sequence[dict[str, Any]]) -> bytes:
    """Rows already in archive form as an archive (gzip JSON Lines)."""
    return gzip.compress(json_lines(rows), compresslevel=6, mtime=0)


# select, put, and a D1 batch of 3 statements (4 for episodes: + the cold item index)
OPERATIONS_PER_BATCH = 6
RANGE_RETRIES = 3

StopReason = Literal["operations", "time"]
Progress = Callable[["TenantPruneCounts"], None]

log = logging.getLogger(__name__)


class PruneBudget(BaseModel):
    """How much one invocation may do."""

    # Under the paid plan's 1000 D1 queries per invocation, and a cron's 15 minutes.
    max_operations: int = Field(default=900, ge=OPERATIONS_PER_BATCH + 2)
    max_seconds: float = Field(default=600.0, gt=0)
    batch_rows: int = Field(default=500, ge=1, le=5_000)


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
    # Archive objects this invocation deleted for being past their cold retention.
    archives_expired_now: int = 0
    done: bool = False
    # Dry runs only: what a prune would archive and delete now.
    episodes_due: int | None = None
    runs_due: int | None = None
    events_due: int | None = None
    error: str | None = None


_TOTALS = (
    *(f"{k}_deleted" for k in JSON_COLUMNS),
    "batches",
    *(f"{k}_now" for k in ("episodes", "runs", "events", "batches", "archives_expired")),
    *(f"{k}_due" for k in JSON_COLUMNS),
)


class PruneReport(BaseModel):
    prune_id: str
    dry_run: bool
    complete: bool
    stopped_by: StopReason | None = None
    operations: int = 0
    tenants: list[TenantPruneCounts] = Field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {"tenants": len(self.tenants)} | {
            name: sum(getattr(t, name) or 0 for t in self.tenants) for name in _TOTALS
        }

    def summary(self) -> dict[str, Any]:
        return self.model_dump(exclude={"tenants"}) | self.totals()


class BudgetExhausted(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason
        # The counts of the tenant being pruned when the budget ran out.
        self.counts: TenantPruneCounts | None = None


class RangeChanged(Exception):
    """Rows appeared inside a batch's key range between archive and delete."""


@dataclass
class Meter:
    """Counts one invocation's operations (a prune's D1 statements and R2 calls, a move's D1
    and Vectorize calls) against its budget; one meter is shared by the jobs it resumes."""

    max_operations: int
    max_seconds: float
    clock: Callable[[], float] = time.monotonic
    operations: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spend(self, n: int = 1) -> None:
        self.operations += n

    def stopped(self, need: int = 1) -> StopReason | None:
        """What of the budget `need` more operations would exceed, if anything."""
        if self.operations + need > self.max_operations:
            return "operations"
        return "time" if self.clock() - self.started >= self.max_seconds else None

    def check(self, need: int) -> None:
        """Raise `BudgetExhausted` unless `need` more operations fit in the budget."""
        if stop := self.stopped(need):
            raise BudgetExhausted(stop)


@dataclass(frozen=True)
class PrunedTable:
    """How one archived table is selected, keyed and deleted."""

    kind: ArchiveKind
    table: TenantTable
    time_column: str
    id_column: str
    placement: str  # the memory kind its archives hold (agent_memory.placement)
    # Extra conditions beyond `tenant_id = ? AND time < cutoff`, each `?` bound to the cutoff.
    extra_sql: str = ""

    def row_key(self, row: Row) -> str:
        """A row's sort key as the ledger and archive metadata name it: `{time}/{id}`."""
        return f"{row[self.time_column]}/{row[self.id_column]}"

    def where(self, tenant: str, cutoff: int) -> tuple[str, list[SqlValue]]:
        """The rows past `cutoff`: the condition and its parameters."""
        sql = f"tenant_id = ? AND {self.time_column} < ?{self.extra_sql}"
        return sql, [tenant, cutoff, *[cutoff] * self.extra_sql.count("?")]


_FINISHED_BEFORE_CUTOFF = " AND status != 'running' AND finished_at < ?"
TABLES = (
    PrunedTable("episodes", "memory_episodes", "created_at", "episode_id", "episode"),
    # Only finished runs go, and only once they finished before the cutoff too.
    PrunedTable("runs", "agent_runs", "started_at", "run_id", "log", _FINISHED_BEFORE_CUTOFF),
    # The audit trail ages with the memory it describes: events past retention go the same way.
    PrunedTable("events", "memory_events", "created_at", "event_id", "log"),
)
TABLE_OF = {table.kind: table for table in TABLES}
PRUNED_TABLES = tuple(table.table for table in TABLES)


_LEDGER_INSERT = (
    "INSERT INTO lifecycle_archives (tenant_id, archive_key, kind, iso_week, rows, matched, "
    "first_key, last_key, bytes, prune_id, created_at)"
)
_INDEX_INSERT = (
    "INSERT INTO cold_items (tenant_id, namespace_key, kind, entity_id, archive_key, subject, "
    "created_at, archived_at)"
)
_INDEX_UPSERT = (
    "ON CONFLICT (tenant_id, namespace_key, kind, entity_id) DO UPDATE SET "
    "archive_key = excluded.archive_key, archived_at = excluded.archived_at"
)


def _stmt(db: D1Database, sql: str, *values: SqlValue) -> D1Statement:
    return db.prepare(sql).bind(*values)


def weekly_prune_id(scheduled_ms: int) -> str:
    return f"weekly-{iso_week(scheduled_ms)}"


@dataclass
class Pruner:
    """Runs prune jobs over a D1 database and a cold-tier bucket."""

    db: D1Database
    cold: ObjectStore | None
    clock: Clock
    _: KW_ONLY
    default_retention_days: int
    budget: PruneBudget = field(default_factory=PruneBudget)
    monotonic: Callable[[], float] = time.monotonic
    placement: PlacementTable = DEFAULT_TABLE
    feed: ChangeFeed | None = None

    def _now_ms(self) -> int:
        return int(self.clock.now() * 1000)

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
        if self.cold is None:
            raise RuntimeError("the prune archives to the cold tier: bind the R2 bucket COLD")
        meter = meter or self.meter()
        now_ms = self._now_ms()
        status = await self._start(prune_id, scheduled_ms, now_ms, meter)
        names = list(tenants) if tenants is not None else await self._tenants(prune_id, meter)
        report = PruneReport(prune_id=prune_id, dry_run=False, complete=False)
        if status == "complete" and tenants is None:
            for tenant in names:  # the job's totals for each tenant it has met
                row = await self._progress_row(tenant, prune_id)
                meter.spend()
                if row is not None:
                    report.tenants.append(_counts_from(tenant, row))
            report.complete = True
            report.operations = meter.operations
            return report

        def met(counts: TenantPruneCounts) -> None:
            report.tenants.append(counts)
            c = counts.model_dump()
            log.info(
                "prune %s: tenant %s retention=%dd %s batches=%d%s%s",
                prune_id,
                counts.tenant_id,
                counts.retention_days,
                " ".join(f"{k}={c[k + '_deleted']} (+{c[k + '_now']})" for k in JSON_COLUMNS),
                counts.batches,
                " done" if counts.done else "",
                f" error={counts.error}" if counts.error else "",
            )
            if progress is not None:
                progress(counts)
            pruned = {f"{k}_deleted": c[k + "_now"] for k in JSON_COLUMNS if c[k + "_now"]}
            if self.feed is not None and pruned:
                self.feed.publish(counts.tenant_id, [("pruned", {"prune_id": prune_id, **pruned})])

        try:
            for tenant in names:
                met(await self._prune_tenant(prune_id, tenant, scheduled_ms, meter))
        except BudgetExhausted as stop:
            report.stopped_by = stop.reason
            if stop.counts is not None:
                met(stop.counts)
            log.warning(
                "prune %s: stopped by the %s budget after %d operations; the next run resumes",
                prune_id,
                stop.reason,
                meter.operations,
            )
        report.operations = meter.operations
        if report.stopped_by is None and all(t.done and t.error is None for t in report.tenants):
            # A job run for named tenants (an operator's prune) is complete when they are.
            sql = (
                "UPDATE lifecycle_prunes SET status = 'complete', finished_at = ? "
                "WHERE prune_id = ?"
            )
            await _stmt(self.db, sql, now_ms, prune_id).run()
            report.complete = True
        return report

    def meter(self) -> Meter:
        return Meter(self.budget.max_operations, self.budget.max_seconds, self.monotonic)

    async def dry_run(
        self,
        scheduled_ms: int,
        *,
        tenants: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> PruneReport:
        """What a prune at `scheduled_ms` would archive and delete; writes nothing."""
        names = (
            list(tenants) if tenants is not None else await known_tenants(self.db, PRUNED_TABLES)
        )
        report = PruneReport(prune_id="dry-run", dry_run=True, complete=True)
        for tenant in names:
            lifecycle = await get_lifecycle(self.db, tenant, self.default_retention_days)
            cutoff = lifecycle.cutoff_ms(scheduled_ms)
            due = {}
            for table in TABLES:
                where, params = table.where(tenant, cutoff)
                sql = f"SELECT COUNT(*) AS n FROM {table.table} WHERE {where}"
                due[f"{table.kind}_due"] = int(
                    await _stmt(self.db, sql, *params).first_value("n") or 0
                )
            counts = TenantPruneCounts(
                tenant_id=tenant,
                retention_days=lifecycle.episode_retention_days,
                cutoff_ms=cutoff,
                **due,
            )
            report.tenants.append(counts)
            report.operations += 4
            if progress is not None:
                progress(counts)
        return report

    async def _prune_tenant(
        self, prune_id: str, tenant: str, scheduled_ms: int, meter: Meter
    ) -> TenantPruneCounts:
        counts = await self._tenant_counts(prune_id, tenant, scheduled_ms, meter)
        if counts.done:
            return counts
        try:
            for table in TABLES:
                while True:
                    meter.check(OPERATIONS_PER_BATCH + 1)
                    archived = await self._archive_batch(
                        prune_id, tenant, table, counts.cutoff_ms, meter
                    )
                    if archived is None:
                        break
                    key, rows = archived
                    counts.batches += 1
                    counts.batches_now += 1
                    counts.archives_now.append(key)
                    for name in (f"{table.kind}_deleted", f"{table.kind}_now"):
                        setattr(counts, name, getattr(counts, name) + rows)
            # The cold tier's own retention (placement `cold_retention_days`: logs, 90 d).
            counts.archives_expired_now += await self._expire(tenant, scheduled_ms, meter)
        except BudgetExhausted as stop:
            stop.counts = counts
            raise
        except Exception as exc:
            # One tenant's failure must not stop the others; the job stays unfinished and
            # the next run retries this tenant from where it stopped.
            log.exception("prune %s: tenant %s failed", prune_id, tenant)
            counts.error = f"{type(exc).__name__}: {exc}"
            return counts
        sql = (
            "UPDATE lifecycle_prune_progress SET done = 1, updated_at = ? "
            "WHERE tenant_id = ? AND prune_id = ?"
        )
        await _stmt(self.db, sql, self._now_ms(), tenant, prune_id).run()
        meter.spend()
        counts.done = True
        return counts

    async def _expire(self, tenant: str, now_ms: int, meter: Meter) -> int:
        """Delete the tenant's archives past their kind's cold retention; how many went."""
        assert self.cold is not None
        removed = 0
        limit = min(self.budget.batch_rows, OBJECT_STORE_MAX_DELETE_KEYS)
        select = (
            "SELECT archive_key FROM lifecycle_archives WHERE tenant_id = ? "
            "AND kind = ? AND created_at < ? ORDER BY created_at LIMIT ?"
        )
        delete = "DELETE FROM lifecycle_archives WHERE tenant_id = ? AND archive_key IN ({marks})"
        for table in TABLES:
            days = self.placement.placement(table.placement).cold_retention_days
            while days is not None:
                meter.check(2 + -(-limit // IDS_PER_STATEMENT))  # select, R2 delete, ledger
                before = now_ms - days * DAY_MS
                result = await _stmt(self.db, select, tenant, table.kind, before, limit).all()
                meter.spend()
                keys = [str(r["archive_key"]) for r in result.results]
                if not keys:
                    break
                await self.cold.delete(keys)
                meter.spend()
                await delete_ids(self.db, delete, tenant, keys)
                meter.spend(-(-len(keys) // IDS_PER_STATEMENT))
                removed += len(keys)
        return removed

    async def unfinished_jobs(self) -> list[tuple[str, int]]:
        """(prune_id, scheduled_ms) of jobs that have not completed, oldest first."""
        result = await self.db.prepare(
            "SELECT prune_id, scheduled_at FROM lifecycle_prunes WHERE status = 'running' "
            "ORDER BY scheduled_at"
        ).all()
        return [(str(r["prune_id"]), int(r["scheduled_at"])) for r in result.results]

    async def _start(self, prune_id: str, scheduled_ms: int, now_ms: int, meter: Meter) -> str:
        """Record the job (once) and this invocation of it; returns the job's status."""
        meter.check(2)
        insert = (
            "INSERT INTO lifecycle_prunes (prune_id, scheduled_at, status, started_at) "
            "VALUES (?, ?, 'running', ?) ON CONFLICT (prune_id) DO NOTHING"
        )
        count = (
            "UPDATE lifecycle_prunes SET invocations = invocations + 1 "
            "WHERE prune_id = ? RETURNING status"
        )
        recorded = _stmt(self.db, insert, prune_id, scheduled_ms, now_ms)
        results = await self.db.batch([recorded, _stmt(self.db, count, prune_id)])
        meter.spend(2)
        return str(results[1].results[0]["status"])

    async def _tenants(self, prune_id: str, meter: Meter) -> list[str]:
        """The tenants with rows in a pruned table or archives, and those the job already met."""
        meter.check(5)
        # Tenants with archives only still have archives that may expire (`_expire`).
        tables = (*PRUNED_TABLES, "lifecycle_archives")
        names = set(await known_tenants(self.db, tables))
        meter.spend(len(tables))
        # Tenants whose rows are all gone still appear in the job's counts.
        sql = "SELECT tenant_id FROM lifecycle_prune_progress WHERE prune_id = ?"
        result = await _stmt(self.db, sql, prune_id).all()
        meter.spend()
        names.update(str(r["tenant_id"]) for r in result.results)
        return sorted(names)

    async def _tenant_counts(
        self, prune_id: str, tenant: str, scheduled_ms: int, meter: Meter
    ) -> TenantPruneCounts:
        """The tenant's progress in the job, first fixing its cutoff if the job is new to it."""
        meter.check(4)
        row = await self._progress_row(tenant, prune_id)
        meter.spend()
        if row is None:
            lifecycle = await get_lifecycle(self.db, tenant, self.default_retention_days)
            sql = (
                "INSERT INTO lifecycle_prune_progress (tenant_id, prune_id, cutoff_ms, "
                "retention_days, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, prune_id) DO NOTHING"
            )
            cutoff, days = lifecycle.cutoff_ms(scheduled_ms), lifecycle.episode_retention_days
            await _stmt(self.db, sql, tenant, prune_id, cutoff, days, self._now_ms()).run()
            meter.spend(2)
            row = await self._progress_row(tenant, prune_id)
            meter.spend()
            assert row is not None  # the INSERT above, or a concurrent one, wrote it
        return _counts_from(tenant, row)

    async def _progress_row(self, tenant: str, prune_id: str) -> Row | None:
        sql = (
            "SELECT cutoff_ms, retention_days, episodes_deleted, runs_deleted, "
            "events_deleted, batches, done FROM lifecycle_prune_progress "
            "WHERE tenant_id = ? AND prune_id = ?"
        )
        return await _stmt(self.db, sql, tenant, prune_id).first()

    async def _archive_batch(
        self, prune_id: str, tenant: str, table: PrunedTable, cutoff_ms: int, meter: Meter
    ) -> tuple[str, int] | None:
        """Archive then delete the next batch; (archive key, rows) or None when none is left."""
        t, i = table.time_column, table.id_column
        where, params = table.where(tenant, cutoff_ms)
        select = f"SELECT * FROM {table.table} WHERE {where} ORDER BY {t}, {i} LIMIT ?"
        for _attempt in range(RANGE_RETRIES):
            rows = (await _stmt(self.db, select, *params, self.budget.batch_rows).all()).results
            meter.spend()
            if not rows:
                return None
            # An archive object holds one ISO week: cut the batch at the first row's week end.
            _, week_end = week_bounds(int(rows[0][t]))
            rows = [row for row in rows if int(row[t]) < week_end]
            try:
                return await self._archive_and_delete(
                    prune_id, tenant, table, rows, cutoff_ms, meter
                )
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

    async def _archive_and_delete(
        self,
        prune_id: str,
        tenant: str,
        table: PrunedTable,
        rows: list[Row],
        cutoff_ms: int,
        meter: Meter,
    ) -> tuple[str, int]:
        assert self.cold is not None
        t, i = table.time_column, table.id_column
        first, last = rows[0], rows[-1]
        first_ms, last_ms = int(first[t]), int(last[t])
        key = archive_key(tenant, table.kind, first_ms, str(first[i]))
        body = encode_archive(rows, table.kind)
        first_key, last_key = table.row_key(first), table.row_key(last)
        meta = {"tenant": tenant, "kind": table.kind, "rows": str(len(rows)), "prune_id": prune_id}
        # 1. Archive first: nothing is deleted that is not in the cold tier.
        await self.cold.put(
            key, body, custom_metadata=meta | {"first": first_key, "last": last_key}
        )
        meter.spend()
        # 2. Then, in one transaction: the ledger row (its CHECK fails unless the range
        #    holds exactly the archived rows), the delete of that range, the counts.
        where, params = table.where(tenant, cutoff_ms)
        where += f" AND ({t}, {i}) >= (?, ?) AND ({t}, {i}) <= (?, ?)"
        params += [first_ms, str(first[i]), last_ms, str(last[i])]
        now_ms = self._now_ms()
        ledger = (
            f"{_LEDGER_INSERT} VALUES (?, ?, ?, ?, ?, "
            f"(SELECT COUNT(*) FROM {table.table} WHERE {where}), ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, archive_key) DO UPDATE SET "
            "rows = excluded.rows, matched = excluded.matched, "
            "last_key = excluded.last_key, bytes = excluded.bytes, "
            "prune_id = excluded.prune_id, created_at = excluded.created_at"
        )
        progress = (
            f"UPDATE lifecycle_prune_progress SET {table.kind}_deleted = "
            f"{table.kind}_deleted + ?, batches = batches + 1, updated_at = ? "
            "WHERE tenant_id = ? AND prune_id = ?"
        )
        # The ledger row's values: its `matched` subquery binds the range's parameters.
        archived = [tenant, key, table.kind, iso_week(first_ms), len(rows), *params]
        archived += [first_key, last_key, len(body), prune_id, now_ms]
        statements = [
            _stmt(self.db, ledger, *archived),
            *self._index_statements(table, key, where, params, now_ms),
            _stmt(self.db, f"DELETE FROM {table.table} WHERE {where}", *params),
            _stmt(self.db, progress, len(rows), now_ms, tenant, prune_id),
        ]
        try:
            await self.db.batch(statements)
        except D1Error as exc:
            if "CHECK constraint failed" in str(exc):
                raise RangeChanged(str(exc)) from exc
            raise
        finally:
            meter.spend(len(statements))
        # The CHECK guarantees the DELETE removed exactly len(rows) rows. (Its
        # `meta.changes` is not used: it may also count the episode counter's trigger.)
        return key, len(rows)

    def _index_statements(
        self, table: PrunedTable, key: str, where: str, params: list[SqlValue], now_ms: int
    ) -> list[D1Statement]:
        """For episodes: index every archived row by its item key (`cold_items`), in the
        transaction that deletes them, so the cold tier can serve each one by key. For runs:
        register their agent instances (`agent_instances`, as `retention.register_instances`
        does), so the subject eraser still reaches an instance whose runs rows are all pruned
        before its Durable Object ever reported from its alarm."""
        if table.kind == "runs":
            sql = (
                "INSERT INTO agent_instances (tenant_id, agent_type, instance_id, "
                "reported_at) SELECT DISTINCT tenant_id, agent_type, instance_id, ? "
                f"FROM agent_runs WHERE {where} "
                "ON CONFLICT (tenant_id, agent_type, instance_id) DO NOTHING"
            )
            return [_stmt(self.db, sql, now_ms, *params)]
        if table.kind != "episodes":
            return []
        sql = (
            f"{_INDEX_INSERT} SELECT tenant_id, namespace_key, 'episode', episode_id, ?, "
            f"subject, created_at, ? FROM memory_episodes WHERE {where} {_INDEX_UPSERT}"
        )
        return [_stmt(self.db, sql, key, now_ms, *params)]


def pruner_for(bindings: Bindings, share: tuple[int, float] | None = None) -> Pruner | None:
    """The pruner over `bindings`' database and cold bucket (None without either), within
    `share` (operations, seconds), else the settings' lifecycle budget."""
    if bindings.db is None or bindings.cold is None:
        return None
    settings = bindings.settings
    operations, seconds = share or (
        settings.lifecycle_max_operations,
        settings.lifecycle_max_seconds,
    )
    return Pruner(
        bindings.db,
        bindings.cold,
        bindings.clock,
        default_retention_days=settings.episode_retention_days,
        budget=PruneBudget(
            max_operations=max(OPERATIONS_PER_BATCH + 2, operations),
            max_seconds=seconds,
            batch_rows=settings.prune_batch_rows,
        ),
        placement=parse_placement(settings.memory_placement),
        feed=ChangeFeed.of(bindings),
    )


def _counts_from(tenant: str, row: Row) -> TenantPruneCounts:
    return TenantPruneCounts(tenant_id=tenant, **{k: int(v) for k, v in row.items()})


async def resume_unfinished(pruner: Pruner) -> list[PruneReport]:
    """Continue every unfinished job (oldest first) while the budget lasts."""
    reports = []
    meter = pruner.meter()
    for prune_id, scheduled_ms in await pruner.unfinished_jobs():
        report = await pruner.run(prune_id, scheduled_ms, meter=meter)
        reports.append(report)
        if not report.complete:
            break
    return reports


# The daily brief's figures on this store's tables (`lifecycle.brief`).
BRIEF_FIGURES = (
    "(SELECT COUNT(*) FROM lifecycle_archives WHERE tenant_id = ?1) AS archives, "
    "(SELECT COALESCE(SUM(rows), 0) FROM lifecycle_archives WHERE tenant_id = ?1) AS archived_rows"
)


class ArchiveLedger:
    """One tenant's archive ledger (`lifecycle_archives`) and cold item index (`cold_items`)
    as a subject erase rewrites archives: the statements on them live here, with the prune
    that writes them (and the cold tier that reads them: `agent_memory.hot_warm_cold`)."""

    def __init__(self, db: D1Database, tenant_id: str) -> None:
        self._db = db
        self.tenant_id = tenant_id

    async def forget(self, archive: str) -> None:
        sql = "DELETE FROM lifecycle_archives WHERE tenant_id = ? AND archive_key = ?"
        await _stmt(self._db, sql, self.tenant_id, archive).run()

    async def unindex_episodes(self, episode_ids: Sequence[str]) -> None:
        await delete_ids(
            self._db,
            "DELETE FROM cold_items WHERE tenant_id = ? AND kind = 'episode' "
            "AND entity_id IN ({marks})",
            self.tenant_id,
            episode_ids,
        )

    async def rewritten(
        self,
        old: str,
        new: str,
        *,
        rows: int,
        size: int,
        now_ms: int,
        first_key: str | None = None,
        last_key: str | None = None,
    ) -> None:
        """Archive `old` was rewritten as `new` with `rows` rows: the ledger and the item
        index follow (first and last keys kept unless given)."""
        sql = (
            "UPDATE lifecycle_archives SET archive_key = ?, rows = ?, matched = ?, "
            "first_key = COALESCE(?, first_key), last_key = COALESCE(?, last_key), "
            "bytes = ?, rewritten_at = ? WHERE tenant_id = ? AND archive_key = ?"
        )
        values = (new, rows, rows, first_key, last_key, size, now_ms, self.tenant_id, old)
        await _stmt(self._db, sql, *values).run()
        if new != old:
            sql = "UPDATE cold_items SET archive_key = ? WHERE tenant_id = ? AND archive_key = ?"
            await _stmt(self._db, sql, new, self.tenant_id, old).run()

    async def archive_of(self, namespace_key: str, kind: str, entity: str) -> str | None:
        """The archive object holding one item, from the cold item index (None: not
        archived)."""
        sql = (
            "SELECT archive_key FROM cold_items WHERE tenant_id = ? AND namespace_key = ? "
            "AND kind = ? AND entity_id = ?"
        )
        found = _stmt(self._db, sql, self.tenant_id, namespace_key, kind, entity)
        value = await found.first_value("archive_key")
        return None if value is None else str(value)

    async def record_item(
        self,
        archive: str,
        *,
        namespace_key: str,
        kind: str,
        row: dict[str, Any],
        entity: str,
        size: int,
        prune_id: str,
        now_ms: int,
    ) -> None:
        """A one-row archive written outside a prune: its ledger row and its index entry,
        in one transaction."""
        created = int(row["created_at"])
        first = f"{created}/{entity}"
        ledger = (
            f"{_LEDGER_INSERT} VALUES (?, ?, 'episodes', ?, 1, 1, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, archive_key) DO UPDATE SET bytes = excluded.bytes"
        )
        index = f"{_INDEX_INSERT} VALUES (?, ?, ?, ?, ?, ?, ?, ?) {_INDEX_UPSERT}"
        t, subject = self.tenant_id, row.get("subject")
        ledger_values = (t, archive, iso_week(created), first, first, size, prune_id, now_ms)
        index_values = (t, namespace_key, kind, entity, archive, subject, created, now_ms)
        await self._db.batch(
            [_stmt(self._db, ledger, *ledger_values), _stmt(self._db, index, *index_values)]
        )

    async def unindex_item(self, namespace_key: str, kind: str, entity: str) -> None:
        sql = (
            "DELETE FROM cold_items WHERE tenant_id = ? AND namespace_key = ? AND kind = ? "
            "AND entity_id = ?"
        )
        await _stmt(self._db, sql, self.tenant_id, namespace_key, kind, entity).run()

    async def indexed(
        self,
        kind: str,
        *,
        namespace_key: str | None,
        subject: str | None,
        before: tuple[int, str] | None,
        limit: int,
    ) -> list[Row]:
        """Index entries of one kind (of a namespace and/or a subject when given), newest
        first, strictly before `before` (created_at, entity_id) when given."""
        clauses = ["tenant_id = ?", "kind = ?"]
        params: list[SqlValue] = [self.tenant_id, kind]
        for clause, value in (("namespace_key = ?", namespace_key), ("subject = ?", subject)):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        if before is not None:
            clauses.append("(created_at < ? OR (created_at = ? AND entity_id < ?))")
            params += [before[0], before[0], before[1]]
        sql = (
            "SELECT namespace_key, entity_id, created_at, archived_at FROM cold_items "
            f"WHERE {' AND '.join(clauses)} ORDER BY created_at DESC, entity_id DESC LIMIT ?"
        )
        return list((await _stmt(self._db, sql, *params, limit).all()).results)
