"""The AgentRuntime object's storage lifecycle, driven by its alarm (ADR-043: working state
is cleared after ~24 h idle).

A turn records the object's activity (`touch`) and arms the alarm for `idle` seconds later
unless an earlier alarm is set (`arm_by`). When the alarm runs (`on_alarm`), in order:

1. episodic writes still in flight are waited for; writes the outbox (`pending_writes`)
   held when the alarm began are replayed (a restarted object replays them as it starts)
   and then nothing is cleared this time (re-armed in a minute);
2. `failed_writes` that are due are retried, one attempt each, `FAILED_WRITE_RETRIES`
   times at most, 1, 2, 4, 8, 16 minutes apart; one that lands is deleted, one that runs
   out stays (`next_retry_at` NULL) and is reported in the daily brief;
3. the run log is kept under its caps (`AGENT_RUN_LOG_MAX_ROWS` / `_BYTES`): whole runs,
   oldest first, are dropped once they are safely in D1; `run_workflows` keeps its newest
   `RUN_WORKFLOWS_KEPT` rows (ids and scores only);
4. after `AGENT_STATE_IDLE_SECONDS` without a turn, the run log rows of runs safely in D1
   are deleted, and `turn_state` too once no run log row is left;
5. the object reports its figures to D1 (`agent_memory.lifecycle.instances`), which the
   daily brief reads and the subject eraser lists instances from;
6. the alarm is set again for the earliest of: the end of the idle period (if state is
   left), the next due retry, a minute (if the outbox was replayed); else deleted.

"Safely in D1": the run's `agent_runs` row exists and no write of the run is pending or
failed (writes are ordered per object, so the episode landed before the run's end did).
Every delete overwrites first (`agent_runtime_do.wipe`). A failing step is logged and the
alarm re-armed: the handler itself does not raise for an outage (Cloudflare would retry it
within seconds; a minute is kinder to a struggling D1).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from agent_memory.lifecycle.retention import InstanceReport, report_instance
from agent_memory.statements import chunks
from agent_memory.tiers.episodic import EpisodicWriter
from agent_runtime_do.outbox import pending_by_tenant
from agent_runtime_do.wipe import wipe_and_delete, wipe_and_delete_ids
from bindings.environment import Bindings
from bindings.ports.alarms import AlarmStorage
from bindings.ports.d1 import D1Database
from bindings.ports.do_sql import DurableObjectStorage, SqlStorage

log = logging.getLogger(__name__)

FAILED_WRITE_RETRIES = 5
FAILED_RETRY_BASE_SECONDS = 60.0
RECHECK_SECONDS = 60.0
RUN_WORKFLOWS_KEPT = 10_000


class LifecycleHost(Protocol):
    """What the lifecycle needs of its object (`AgentRuntimeCore`)."""

    storage: DurableObjectStorage
    bindings: Bindings

    async def settle_writes(self) -> bool:
        """Wait (bounded) for writes in flight; True when none is left in flight."""
        ...

    def writer_for(self, tenant: str) -> EpisodicWriter | None: ...


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


class InstanceLifecycle:
    def __init__(self, host: LifecycleHost, alarms: AlarmStorage | None) -> None:
        self._host = host
        self._alarms = alarms

    @property
    def _sql(self) -> SqlStorage:
        return self._host.storage.sql

    # --- activity ------------------------------------------------------------------------

    def touch(self, tenant: str, agent_type: str, instance_id: str, now: float) -> None:
        """Record a turn (one statement; safe under interleaving)."""
        self._sql.exec(
            "INSERT INTO instance_lifecycle (id, tenant_id, agent_type, instance_id, "
            "last_activity_at) VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "last_activity_at = MAX(last_activity_at, excluded.last_activity_at)",
            tenant,
            agent_type,
            instance_id,
            now,
        )

    async def after_activity(self, now: float) -> None:
        """Arm the alarm for the end of the idle period (or now, if the run log is over
        its caps), unless an earlier one is set."""
        settings = self._host.bindings.settings
        rows, size = self._run_log_size()
        over = rows > settings.agent_run_log_max_rows or size > settings.agent_run_log_max_bytes
        await self.arm_by(now if over else now + settings.agent_state_idle_seconds)

    async def adopt_existing_state(self) -> None:
        """An object whose state predates its lifecycle row (it ran turns before the alarm
        existed) gets one from its `turn_state` (last update = last activity) and an alarm
        for the end of that idle period, so it is cleared like any other: called when the
        object starts, whatever woke it."""
        if self._identity() is not None:
            return
        rows = self._sql.exec(
            "SELECT tenant_id, agent_type, instance_id, updated_at FROM turn_state "
            "ORDER BY updated_at DESC LIMIT 1"
        ).to_array()
        if not rows:
            return
        row = rows[0]
        last = float(row["updated_at"])
        self.touch(str(row["tenant_id"]), str(row["agent_type"]), str(row["instance_id"]), last)
        await self.arm_by(last + self._idle_seconds)

    async def arm_by(self, at: float) -> None:
        """Make sure the alarm fires no later than `at`."""
        if self._alarms is None:
            return
        current = await self._alarms.get_alarm()
        if current is None or current > at:
            await self._alarms.set_alarm(at)

    # --- the alarm -----------------------------------------------------------------------

    async def on_alarm(self, now: float) -> AlarmOutcome:
        outcome = AlarmOutcome()
        identity = self._identity()
        if identity is None:  # never ran a turn: nothing to keep in step
            if self._alarms is not None:
                await self._alarms.delete_alarm()
            return outcome
        tenant = str(identity["tenant_id"])
        db = self._host.bindings.db
        # What the outbox held when the alarm began (a restarted object is replaying it).
        pending = pending_by_tenant(self._sql)
        outcome.replayed = sum(len(writes) for writes in pending.values())
        settled = await self._host.settle_writes()
        writer = self._host.writer_for(tenant)
        left = pending_by_tenant(self._sql)
        if left and settled and writer is not None:
            for writes in left.values():
                writer.replay(writes)
            settled = await self._host.settle_writes()
        if db is not None and writer is not None:
            await self._retry_failed(writer, now, outcome)
            await self._step(outcome, "trim", self._trim(db, tenant, outcome))
            idle_for = now - float(identity["last_activity_at"])
            if idle_for >= self._idle_seconds and not pending and settled:
                await self._step(outcome, "clear", self._clear(db, tenant, now, outcome))
            await self._step(outcome, "report", self._report(db, identity, now, outcome))
        outcome.next_alarm = self._next_alarm(now, identity, blocked=bool(pending) or not settled)
        if self._alarms is not None:
            if outcome.next_alarm is None:
                await self._alarms.delete_alarm()
            else:
                await self._alarms.set_alarm(outcome.next_alarm)
        log.info(
            "agent instance %s/%s/%s alarm: %s",
            tenant,
            identity["agent_type"],
            identity["instance_id"],
            {k: v for k, v in asdict(outcome).items() if k != "errors"},
        )
        return outcome

    @property
    def _idle_seconds(self) -> float:
        return float(self._host.bindings.settings.agent_state_idle_seconds)

    async def _step(self, outcome: AlarmOutcome, name: str, work: Any) -> None:
        try:
            await work
        except Exception as exc:  # logged by type only: messages may quote values
            outcome.errors.append(f"{name}: {type(exc).__name__}")
            log.warning("agent instance alarm: %s failed: %s", name, type(exc).__name__)

    def _identity(self) -> dict[str, Any] | None:
        rows = self._sql.exec(
            "SELECT tenant_id, agent_type, instance_id, last_activity_at, cleared_at "
            "FROM instance_lifecycle WHERE id = 1"
        ).to_array()
        return dict(rows[0]) if rows else None

    def _run_log_size(self) -> tuple[int, int]:
        row = self._sql.exec(
            "SELECT COUNT(*) AS n, COALESCE(SUM(length(CAST(detail_json AS BLOB))), 0) AS size "
            "FROM run_log"
        ).one()
        return int(row["n"]), int(row["size"])

    # --- failed writes ---------------------------------------------------------------------

    async def _retry_failed(
        self, writer: EpisodicWriter, now: float, outcome: AlarmOutcome
    ) -> None:
        due = self._sql.exec(
            "SELECT seq, op, run_id, payload_json, retries FROM failed_writes "
            "WHERE next_retry_at IS NOT NULL AND next_retry_at <= ? ORDER BY seq",
            now,
        ).to_array()
        for row in due:
            outcome.retried += 1
            try:
                await writer.write_now(row["op"], _json(row["payload_json"]))
            except Exception as exc:
                retries = int(row["retries"]) + 1
                next_at = (
                    now + FAILED_RETRY_BASE_SECONDS * 2**retries
                    if retries < FAILED_WRITE_RETRIES
                    else None
                )
                self._sql.exec(
                    "UPDATE failed_writes SET retries = ?, next_retry_at = ? WHERE seq = ?",
                    retries,
                    next_at,
                    row["seq"],
                )
                log.warning(
                    "failed episodic %s for run %s: alarm retry %d/%d failed (%s)%s",
                    row["op"],
                    row["run_id"],
                    retries,
                    FAILED_WRITE_RETRIES,
                    type(exc).__name__,
                    "" if next_at is not None else "; kept for the daily brief",
                )
                continue
            wipe_and_delete(
                self._sql, "failed_writes", ("payload_json", "error"), "seq = ?", row["seq"]
            )
            outcome.recovered += 1

    # --- bounded storage and the idle clear -------------------------------------------------

    async def _safe_runs(self, db: D1Database, tenant: str, runs: Sequence[str]) -> set[str]:
        """The runs whose content is safely in D1 (module docstring)."""
        held = {
            str(row["run_id"])
            for table in ("pending_writes", "failed_writes")
            for row in self._sql.exec(f"SELECT DISTINCT run_id FROM {table}").to_array()
        }
        candidates = [run for run in runs if run not in held]
        safe: set[str] = set()
        for chunk in chunks(candidates):
            marks = ", ".join("?" for _ in chunk)
            result = await (
                db.prepare(
                    f"SELECT run_id FROM agent_runs WHERE tenant_id = ? AND run_id IN ({marks})"
                )
                .bind(tenant, *chunk)
                .all()
            )
            safe.update(str(row["run_id"]) for row in result.results)
        return safe

    def _runs_oldest_first(self) -> list[str]:
        rows = self._sql.exec(
            "SELECT run_id, MIN(seq) AS first FROM run_log GROUP BY run_id ORDER BY first"
        ).to_array()
        return [str(row["run_id"]) for row in rows]

    def _delete_runs(self, runs: Sequence[str]) -> int:
        return self._host.storage.transaction_sync(
            lambda: wipe_and_delete_ids(self._sql, "run_log", ("detail_json",), "run_id", runs)
        )

    async def _trim(self, db: D1Database, tenant: str, outcome: AlarmOutcome) -> None:
        self._sql.exec(
            "DELETE FROM run_workflows WHERE run_id IN (SELECT run_id FROM run_workflows "
            "ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
            RUN_WORKFLOWS_KEPT,
        )
        settings = self._host.bindings.settings
        rows, size = self._run_log_size()
        if rows <= settings.agent_run_log_max_rows and size <= settings.agent_run_log_max_bytes:
            return
        runs = self._runs_oldest_first()
        safe = await self._safe_runs(db, tenant, runs)
        for run in runs:
            if rows <= settings.agent_run_log_max_rows and size <= settings.agent_run_log_max_bytes:
                break
            if run == runs[-1] or run not in safe:
                continue  # the newest run stays, and nothing not yet in D1 goes
            outcome.trimmed_rows += self._delete_runs([run])
            rows, size = self._run_log_size()

    async def _clear(self, db: D1Database, tenant: str, now: float, outcome: AlarmOutcome) -> None:
        runs = self._runs_oldest_first()
        safe = await self._safe_runs(db, tenant, runs)
        outcome.cleared_rows = self._delete_runs(sorted(safe))
        if self._run_log_size()[0] > 0:
            return  # some run is not in D1 yet: its log and the counters stay
        self._host.storage.transaction_sync(
            lambda: wipe_and_delete(self._sql, "turn_state", ("state_json",), "1 = 1")
        )
        self._sql.exec("UPDATE instance_lifecycle SET cleared_at = ? WHERE id = 1", now)
        outcome.cleared = True

    async def _report(
        self, db: D1Database, identity: dict[str, Any], now: float, outcome: AlarmOutcome
    ) -> None:
        rows, size = self._run_log_size()
        failed = self._sql.exec(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM failed_writes"
        ).one()
        pending = self._sql.exec("SELECT COUNT(*) AS n FROM pending_writes").one()
        cleared = self._sql.exec("SELECT cleared_at FROM instance_lifecycle WHERE id = 1").one()
        # workerd's `sql.databaseSize` (both adapters have it; a test double may not).
        storage_bytes = getattr(self._sql, "database_size", 0)
        await report_instance(
            db,
            InstanceReport(
                tenant_id=str(identity["tenant_id"]),
                agent_type=str(identity["agent_type"]),
                instance_id=str(identity["instance_id"]),
                storage_bytes=int(storage_bytes or 0),
                run_log_rows=rows,
                run_log_bytes=size,
                pending_writes=int(pending["n"]),
                failed_writes=int(failed["n"]),
                failed_oldest_at=_ms(failed["oldest"]),
                last_activity_at=_ms(identity["last_activity_at"]),
                cleared_at=_ms(cleared["cleared_at"]),
                reported_at=max(1, int(now * 1000)),
            ),
        )
        outcome.reported = True

    def _next_alarm(self, now: float, identity: dict[str, Any], *, blocked: bool) -> float | None:
        candidates: list[float] = []
        retry = self._sql.exec(
            "SELECT MIN(next_retry_at) AS at FROM failed_writes WHERE next_retry_at IS NOT NULL"
        ).one()["at"]
        if retry is not None:
            candidates.append(max(float(retry), now + 1.0))
        state_left = (
            self._run_log_size()[0] > 0
            or int(self._sql.exec("SELECT COUNT(*) AS n FROM turn_state").one()["n"]) > 0
        )
        if blocked:
            candidates.append(now + RECHECK_SECONDS)
        elif state_left:
            end_of_idle = float(identity["last_activity_at"]) + self._idle_seconds
            # Past it already: something not yet in D1 held the clear; look again later.
            candidates.append(end_of_idle if end_of_idle > now else now + self._idle_seconds)
        return min(candidates) if candidates else None


def _ms(seconds: Any) -> int | None:
    return None if seconds is None else int(float(seconds) * 1000)


def _json(text: Any) -> dict[str, Any]:
    value = json.loads(str(text))
    if not isinstance(value, dict):
        raise ValueError("a failed write's payload is not a JSON object")
    return value
