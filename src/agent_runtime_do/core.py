"""`AgentRuntimeCore`: one agent instance's Durable Object — its RPCs and its turns.

The host (`worker.entry.AgentRuntime`, the local runtime) calls `initialize()` inside
`blockConcurrencyWhile`, then `call(method, payload)` per RPC and `alarm()`. Nothing is written
for a bad payload, unknown agent type or missing binding. A turn (docs/agent-runtime.md) sends
its episodic writes through the durable outbox and `ctx.waitUntil`; between awaits everything
is one SQL statement or a `transaction_sync` (Cloudflare may interleave events at an await).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_memory.agent.turn import (
    LoopOutcome,
    StepLogger,
    ToolContext,
    assemble_context,
    platform_tools,
    render_context,
    run_agent_loop,
)
from agent_memory.governance.agent_types import AgentType, catalog
from agent_memory.governance.writes import WriteGate
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.erase import subject_digest
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import (
    MAX_EPISODE_CHARS,
    Episode,
    EpisodicWriter,
    FailedWrite,
    ProceduralMemory,
    RunRecord,
    Selection,
    Sleep,
    UnknownWorkflowError,
)
from agent_memory.tiers.working import ReadCounts, flush_counts
from agent_runtime_do import storage
from agent_runtime_do.protocol import (
    ErasePayload,
    Failure,
    OutcomePayload,
    RunLogPayload,
    RunPayload,
    RunResult,
    ScopePayload,
    WorkflowsPayload,
    rpc_error,
)
from bindings.environment import Bindings
from bindings.ports.do_sql import AlarmStorage, DurableObjectStorage
from bindings.ports.llm import LLM, ChatMessage

log = logging.getLogger(__name__)

# How long a turn (or an admin read) waits for this instance's earlier episodic writes.
FLUSH_TIMEOUT_SECONDS = 2.0

# Each RPC method and the payload it is validated against (`ping` takes any).
RPC_PAYLOADS: dict[str, type[BaseModel] | None] = {
    "ping": None,
    "state": ScopePayload,
    "run": RunPayload,
    "run_log": RunLogPayload,
    "record_outcome": OutcomePayload,
    "workflows": WorkflowsPayload,
    "erase_subject": ErasePayload,
}


class UnknownMethodError(LookupError):
    """RPC named a method the runtime does not expose."""


@dataclass
class _Turn:
    """A turn in progress: what it has established so far (read again when it closes)."""

    request: RunPayload
    agent_type: AgentType
    writer: EpisodicWriter
    state: dict[str, Any]
    log_step: StepLogger
    task_type: str
    run: RunRecord  # queued by `start_run` once the context is known, finished at the close
    workflow_id: str | None = None
    episode_ids: list[str] = field(default_factory=list)


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
        self.alarms = alarms
        self.retry_sleep = retry_sleep  # between episodic write retries
        self.procedural = ProceduralMemory(storage.sql)
        # Created on first use: Workers snapshot rules forbid entropy at import.
        self.rng: random.Random | None = None
        self._writer: EpisodicWriter | None = None
        self._writer_shard: str | None = None
        self._registered_types: set[str] = set()
        self._running: set[str] = set()  # the turns this life of the object is running
        # Interleaved turns must not interleave the working-memory budget check (list, put).
        self.working_lock = asyncio.Lock()

    async def initialize(self) -> None:
        """Create the schema and re-queue the episodic writes an earlier life of this object
        never settled."""
        sql = self.storage.sql
        storage.create_schema(sql)
        if self.bindings.db is None:
            return
        for tenant, pending in storage.pending_by_tenant(sql).items():
            log.warning("replaying %d unsettled episodic write(s)", len(pending))
            (await self.writer(tenant)).replay(pending)
        await self.settle()

    async def settle(self) -> None:
        """Close as `interrupted` every turn an earlier life of this object (or a cancelled
        call) began and never ended: its counter, its `turn_end`, and its D1 row (queued after
        the writes it queued itself, and changing only a row still `running`). A new life
        means the old one is gone: Cloudflare runs one instance of an object at a time."""
        sql = self.storage.sql
        me = storage.identity(sql)
        turns = storage.open_turns(sql, self._running) if me is not None else []
        if me is None or not turns:
            return
        writer = None if self.bindings.db is None else await self.writer(str(me["tenant_id"]))
        for row in turns:
            begun = json.loads(str(row["detail_json"]))
            started = int(float(row["created_at"]) * 1000)
            run = RunRecord(
                run_id=str(row["run_id"]),
                agent_type=str(me["agent_type"]),
                instance_id=str(me["instance_id"]),
                status="interrupted",
                input={"text": begun.get("input", ""), "task_type": begun.get("task_type")},
                error="interrupted: the agent instance stopped during the turn",
                steps=int(row["steps"]),
                started_at=started,
                finished_at=max(started, int(self.now() * 1000)),
            )

            def close(run: RunRecord = run) -> None:
                if writer is not None:
                    writer.fail_run(run)  # the op that finishes a run; its status says how
                storage.finish_turn(sql, self.bindings.clock, run.run_id, "interrupted", {})

            self.storage.transaction_sync(close)
            log.warning("agent turn %s was interrupted: settled", run.run_id)

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one RPC (`RPC_PAYLOADS`); an invalid payload is a 422 error."""
        if method not in RPC_PAYLOADS:
            raise UnknownMethodError(method)
        model = RPC_PAYLOADS[method]
        try:
            request = payload if model is None else model.model_validate(payload)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(payload)'}: {err['msg']}"
                for err in exc.errors(include_url=False, include_input=False)
            )
            return rpc_error(422, "validation_error", f"invalid payload: {problems}")
        handler: Callable[[Any], Awaitable[dict[str, Any]]] = getattr(self, f"rpc_{method}")
        await self.settle()
        return await handler(request)

    async def alarm(self, retry_count: int = 0) -> dict[str, Any]:
        """`storage.run_alarm`, then set or delete the alarm as it says."""
        if retry_count:
            log.warning("agent instance alarm: retry %d", retry_count)
        await self.settle()
        outcome = await storage.run_alarm(
            self.storage,
            self.bindings.db,
            self.bindings.settings,
            self.flush_writes,
            self.writer,
            self.now(),
        )
        if self.alarms is not None:
            if outcome.next_alarm is None:
                await self.alarms.delete_alarm()
            else:
                await self.alarms.set_alarm(outcome.next_alarm)
        return asdict(outcome)

    def now(self) -> float:
        return self.bindings.clock.now()

    async def writer(self, tenant: str) -> EpisodicWriter:
        """The instance's episodic writer (one tenant at a time, on the tenant's shard: a
        writer of the shard it moved away from is replaced), backed by the outbox."""
        memory = await Memory.open(self.bindings, tenant)
        if (
            self._writer is None
            or self._writer.store.tenant != tenant
            or self._writer_shard != memory.bindings.shard
        ):
            self._writer_shard = memory.bindings.shard
            self._writer = EpisodicWriter(
                memory.episodic,
                self.bindings.background,
                on_failure=self._record_failed_write,
                sleep=self.retry_sleep,
                outbox=storage.DurableOutbox(self.storage.sql, tenant, self.bindings.clock),
            )
        return self._writer

    def _record_failed_write(self, failed: FailedWrite) -> None:
        retry_at = self.now() + storage.FAILED_RETRY_BASE_SECONDS
        storage.record_failed_write(self.storage.sql, failed, self.now(), retry_at)
        self.bindings.background.wait_until(self.arm_by(retry_at))

    async def flush_writes(self) -> bool:
        """Wait (bounded) for this instance's writes in flight; True when none is left."""
        if self._writer is not None and not await self._writer.flush(FLUSH_TIMEOUT_SECONDS):
            log.warning("episodic writes still pending after %ss", FLUSH_TIMEOUT_SECONDS)
        return self._writer is None or not self._writer.pending

    async def arm_by(self, at: float) -> None:
        """Make sure the alarm fires no later than `at`."""
        if self.alarms is not None:
            current = await self.alarms.get_alarm()
            if current is None or current > at:
                await self.alarms.set_alarm(at)

    async def _after_activity(self, now: float) -> None:
        """Arm the alarm for the end of the idle period (now if the run log is over its caps)."""
        settings = self.bindings.settings
        rows, size = storage.run_log_size(self.storage.sql)
        over = rows > settings.agent_run_log_max_rows or size > settings.agent_run_log_max_bytes
        await self.arm_by(now if over else now + settings.agent_state_idle_seconds)

    def ensure_workflows(self, agent_type: AgentType, gate: WriteGate) -> None:
        if agent_type.name not in self._registered_types:
            self.procedural.register_specs(
                agent_type.name, agent_type.workflows, self.now(), gate=gate
            )
            self._registered_types.add(agent_type.name)

    async def rpc_ping(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "instances": storage.count_rows(self.storage.sql, "turn_state")}

    async def rpc_state(self, request: ScopePayload) -> dict[str, Any]:
        return {"turn_state": storage.read_turn_state(self.storage.sql, request.instance_id)}

    async def rpc_run(self, request: RunPayload) -> dict[str, Any]:
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
        sql = self.storage.sql
        state = storage.read_turn_state(sql, request.instance_id)
        scope = (request.tenant, request.agent_type)
        if state is not None and (state["tenant_id"], state["agent_type"]) != scope:
            return rpc_error(409, "scope_mismatch", "this agent instance belongs to another scope")
        writer = await self.writer(request.tenant)
        storage.touch(sql, request.tenant, request.agent_type, request.instance_id, self.now())
        # Armed before the turn: if the object dies in it, the alarm settles it (`settle`).
        await self.arm_by(self.now() + bindings.settings.agent_state_idle_seconds)
        started = self.now()
        run_id = new_ulid(started)
        task_type = request.task_type or agent_type.default_task_type
        state = storage.begin_turn(
            sql, request.tenant, agent_type.name, request.instance_id, run_id, started
        )
        log_step = partial(storage.append_run_log, sql, bindings.clock, run_id)
        log_step(
            "turn_start",
            {
                "input": request.input[:500],
                "task_type": task_type,
                "turn_count": state["turn_count"],
                "requested_by": request.requested_by,
            },
        )
        run = RunRecord(
            run_id=run_id,
            agent_type=agent_type.name,
            instance_id=request.instance_id,
            status="running",
            started_at=int(started * 1000),
        )
        turn = _Turn(request, agent_type, writer, state, log_step, task_type, run)
        self._running.add(run_id)
        try:
            outcome = await self._turn(turn, bindings.llm)
        except Exception as exc:  # the turn already counts: close it as failed, never leave it open
            log.exception("agent turn %s failed unexpectedly", run_id)
            outcome = LoopOutcome(
                status="failed",
                failure_code="internal_error",
                failure_message=f"{type(exc).__name__}: {exc}",
            )
        finally:  # cancelled (BaseException): left open, settled as interrupted
            self._running.discard(run_id)
        result = self._close_turn(turn, outcome)
        await self._after_activity(self.now())
        return result

    async def rpc_run_log(self, request: RunLogPayload) -> dict[str, Any]:
        await self.flush_writes()
        return storage.read_run(self.storage.sql, request.run_id)

    async def rpc_record_outcome(self, request: OutcomePayload) -> dict[str, Any]:
        sql = self.storage.sql
        now = self.now()
        workflow_id = storage.run_workflow_id(sql, request.run_id)
        if workflow_id is None:
            return rpc_error(
                404, "run_not_found", "this instance has no run with that id and a workflow"
            )
        gate = (await Memory.open(self.bindings, request.tenant, events_after_response=True)).gate

        def record() -> dict[str, Any] | None:
            if not storage.score_run(sql, request.run_id, request.score, now):
                return None  # already scored: one outcome per run
            return self.procedural.record_outcome(
                workflow_id, request.score, now, gate=gate
            ).summary()

        try:
            summary = self.storage.transaction_sync(record)
        except UnknownWorkflowError:
            return rpc_error(404, "workflow_not_found", f"workflow {workflow_id!r} is gone")
        if summary is None:
            return rpc_error(409, "outcome_already_recorded", "this run already has an outcome")
        storage.append_run_log(
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
        storage.touch(sql, request.tenant, request.agent_type, request.instance_id, now)
        await self._after_activity(now)
        return {"run_id": request.run_id, "workflow": summary}

    async def rpc_workflows(self, request: WorkflowsPayload) -> dict[str, Any]:
        agent_type = catalog(self.bindings.settings.agent_types).get(request.agent_type)
        if agent_type is None:
            return rpc_error(404, "unknown_agent_type", f"no agent type {request.agent_type!r}")
        gate = (await Memory.open(self.bindings, request.tenant, events_after_response=True)).gate
        self.ensure_workflows(agent_type, gate)
        if request.candidates_only:
            found = self.procedural.pack_candidates(
                agent_type.name, min_pulls=request.min_pulls, min_mean=request.min_mean
            )
            if request.task_type is not None:
                found = [w for w in found if w.task_type == request.task_type]
        else:
            found = self.procedural.workflows(agent_type.name, request.task_type)
        return {"workflows": [w.summary() for w in found]}

    async def rpc_erase_subject(self, request: ErasePayload) -> dict[str, Any]:
        """`storage.erase_subject_traces` once the writes in flight settled (a later one would
        bring a trace back); else nothing is erased: 503 `writes_in_flight`."""
        if not await self.flush_writes():
            return rpc_error(503, "writes_in_flight", "episodic writes are still in flight")
        if request.wipe:  # the rows per table, as `erase_subject_traces` reports them
            tables = ("pending_writes", "failed_writes", "run_log", "turn_state")
            counts = {t: storage.count_rows(self.storage.sql, t) for t in tables}
        else:
            counts = storage.erase_subject_traces(self.storage, request.subject, request.run_ids)
        await self.rebuild(keep=not request.wipe)
        # The instance id may be the subject: logs name both by a hash only.
        log.info(
            "erase %s/%s:%s subject=%s wipe=%s: %s",
            request.tenant,
            request.agent_type,
            subject_digest(request.instance_id),
            subject_digest(request.subject),
            request.wipe,
            counts,
        )
        return {"erased": counts}

    async def rebuild(self, *, keep: bool) -> None:
        """Replace the database by a new one holding what is left (`keep`) or nothing, so no
        page keeps a byte of a deleted row: workerd allows no secure_delete or VACUUM, and
        SQLite leaves copies of rows in pages it rebalanced (docs/lifecycle.md, "Deleted
        bytes"). The alarm goes with the old database and is set again if anything is kept."""
        alarm = None if self.alarms is None or not keep else await self.alarms.get_alarm()
        # Nothing may await between the snapshot and the deletion (a turn's rows would go).
        rows = storage.snapshot(self.storage.sql) if keep else {}
        await self.storage.replace_all(lambda: storage.restore(self.storage.sql, rows))
        self._writer, self._registered_types = None, set()  # both held the old `sql`
        self.procedural = ProceduralMemory(self.storage.sql)
        if self.alarms is not None:
            await (self.alarms.delete_alarm() if alarm is None else self.alarms.set_alarm(alarm))

    async def _turn(self, turn: _Turn, llm: LLM) -> LoopOutcome:
        bindings = self.bindings
        request, agent_type, log_step = turn.request, turn.agent_type, turn.log_step
        await self.flush_writes()
        # Working-memory reads are counted for the daily brief, flushed after the turn.
        reads = ReadCounts()
        memory = await Memory.open(
            bindings, request.tenant, events_after_response=True, read_counts=reads
        )
        working = (
            memory.working(
                request.instance_id,
                write_lock=self.working_lock,
                agent_type=agent_type.name,
                run_id=turn.run.run_id,
            )
            if agent_type.memory.working_memory and bindings.kv is not None
            else None
        )
        self.ensure_workflows(agent_type, memory.gate)
        # The pack lookup (D1) needs nothing from the context: both in one round trip.
        context, selection = await asyncio.gather(
            assemble_context(
                memory,
                agent_type=agent_type,
                turn_state=turn.state,
                working=working,
                input_text=request.input,
            ),
            self._packed_workflow(memory, agent_type, turn.task_type),
        )
        turn.episode_ids = context.episode_ids
        reads_logged: list[dict[str, Any]] = [
            {"tier": "working", "op": "snapshot", "keys": sorted(context.working_memory)},
            {"tier": "episodic", "op": "recent_episodes", "episode_ids": context.episode_ids},
        ]
        if context.facts:
            reads_logged.append({"tier": "semantic", "op": "prefetch", "facts": len(context.facts)})
        for detail in reads_logged:
            log_step("memory_read", detail)

        if selection is None:
            if self.rng is None:
                self.rng = random.Random()
            selection = self.procedural.select_workflow(agent_type.name, turn.task_type, self.rng)
        if selection is not None:
            turn.workflow_id = selection.workflow.workflow_id
            context.workflow = next(
                (w for w in agent_type.workflows if w.workflow_id == turn.workflow_id), None
            )
            storage.record_run_workflow(
                self.storage.sql, turn.run.run_id, turn.workflow_id, turn.task_type, self.now()
            )
            log_step(
                "memory_read",
                {
                    "tier": "procedural",
                    "op": "select_workflow",
                    "workflow_id": turn.workflow_id,
                    "samples": selection.samples,
                    "pack": selection.pack,
                },
            )

        turn.run = turn.run.model_copy(
            update={
                "input": {
                    "text": request.input,
                    "task_type": turn.task_type,
                    "subject": request.subject,
                    "metadata": request.metadata,
                    "workflow_id": turn.workflow_id,
                    "context_episode_ids": context.episode_ids,
                    "requested_by": request.requested_by,
                }
            }
        )
        turn.writer.start_run(turn.run)

        tool_context = ToolContext(
            agent_type=agent_type,
            instance_id=request.instance_id,
            run_id=turn.run.run_id,
            memory=memory,
            working=working,
            log_step=log_step,
        )
        messages = [
            ChatMessage(role="system", content=agent_type.system_prompt),
            ChatMessage(role="system", content=render_context(context)),
            ChatMessage(role="user", content=request.input),
        ]
        try:
            return await run_agent_loop(
                llm,
                messages,
                platform_tools(agent_type, tool_context),
                tool_context,
                step_limit=agent_type.step_limit,
                timeout_seconds=agent_type.timeout_seconds,
                log_step=log_step,
            )
        finally:
            if reads.total and bindings.db is not None:
                bindings.background.wait_until(
                    flush_counts(bindings.db, request.tenant, reads, bindings.clock.now())
                )

    async def _packed_workflow(
        self, memory: Memory, agent_type: AgentType, task_type: str
    ) -> Selection | None:
        """The tenant's active pack's workflow, offered before the bandit samples (a failed
        lookup falls back to sampling)."""
        try:
            pack = await memory.packs.offered(agent_type.name, task_type)
        except Exception as exc:
            log.warning("pack lookup failed, sampling instead: %s", type(exc).__name__)
            return None
        if pack is None:
            return None
        workflow = self.procedural.get(pack.workflow_id)
        if workflow is None or workflow.status != "active":
            return None
        return Selection(workflow=workflow, samples={}, pack=f"{pack.name}@{pack.version}")

    def _close_turn(self, turn: _Turn, outcome: LoopOutcome) -> dict[str, Any]:
        request, run = turn.request, turn.run
        finished = self.now()
        finished_at = max(int(finished * 1000), run.started_at)
        completed = outcome.status == "completed"
        failure = None
        if not completed:
            failure = Failure(
                code=outcome.failure_code or "failed", message=outcome.failure_message or ""
            )
            turn.log_step("error", {"code": failure.code, "message": failure.message})
        result = f"Failed ({failure.code}): {failure.message}" if failure else outcome.output
        content = f"Input: {request.input}\nResult: {result or '(no answer)'}"
        if len(content) > MAX_EPISODE_CHARS:
            content = content[: MAX_EPISODE_CHARS - 1] + "…"
        episode = Episode(
            episode_id=new_ulid(finished),
            run_id=run.run_id,
            agent_type=turn.agent_type.name,
            instance_id=request.instance_id,
            kind="outcome",
            subject=request.subject,
            content=content,
            data={
                "status": outcome.status,
                "task_type": turn.task_type,
                "workflow_id": turn.workflow_id,
                "tools_used": outcome.tools_used,
                "steps": outcome.steps,
                "failure": failure.model_dump() if failure else None,
            },
            created_at=finished_at,
        )
        finished_run = run.model_copy(
            update={
                "status": "completed" if completed else "failed",
                "output": (
                    {"text": outcome.output, "episode_id": episode.episode_id}
                    if completed
                    else None
                ),
                "error": None if failure is None else f"{failure.code}: {failure.message}",
                "steps": outcome.steps,
                "finished_at": finished_at,
                # A turn that failed before start_run was queued: the upsert creates the row.
                "input": run.input or {"text": request.input, "task_type": turn.task_type},
            }
        )
        detail = {"steps": outcome.steps, "tool_calls": outcome.tool_calls}

        def close() -> None:  # all or nothing: a crash leaves the turn open, never half ended
            turn.writer.append_episode(episode)
            (turn.writer.complete_run if completed else turn.writer.fail_run)(finished_run)
            storage.finish_turn(
                self.storage.sql,
                self.bindings.clock,
                run.run_id,
                outcome.status,
                {**detail, "episode_id": episode.episode_id},
            )

        self.storage.transaction_sync(close)
        return RunResult(
            **outcome.model_dump(include={"status", "output", "steps", "tool_calls", "tools_used"}),
            run_id=run.run_id,
            tenant=request.tenant,
            agent_type=turn.agent_type.name,
            instance_id=request.instance_id,
            task_type=turn.task_type,
            workflow_id=turn.workflow_id,
            context_episode_ids=turn.episode_ids,
            episode_id=episode.episode_id,
            turn_count=int(turn.state["turn_count"]),
            started_at=run.started_at,
            finished_at=finished_at,
            failure=failure,
        ).model_dump()
