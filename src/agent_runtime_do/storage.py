"""The AgentRuntime object's own SQLite: schema, statements, the alarm that keeps it bounded
(`run_alarm`) and subject erase (`erase_subject_traces`).

DO SQL rejects BEGIN/COMMIT: what must be atomic runs in `transaction_sync`, anything else is
one statement computing its new values in SQL, never a read-modify-write across an `await`.
workerd's SQLite refuses `secure_delete` and VACUUM (docs/lifecycle.md), so every delete of a
row that may hold content first overwrites its text columns with `0`s (`_wipe_and_delete`);
that still leaves copies SQLite made while it moved cells between pages, so a subject erase
replaces the whole database (`snapshot`, `restore`: `AgentRuntimeCore.rebuild`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from agent_memory.ids import chunks
from agent_memory.lifecycle.erase import subject_digest
from agent_memory.lifecycle.retention import InstanceReport, report_instance
from agent_memory.tiers.episodic import EpisodicWriter, FailedWrite, PendingWrite, WriteOp
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.do_sql import DurableObjectStorage, SqlStorage
from bindings.ports.sql import Row, SqlValue
from bindings.settings import Settings

log = logging.getLogger(__name__)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS turn_state (
        instance_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        agent_type TEXT NOT NULL,
        turn_count INTEGER NOT NULL DEFAULT 0 CHECK (turn_count >= 0),
        completed_count INTEGER NOT NULL DEFAULT 0 CHECK (completed_count >= 0),
        failed_count INTEGER NOT NULL DEFAULT 0 CHECK (failed_count >= 0),
        interrupted_count INTEGER NOT NULL DEFAULT 0 CHECK (interrupted_count >= 0),
        last_run_id TEXT,
        last_status TEXT,
        state_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS run_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('llm_call', 'tool_call', 'memory_read',
            'memory_write', 'error', 'turn_start', 'turn_end')),
        detail_json TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS run_log_by_run ON run_log (run_id, step)",
    """CREATE TABLE IF NOT EXISTS run_workflows (
        run_id TEXT PRIMARY KEY,
        workflow_id TEXT NOT NULL,
        task_type TEXT NOT NULL,
        outcome_score REAL CHECK (outcome_score IS NULL OR outcome_score BETWEEN 0 AND 1),
        created_at REAL NOT NULL,
        scored_at REAL
    )""",
    """CREATE TABLE IF NOT EXISTS procedural_workflows (
        workflow_id TEXT PRIMARY KEY,
        agent_type TEXT NOT NULL,
        task_type TEXT NOT NULL,
        spec TEXT NOT NULL,
        alpha REAL NOT NULL DEFAULT 1.0 CHECK (alpha > 0),
        beta REAL NOT NULL DEFAULT 1.0 CHECK (beta > 0),
        pulls INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS procedural_by_task
        ON procedural_workflows (agent_type, task_type, status)""",
    """CREATE TABLE IF NOT EXISTS failed_writes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        op TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        error TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        created_at REAL NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        next_retry_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS failed_writes_by_run ON failed_writes (run_id, seq)",
    """CREATE TABLE IF NOT EXISTS pending_writes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        op TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS instance_lifecycle (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        tenant_id TEXT NOT NULL,
        agent_type TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        last_activity_at REAL NOT NULL,
        cleared_at REAL
    )""",
)

TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", " ".join(SCHEMA)))

# The text columns of each table that may hold memory content (overwritten before a delete).
_TEXT_COLUMNS = {
    "turn_state": ("state_json",),
    "run_log": ("detail_json",),
    "failed_writes": ("payload_json", "error"),
    "pending_writes": ("payload_json",),
}


def create_schema(sql: SqlStorage) -> None:
    """Create every table and index; safe to run on every object start."""
    for statement in SCHEMA:
        sql.exec(statement)


