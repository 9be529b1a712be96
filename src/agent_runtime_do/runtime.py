"""`AgentRuntimeCore`: one agent instance's turn loop and its DO-local tiers.

The Cloudflare wrapper (`worker.entry.AgentRuntime`) calls `initialize()` inside
`blockConcurrencyWhile` from its constructor, then forwards each RPC to
`call(method, payload)` and its `alarm()` handler to `alarm()` (the storage lifecycle,
`agent_runtime_do.lifecycle`); the local runtime's namespace does the same.

RPC methods (payloads in `agent_runtime_do.protocol`):

* `run`            one agent turn (below);
* `run_log`        a run's log rows, workflow and failed writes (admin);
* `record_outcome` report a run's outcome score to the procedural bandit;
* `workflows`      the bandit's workflows, or only the pack candidates (admin);
* `state`          the instance's `turn_state` row;
* `erase_subject`  remove a subject's traces from this object (`agent_runtime_do.erase`);
* `ping`.

A `run` validates first (nothing is written for a bad payload, an unknown agent type or a
missing binding), then hands the turn to `agent_runtime_do.turn.TurnRunner`.

Everything between awaits is a single SQL statement or a `transaction_sync`, so the object
is correct even when Cloudflare interleaves a second event while one awaits the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from pydantic import ValidationError

from agent_memory.governance.agent_types import AgentType, catalog
from agent_memory.governance.policy import WriteGate
from agent_memory.lifecycle.erase import subject_digest
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import EpisodicWriter, FailedWrite, Sleep
from agent_memory.tiers.procedural import ProceduralMemory, UnknownWorkflowError
from agent_runtime_do.erase import erase_subject_traces
from agent_runtime_do.lifecycle import FAILED_RETRY_BASE_SECONDS, InstanceLifecycle
from agent_runtime_do.outbox import DurableOutbox, pending_by_tenant
from agent_runtime_do.protocol import (
    ErasePayload,
    OutcomePayload,
    RunLogPayload,
    RunPayload,
    ScopePayload,
    WorkflowsPayload,
    rpc_error,
)
from agent_runtime_do.run_log import append_run_log, read_run_log
from agent_runtime_do.schema import create_schema
from agent_runtime_do.turn import TurnRunner
from agent_runtime_do.turn_state import read_turn_state
from bindings.environment import Bindings
from bindings.ports.alarms import AlarmStorage
from bindings.ports.d1 import D1Database
from bindings.ports.do_sql import DurableObjectStorage

log = logging.getLogger(__name__)

# How long a turn (or an admin read) waits for this instance's earlier episodic writes.
FLUSH_TIMEOUT_SECONDS = 2.0

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class UnknownMethodError(LookupError):
    """RPC named a method the runtime does not expose."""


def _invalid(exc: ValidationError) -> dict[str, Any]:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(payload)'}: {err['msg']}"
        for err in exc.errors(include_url=False, include_input=False)
    )
    return rpc_error(422, "validation_error", f"invalid payload: {problems}")


class AgentRuntimeCore:
    def __init__(
        self,
        storage: DurableObjectStorage,
        bindings: Bindings,
        *,
        retry_sleep: Sleep = asyncio.sleep,
        alarms: AlarmStorage | None = None,
    ) -> None:
        self.storage = storage
        self.bindings = bindings
        # Backoff between episodic write retries (tests pass a sleep that returns at once).
        self.retry_sleep = retry_sleep
        self.procedural = ProceduralMemory(storage.sql)
        # Created on first use, never at import (Workers snapshot rules forbid entropy in
        # globals); tests replace it with a seeded Generator.
        self.rng: np.random.Generator | None = None
        self._writer: EpisodicWriter | None = None
        self._registered_types: set[str] = set()
        # Turns of this object may interleave on Cloudflare; the working-memory budget check
        # (list, then put) must not.
        self.working_lock = asyncio.Lock()
        self._turns = TurnRunner(self)
        # The storage lifecycle its alarm drives (idle clear, retries, caps, D1 report).
        self.lifecycle = InstanceLifecycle(self, alarms)

    async def initialize(self) -> None:
        """Create the schema and re-queue the episodic writes an earlier life of this
        object queued but never settled (`agent_runtime_do.outbox`); runs before any call
        is delivered. An object older than its storage lifecycle joins it here."""
        create_schema(self.storage.sql)
        await self.lifecycle.adopt_existing_state()
        db = self.bindings.db
        if db is None:
            return
        for tenant, pending in pending_by_tenant(self.storage.sql).items():
            log.warning("replaying %d unsettled episodic write(s)", len(pending))
            self._episodic_writer(tenant, db).replay(pending)

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one RPC. Public methods are listed in `RPC_METHODS`."""
        if method not in RPC_METHODS:
            raise UnknownMethodError(method)
        handler: Handler = getattr(self, f"rpc_{method}")
        return await handler(payload)

    # --- helpers ------------------------------------------------------------------------

    def now(self) -> float:
        return self.bindings.clock.now()

    def generator(self) -> np.random.Generator:
        if self.rng is None:
            self.rng = np.random.default_rng()
        return self.rng

    def _episodic_writer(self, tenant: str, db: D1Database) -> EpisodicWriter:
        if self._writer is None or self._writer.store.tenant != tenant:
            self._writer = EpisodicWriter(
                Memory(self.bindings, tenant).episodic,
                self.bindings.background,
                on_failure=self._record_failed_write,
                sleep=self.retry_sleep,
                outbox=DurableOutbox(self.storage.sql, tenant, self.bindings.clock),
            )
        return self._writer

    def writer_for(self, tenant: str) -> EpisodicWriter | None:
        db = self.bindings.db
        return None if db is None else self._episodic_writer(tenant, db)

    def _record_failed_write(self, failed: FailedWrite) -> None:
        """Keep the write with its payload; the alarm retries it (`lifecycle`)."""
        retry_at = self.now() + FAILED_RETRY_BASE_SECONDS
        self.storage.sql.exec(
            "INSERT INTO failed_writes (run_id, op, payload_json, error, attempts, created_at, "
            "next_retry_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            failed.run_id,
            failed.op,
            json.dumps(failed.payload, separators=(",", ":"), default=str),
            failed.error,
            failed.attempts,
            self.now(),
            retry_at,
        )
        self.bindings.background.wait_until(self.lifecycle.arm_by(retry_at))

    async def settle_writes(self) -> bool:
        await self.flush_writes()
        return self._writer is None or not self._writer.pending

    async def alarm(self, retry_count: int = 0) -> dict[str, Any]:
        """The object's alarm (`agent_runtime_do.lifecycle`); `retry_count` is Cloudflare's
        `alarmInfo.retryCount` (logged only)."""
        if retry_count:
            log.warning("agent instance alarm: retry %d", retry_count)
        return asdict(await self.lifecycle.on_alarm(self.now()))

    async def flush_writes(self) -> None:
        if self._writer is not None and not await self._writer.flush(FLUSH_TIMEOUT_SECONDS):
            log.warning("episodic writes still pending after %ss", FLUSH_TIMEOUT_SECONDS)

    def _scope_conflict(self, scope: ScopePayload) -> dict[str, Any] | None:
        """An error if this object already belongs to another (tenant, agent type)."""
        state = read_turn_state(self.storage.sql, scope.instance_id)
        if state is None:
            return None
        if state["tenant_id"] != scope.tenant or state["agent_type"] != scope.agent_type:
            return rpc_error(409, "scope_mismatch", "this agent instance belongs to another scope")
        return None

    def gate_for(self, tenant: str) -> WriteGate:
        """The write-policy gate of this object's writes: `memory_written` events go to D1
        off the response path (`ctx.waitUntil`)."""
        return Memory(self.bindings, tenant, events_after_response=True).gate

    def ensure_workflows(self, agent_type: AgentType, tenant: str) -> None:
        if agent_type.name not in self._registered_types:
            self.procedural.register_specs(
                agent_type.name, agent_type.workflows, self.now(), gate=self.gate_for(tenant)
            )
            self._registered_types.add(agent_type.name)

    # --- RPC ----------------------------------------------------------------------------

    async def rpc_ping(self, payload: dict[str, Any]) -> dict[str, Any]:
        row = self.storage.sql.exec("SELECT COUNT(*) AS n FROM turn_state").one()
        return {"ok": True, "instances": int(row["n"])}

    async def rpc_state(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            scope = ScopePayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        return {"turn_state": read_turn_state(self.storage.sql, scope.instance_id)}

    async def rpc_run(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            request = RunPayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        agent_type = catalog(self.bindings.settings.agent_types).get(request.agent_type)
        if agent_type is None:
            return rpc_error(404, "unknown_agent_type", f"no agent type {request.agent_type!r}")
        bindings = self.bindings
        if bindings.llm is None:
            return rpc_error(503, "llm_unavailable", "no language model is configured")
        if bindings.db is None:
            return rpc_error(503, "episodic_unavailable", "the D1 binding is missing")
        if agent_type.memory.working_memory and bindings.kv is None:
            return rpc_error(503, "working_memory_unavailable", "the KV binding is missing")
        conflict = self._scope_conflict(request)
        if conflict is not None:
            return conflict
        writer = self._episodic_writer(request.tenant, bindings.db)
        self.lifecycle.touch(request.tenant, request.agent_type, request.instance_id, self.now())
        result = await self._turns.run(request, agent_type, bindings.llm, writer)
        await self.lifecycle.after_activity(self.now())
        return result

    async def rpc_run_log(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            request = RunLogPayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        await self.flush_writes()
        sql = self.storage.sql
        workflow = sql.exec(
            "SELECT workflow_id, task_type, outcome_score, scored_at FROM run_workflows "
            "WHERE run_id = ?",
            request.run_id,
        ).to_array()
        failed = sql.exec(
            "SELECT op, payload_json, error, attempts, created_at FROM failed_writes "
            "WHERE run_id = ? ORDER BY seq",
            request.run_id,
        ).to_array()
        return {
            "run_log": read_run_log(sql, request.run_id),
            "workflow": dict(workflow[0]) if workflow else None,
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

    async def rpc_record_outcome(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            request = OutcomePayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        sql = self.storage.sql
        now = self.now()
        rows = sql.exec(
            "SELECT workflow_id, outcome_score FROM run_workflows WHERE run_id = ?",
            request.run_id,
        ).to_array()
        if not rows:
            return rpc_error(
                404, "run_not_found", "this instance has no run with that id and a workflow"
            )
        workflow_id = str(rows[0]["workflow_id"])

        def record() -> dict[str, Any] | None:
            cursor = sql.exec(
                "UPDATE run_workflows SET outcome_score = ?, scored_at = ? "
                "WHERE run_id = ? AND outcome_score IS NULL",
                request.score,
                now,
                request.run_id,
            )
            list(cursor)
            if cursor.rows_written == 0:
                return None  # already scored: one outcome per run
            updated = self.procedural.record_outcome(
                workflow_id, request.score, now, gate=self.gate_for(request.tenant)
            )
            return updated.summary()

        try:
            summary = self.storage.transaction_sync(record)
        except UnknownWorkflowError:
            return rpc_error(404, "workflow_not_found", f"workflow {workflow_id!r} is gone")
        if summary is None:
            return rpc_error(409, "outcome_already_recorded", "this run already has an outcome")
        append_run_log(
            sql,
            self.bindings.clock,
            request.run_id,
            "memory_write",
            {
                "tier": "procedural",
                "op": "record_outcome",
                "workflow_id": workflow_id,
                "score": request.score,
            },
        )
        self.lifecycle.touch(request.tenant, request.agent_type, request.instance_id, now)
        await self.lifecycle.after_activity(now)
        return {"run_id": request.run_id, "workflow": summary}

    async def rpc_workflows(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            request = WorkflowsPayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        agent_type = catalog(self.bindings.settings.agent_types).get(request.agent_type)
        if agent_type is None:
            return rpc_error(404, "unknown_agent_type", f"no agent type {request.agent_type!r}")
        self.ensure_workflows(agent_type, request.tenant)
        if request.candidates_only:
            found = self.procedural.pack_candidates(
                agent_type.name, min_pulls=request.min_pulls, min_mean=request.min_mean
            )
            if request.task_type is not None:
                found = [w for w in found if w.task_type == request.task_type]
        else:
            found = self.procedural.workflows(agent_type.name, request.task_type)
        return {"workflows": [w.summary() for w in found]}

    async def rpc_erase_subject(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Remove the subject's traces from this object (`agent_runtime_do.erase`).

        Episodic writes still in flight are waited for first: one landing in D1 after the
        erase would bring a trace back. If they do not settle in time nothing is erased and
        the answer is 503 `writes_in_flight` (the eraser reports the erase incomplete and
        keeps the D1 rows, so repeating it finds everything again)."""
        try:
            request = ErasePayload.model_validate(payload)
        except ValidationError as exc:
            return _invalid(exc)
        if not await self.settle_writes():
            return rpc_error(503, "writes_in_flight", "episodic writes are still in flight")
        counts = erase_subject_traces(self.storage, request.subject, request.run_ids)
        log.info(
            "erase %s/%s:%s subject=%s: %s",
            request.tenant,
            request.agent_type,
            request.instance_id,
            subject_digest(request.subject),
            counts.as_dict(),
        )
        return {"erased": counts.as_dict()}


RPC_METHODS = frozenset(
    {"ping", "state", "run", "run_log", "record_outcome", "workflows", "erase_subject"}
)