def _json(value: Any) -> str:
    # UTF-8, not `\uXXXX` escapes: the erase finds a subject in the text as written.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _zeros(column: str) -> str:
    """SQL assigning `column` as many ASCII `0`s as it holds bytes."""
    size = f"length(CAST({column} AS BLOB))"
    return f"{column} = substr(hex(zeroblob({size})), 1, {size})"


def _wipe_and_delete(sql: SqlStorage, table: str, where: str, *params: SqlValue) -> int:
    """Zero the text columns of the rows matching `where`, then delete them; the rows deleted.
    (A crash between the two leaves zeroed rows, never half-deleted content.)"""
    wipe = ", ".join(_zeros(column) for column in _TEXT_COLUMNS[table])
    sql.exec(f"UPDATE {table} SET {wipe} WHERE {where}", *params)
    cursor = sql.exec(f"DELETE FROM {table} WHERE {where}", *params)
    list(cursor)
    return cursor.rows_written


def _first(sql: SqlStorage, query: str, *params: SqlValue) -> dict[str, Any] | None:
    rows = sql.exec(query, *params).to_array()
    return dict(rows[0]) if rows else None


def count_rows(sql: SqlStorage, table: str) -> int:
    return int(sql.exec(f"SELECT COUNT(*) AS n FROM {table}").one()["n"])


def _wipe_and_delete_ids(sql: SqlStorage, table: str, key: str, ids: Iterable[SqlValue]) -> int:
    # `chunks`' default slice (90 values) stays under DO SQL's 100 bound parameters.
    return sum(
        _wipe_and_delete(sql, table, f"{key} IN ({', '.join('?' for _ in chunk)})", *chunk)
        for chunk in chunks(list(ids))
    )


_TURN_STATE_COLUMNS = (
    "instance_id, tenant_id, agent_type, turn_count, completed_count, failed_count, "
    "interrupted_count, last_run_id, last_status, created_at, updated_at"
)


def begin_turn(
    sql: SqlStorage, tenant: str, agent_type: str, instance_id: str, run_id: str, now: float
) -> dict[str, Any]:
    """Create the row on the first run, else count one more turn; returns the new row."""
    return dict(
        sql.exec(
            "INSERT INTO turn_state (instance_id, tenant_id, agent_type, turn_count, "
            "last_run_id, last_status, created_at, updated_at) "
            "VALUES (?, ?, ?, 1, ?, 'running', ?, ?) "
            "ON CONFLICT (instance_id) DO UPDATE SET turn_count = turn_count + 1, "
            "last_run_id = excluded.last_run_id, last_status = 'running', "
            f"updated_at = excluded.updated_at RETURNING {_TURN_STATE_COLUMNS}",
            instance_id,
            tenant,
            agent_type,
            run_id,
            now,
            now,
        ).one()
    )


def finish_turn(
    sql: SqlStorage, clock: Clock, run_id: str, status: str, detail: dict[str, Any]
) -> None:
    """Count the turn as `status` (completed, failed, interrupted) and log its `turn_end`, in
    one transaction: a turn has ended exactly when its `turn_end` row exists (`open_turns`)."""
    counter = f"{status}_count"
    sql.exec(
        f"UPDATE turn_state SET {counter} = {counter} + 1, last_run_id = ?, last_status = ?, "
        "updated_at = ?",  # one instance per object: its one row
        run_id,
        status,
        clock.now(),
    )
    append_run_log(sql, clock, run_id, "turn_end", {"status": status, **detail})


def open_turns(sql: SqlStorage, running: set[str]) -> list[Row]:
    """The turns that began (`turn_start`) and never ended, but those `running` in this life
    of the object, oldest first, with their model calls (`steps`); none without reading the
    log when the counters say every turn is running or ended."""
    counts = _first(
        sql,
        "SELECT turn_count - completed_count - failed_count - interrupted_count AS n "
        "FROM turn_state",
    )
    if counts is None or int(counts["n"]) <= len(running):
        return []
    rows = sql.exec(
        "SELECT s.run_id, s.detail_json, s.created_at, (SELECT COUNT(*) FROM run_log c "
        "WHERE c.run_id = s.run_id AND c.kind = 'llm_call') AS steps FROM run_log s "
        "WHERE s.kind = 'turn_start' AND NOT EXISTS (SELECT 1 FROM run_log e "
        "WHERE e.run_id = s.run_id AND e.kind = 'turn_end') ORDER BY s.seq"
    ).to_array()
    return [row for row in rows if row["run_id"] not in running]


def read_turn_state(sql: SqlStorage, instance_id: str) -> dict[str, Any] | None:
    query = f"SELECT {_TURN_STATE_COLUMNS} FROM turn_state WHERE instance_id = ?"
    return _first(sql, query, instance_id)


def append_run_log(
    sql: SqlStorage, clock: Clock, run_id: str, kind: str, detail: dict[str, Any]
) -> None:
    """Append one row; its `step` (the run's previous maximum + 1) is computed in the same
    statement, so interleaved runs cannot renumber each other's rows and a row appended
    later (a reported outcome) continues the run's numbering."""
    sql.exec(
        "INSERT INTO run_log (run_id, step, kind, detail_json, created_at) "
        "SELECT ?, COALESCE(MAX(step), -1) + 1, ?, ?, ? FROM run_log WHERE run_id = ?",
        run_id,
        kind,
        _json(detail),
        clock.now(),
        run_id,
    )


def read_run(sql: SqlStorage, run_id: str) -> dict[str, Any]:
    """A run as the admin sees it: its log rows, its workflow and its failed writes."""
    workflow = _first(
        sql,
        "SELECT workflow_id, task_type, outcome_score, scored_at FROM run_workflows "
        "WHERE run_id = ?",
        run_id,
    )
    log_rows = sql.exec(
        "SELECT seq, step, kind, detail_json, created_at FROM run_log "
        "WHERE run_id = ? ORDER BY step",
        run_id,
    ).to_array()
    failed = sql.exec(
        "SELECT op, payload_json, error, attempts, created_at FROM failed_writes "
        "WHERE run_id = ? ORDER BY seq",
        run_id,
    ).to_array()
    return {
        "run_log": [
            {
                "seq": int(row["seq"]),
                "step": int(row["step"]),
                "kind": row["kind"],
                "detail": json.loads(row["detail_json"]),
                "created_at": float(row["created_at"]),
            }
            for row in log_rows
        ],
        "workflow": workflow,
        "failed_writes": [
            {
                "op": row["op"],
                "payload": json.loads(row["payload_json"]),
                "error": row["error"],
                "attempts": int(row["attempts"]),
                "created_at": float(row["created_at"]),
            }
            for row in failed
        ],
    }


def run_log_size(sql: SqlStorage) -> tuple[int, int]:
    """(rows, bytes of `detail_json`) of the whole run log."""
    row = sql.exec(
        "SELECT COUNT(*) AS n, COALESCE(SUM(length(CAST(detail_json AS BLOB))), 0) AS size "
        "FROM run_log"
    ).one()
    return int(row["n"]), int(row["size"])


def record_run_workflow(
    sql: SqlStorage, run_id: str, workflow_id: str, task_type: str, now: float
) -> None:
    sql.exec(
        "INSERT INTO run_workflows (run_id, workflow_id, task_type, created_at) "
        "VALUES (?, ?, ?, ?)",
        run_id,
        workflow_id,
        task_type,
        now,
    )


def run_workflow_id(sql: SqlStorage, run_id: str) -> str | None:
    row = _first(sql, "SELECT workflow_id FROM run_workflows WHERE run_id = ?", run_id)
    return None if row is None else str(row["workflow_id"])


def score_run(sql: SqlStorage, run_id: str, score: float, now: float) -> bool:
    """Record the run's outcome; False when it already has one (one outcome per run)."""
    cursor = sql.exec(
        "UPDATE run_workflows SET outcome_score = ?, scored_at = ? "
        "WHERE run_id = ? AND outcome_score IS NULL",
        score,
        now,
        run_id,
    )
    list(cursor)
    return cursor.rows_written > 0


class DurableOutbox:
    """`agent_memory.tiers.episodic.Outbox` over `pending_writes`: a turn answers before its
    episodic writes reach D1, so each is recorded here first (durable before the response
    leaves), removed when it lands or fails, and replayed (idempotently) on restart."""

    def __init__(self, sql: SqlStorage, tenant: str, clock: Clock) -> None:
        self._sql = sql
        self._tenant = tenant
        self._clock = clock

    def add(self, op: WriteOp, run_id: str, payload: dict[str, Any]) -> int:
        row = self._sql.exec(
            "INSERT INTO pending_writes (tenant_id, run_id, op, payload_json, created_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING seq",
            self._tenant,
            run_id,
            op,
            _json(payload),
            self._clock.now(),
        ).one()
        return int(row["seq"])

    def done(self, seq: int) -> None:
        _wipe_and_delete(self._sql, "pending_writes", "seq = ?", seq)


def pending_by_tenant(sql: SqlStorage) -> dict[str, list[PendingWrite]]:
    """What the outbox still holds, per tenant, oldest first."""
    found: dict[str, list[PendingWrite]] = {}
    for row in sql.exec(
        "SELECT seq, tenant_id, run_id, op, payload_json FROM pending_writes ORDER BY seq"
    ).to_array():
        found.setdefault(str(row["tenant_id"]), []).append(
            PendingWrite(
                seq=int(row["seq"]),
                op=row["op"],
                run_id=str(row["run_id"]),
                payload=json.loads(row["payload_json"]),
            )
        )
    return found


def record_failed_write(sql: SqlStorage, failed: FailedWrite, now: float, retry_at: float) -> None:
    sql.exec(
        "INSERT INTO failed_writes (run_id, op, payload_json, error, attempts, created_at, "
        "next_retry_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        failed.run_id,
        failed.op,
        _json(failed.payload),
        failed.error,
        failed.attempts,
        now,
        retry_at,
    )


def touch(sql: SqlStorage, tenant: str, agent_type: str, instance_id: str, now: float) -> None:
    """Record activity (one statement; safe under interleaving)."""
    sql.exec(
        "INSERT INTO instance_lifecycle (id, tenant_id, agent_type, instance_id, "
        "last_activity_at) VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
        "last_activity_at = MAX(last_activity_at, excluded.last_activity_at)",
        tenant,
        agent_type,
        instance_id,
        now,
    )


def identity(sql: SqlStorage) -> dict[str, Any] | None:
    """Who this object is and when it was last active and cleared; None before a turn."""
    return _first(
        sql,
        "SELECT tenant_id, agent_type, instance_id, last_activity_at, cleared_at "
        "FROM instance_lifecycle WHERE id = 1",
    )


FAILED_WRITE_RETRIES = 5
FAILED_RETRY_BASE_SECONDS = 60.0
RECHECK_SECONDS = 60.0
RUN_WORKFLOWS_KEPT = 10_000


@dataclass
class AlarmOutcome:
    """What one alarm run did (logged; returned to tests)."""

    replayed: int = 0
    retried: int = 0
    recovered: int = 0
    trimmed_rows: int = 0
    cleared_rows: int = 0
    cleared: bool = False
    reported: bool = False
    next_alarm: float | None = None
    errors: list[str] = field(default_factory=list)


async def run_alarm(
    storage: DurableObjectStorage,
    db: D1Database | None,
    settings: Settings,
    flush_writes: Callable[[], Awaitable[bool]],
    writer_for: Callable[[str], Awaitable[EpisodicWriter]],
    now: float,
) -> AlarmOutcome:
    """The storage lifecycle (ADR-043; docs/lifecycle.md, "Agent instance state"): replay
    the outbox, retry due failed writes, keep the run log under its caps, clear runs safely
    in D1 (`agent_runs` row exists, no write pending or failed) after the idle time, report
    to D1, and say when to look again (`next_alarm`; None: delete it). A failing step is
    logged and re-armed, not raised (Cloudflare would retry within seconds). `flush_writes`
    and `writer_for` are the object's (`AgentRuntimeCore`): its writes in flight, its writer."""
    outcome = AlarmOutcome()
    sql = storage.sql
    me = identity(sql)
    if me is None:  # never ran a turn: nothing to keep in step
        return outcome
    tenant = str(me["tenant_id"])
    # What the outbox held when the alarm began (a restarted object is replaying it).
    pending = pending_by_tenant(sql)
    outcome.replayed = sum(len(writes) for writes in pending.values())
    settled = await flush_writes()
    writer = None if db is None else await writer_for(tenant)
    left = pending_by_tenant(sql)
    if left and settled and writer is not None:
        for writes in left.values():
            writer.replay(writes)
        settled = await flush_writes()
    idle = float(settings.agent_state_idle_seconds)
    if db is not None and writer is not None:
        await _retry_failed(sql, writer, now, outcome)
        await _step(outcome, "trim", lambda: _trim(storage, settings, db, tenant, outcome))
        if now - float(me["last_activity_at"]) >= idle and not pending and settled:
            await _step(outcome, "clear", lambda: _clear(storage, db, tenant, now, outcome))
        outcome.reported = await _step(
            outcome, "report", lambda: report_instance(db, _report(sql, me, now))
        )
    candidates = []
    retry = sql.exec(
        "SELECT MIN(next_retry_at) AS at FROM failed_writes WHERE next_retry_at IS NOT NULL"
    ).one()["at"]
    if retry is not None:
        candidates.append(max(float(retry), now + 1.0))
    if pending or not settled:
        candidates.append(now + RECHECK_SECONDS)
    elif count_rows(sql, "run_log") or count_rows(sql, "turn_state"):
        end_of_idle = float(me["last_activity_at"]) + idle
        # Past it already: something not yet in D1 held the clear; look again later.
        candidates.append(end_of_idle if end_of_idle > now else now + idle)
    outcome.next_alarm = min(candidates, default=None)
    # An instance id may name a person: logged as a digest.
    instance = f"{tenant}/{me['agent_type']}/{subject_digest(str(me['instance_id']))}"
    summary = {k: v for k, v in asdict(outcome).items() if k != "errors"}
    log.info("agent instance %s alarm: %s", instance, summary)
    return outcome


async def _step(outcome: AlarmOutcome, name: str, work: Callable[[], Awaitable[Any]]) -> bool:
    try:
        await work()
    except Exception as exc:  # logged by type only: messages may quote values
        outcome.errors.append(f"{name}: {type(exc).__name__}")
        log.warning("agent instance alarm: %s failed: %s", name, type(exc).__name__)
        return False
    return True


async def _retry_failed(
    sql: SqlStorage, writer: EpisodicWriter, now: float, outcome: AlarmOutcome
) -> None:
    due = sql.exec(
        "SELECT seq, op, run_id, payload_json, retries FROM failed_writes "
        "WHERE next_retry_at IS NOT NULL AND next_retry_at <= ? ORDER BY seq",
        now,
    ).to_array()
    for row in due:
        outcome.retried += 1
        try:
            payload = json.loads(str(row["payload_json"]))
            if not isinstance(payload, dict):
                raise ValueError("a failed write's payload is not a JSON object")
            await writer.write_now(row["op"], payload)
        except Exception as exc:
            retries = int(row["retries"]) + 1
            next_at = (
                now + FAILED_RETRY_BASE_SECONDS * 2**retries
                if retries < FAILED_WRITE_RETRIES
                else None
            )
            sql.exec(
                "UPDATE failed_writes SET retries = ?, next_retry_at = ? WHERE seq = ?",
                retries,
                next_at,
                row["seq"],
            )
            log.warning(
                "failed episodic %s for run %s: alarm retry %d/%d failed (%s)%s",
                *(row["op"], row["run_id"], retries, FAILED_WRITE_RETRIES, type(exc).__name__),
                "" if next_at is not None else "; kept for the daily brief",
            )
            continue
        _wipe_and_delete(sql, "failed_writes", "seq = ?", row["seq"])
        outcome.recovered += 1


async def _safe_runs(sql: SqlStorage, db: D1Database, tenant: str) -> tuple[list[str], set[str]]:
    """The runs in the log, oldest first, and those of them safely in D1 (`run_alarm`)."""
    runs = [
        str(row["run_id"])
        for row in sql.exec(
            "SELECT run_id, MIN(seq) AS first FROM run_log GROUP BY run_id ORDER BY first"
        ).to_array()
    ]
    held = {
        str(row["run_id"])
        for table in ("pending_writes", "failed_writes")
        for row in sql.exec(f"SELECT DISTINCT run_id FROM {table}").to_array()
    }
    safe: set[str] = set()
    for chunk in chunks([run for run in runs if run not in held]):
        marks = ", ".join("?" for _ in chunk)
        result = await (
            db.prepare(f"SELECT run_id FROM agent_runs WHERE tenant_id = ? AND run_id IN ({marks})")
            .bind(tenant, *chunk)
            .all()
        )
        safe.update(str(row["run_id"]) for row in result.results)
    return runs, safe


def _delete_runs(storage: DurableObjectStorage, runs: list[str]) -> int:
    return storage.transaction_sync(
        lambda: _wipe_and_delete_ids(storage.sql, "run_log", "run_id", runs)
    )


async def _trim(
    storage: DurableObjectStorage,
    settings: Settings,
    db: D1Database,
    tenant: str,
    outcome: AlarmOutcome,
) -> None:
    sql = storage.sql
    sql.exec(
        "DELETE FROM run_workflows WHERE run_id IN (SELECT run_id FROM run_workflows "
        "ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
        RUN_WORKFLOWS_KEPT,
    )
    max_rows, max_bytes = settings.agent_run_log_max_rows, settings.agent_run_log_max_bytes
    rows, size = run_log_size(sql)
    if rows <= max_rows and size <= max_bytes:
        return
    runs, safe = await _safe_runs(sql, db, tenant)
    for run in runs:
        if rows <= max_rows and size <= max_bytes:
            break
        if run == runs[-1] or run not in safe:
            continue  # the newest run stays, and nothing not yet in D1 goes
        outcome.trimmed_rows += _delete_runs(storage, [run])
        rows, size = run_log_size(sql)


async def _clear(
    storage: DurableObjectStorage, db: D1Database, tenant: str, now: float, outcome: AlarmOutcome
) -> None:
    sql = storage.sql
    outcome.cleared_rows = _delete_runs(storage, sorted((await _safe_runs(sql, db, tenant))[1]))
    if run_log_size(sql)[0] > 0:
        return  # some run is not in D1 yet: its log and the counters stay
    storage.transaction_sync(lambda: _wipe_and_delete(sql, "turn_state", "1 = 1"))
    sql.exec("UPDATE instance_lifecycle SET cleared_at = ? WHERE id = 1", now)
    outcome.cleared = True


def _ms(seconds: Any) -> int | None:
    return None if seconds is None else int(float(seconds) * 1000)


def _report(sql: SqlStorage, me: dict[str, Any], now: float) -> InstanceReport:
    rows, size = run_log_size(sql)
    failed = sql.exec("SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM failed_writes").one()
    # workerd's `sql.databaseSize` (both adapters have it; a test double may not).
    storage_bytes = getattr(sql, "database_size", 0)
    return InstanceReport(
        tenant_id=str(me["tenant_id"]),
        agent_type=str(me["agent_type"]),
        instance_id=str(me["instance_id"]),
        storage_bytes=int(storage_bytes or 0),
        run_log_rows=rows,
        run_log_bytes=size,
        pending_writes=count_rows(sql, "pending_writes"),
        failed_writes=int(failed["n"]),
        failed_oldest_at=_ms(failed["oldest"]),
        last_activity_at=_ms(me["last_activity_at"]),
        cleared_at=_ms(sql.exec("SELECT cleared_at FROM instance_lifecycle").one()["cleared_at"]),
        reported_at=max(1, int(now * 1000)),
    )


def _scrub_state(state_json: str, subject: str) -> str | None:
    """The state without entries naming the subject, or None when nothing changes."""
    if subject not in state_json:
        return None
    try:
        state = json.loads(state_json)
    except ValueError:
        return "{}"
    if not isinstance(state, dict):
        return "{}"
    kept = {
        key: value
        for key, value in state.items()
        if subject not in key and subject not in json.dumps(value, ensure_ascii=False)
    }
    return _json(kept)


def snapshot(sql: SqlStorage) -> dict[str, list[Row]]:
    """Every row of every table, for `restore` into a new database."""
    return {table: sql.exec(f"SELECT * FROM {table}").to_array() for table in TABLES}


def restore(sql: SqlStorage, rows: dict[str, list[Row]]) -> None:
    """Create the schema in a new, empty database and insert `rows` (a `snapshot`) as they
    were, keys and AUTOINCREMENT sequences included."""
    create_schema(sql)
    for table, found in rows.items():
        for row in found:
            marks = ", ".join("?" for _ in row)
            sql.exec(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})", *row.values())


def erase_subject_traces(
    storage: DurableObjectStorage, subject: str, erased_runs: Iterable[str]
) -> dict[str, int]:
    """Remove a subject's traces (the subject as a substring of text), all or nothing;
    returns the rows changed per table. Pending and failed writes go when they mention the
    subject or belong to an erased run (given, or doomed by another of its writes): a replay
    would bring the run back. `run_log` loses those runs and every row mentioning the
    subject; `turn_state.state_json` the keys whose name or value mentions it."""
    sql = storage.sql

    def erase() -> dict[str, int]:
        runs = set(erased_runs)
        doomed: dict[str, set[int]] = {"pending_writes": set(), "failed_writes": set()}
        for _ in range(2):  # the second pass: a write of a run the other table doomed
            for table in doomed:
                columns = _TEXT_COLUMNS[table]
                for row in sql.exec(
                    f"SELECT seq, run_id, {', '.join(columns)} FROM {table}"
                ).to_array():
                    if str(row["run_id"]) in runs or any(subject in str(row[c]) for c in columns):
                        doomed[table].add(int(row["seq"]))
                        runs.add(str(row["run_id"]))
        doomed["run_log"] = {
            int(row["seq"])
            for row in sql.exec("SELECT seq, run_id, detail_json FROM run_log").to_array()
            if str(row["run_id"]) in runs or subject in str(row["detail_json"])
        }
        counts = {
            table: _wipe_and_delete_ids(sql, table, "seq", sorted(seqs))
            for table, seqs in doomed.items()
        }
        counts["turn_state"] = 0
        for row in sql.exec("SELECT instance_id, state_json FROM turn_state").to_array():
            scrubbed = _scrub_state(str(row["state_json"]), subject)
            if scrubbed is not None:
                sql.exec(
                    "UPDATE turn_state SET state_json = ? WHERE instance_id = ?",
                    scrubbed,
                    row["instance_id"],
                )
                counts["turn_state"] += 1
        return counts

    return storage.transaction_sync(erase)
