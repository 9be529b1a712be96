"""One agent turn of one instance, start to finish.

A turn, in order: `turn_state` upsert (`turn_count + 1`) and a `turn_start` log row → wait
(bounded) for this instance's earlier episodic writes, so a turn sees the previous turn's
episode → context assembly (working-memory snapshot + last 10 episodes, logged as
`memory_read` with the episode ids) → workflow choice (Thompson sampling) → `start_run`
queued with the episode ids in `agent_runs.input` → the agent loop (every model/tool call
logged) → the turn's episode and `complete_run`/`fail_run` queued → `turn_state` finish
update and a `turn_end` row. An unexpected error closes the turn as failed rather than
leave a run that never ends. Episodic writes go through `ctx.waitUntil` (`EpisodicWriter`),
never on the response path.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from agent_memory.agent.context import assemble_context, render_context
from agent_memory.agent.loop import LoopOutcome, run_agent_loop
from agent_memory.agent.tools import ToolContext, platform_tools
from agent_memory.governance.agent_types import AgentType
from agent_memory.governance.policy import WriteGate
from agent_memory.ids import new_ulid
from agent_memory.tiered.deployment import namespace_flags
from agent_memory.tiers.episodic import MAX_EPISODE_CHARS, Episode, EpisodicWriter, RunRecord
from agent_memory.tiers.procedural import ProceduralMemory, Selection, WorkflowPacks
from agent_memory.tiers.working import ReadCounts, WorkingMemory, flush_counts
from agent_runtime_do.protocol import Failure, RunPayload, RunResult
from agent_runtime_do.run_log import RunLogger
from agent_runtime_do.turn_state import begin_turn, finish_turn
from bindings.environment import Bindings
from bindings.ports.do_sql import DurableObjectStorage
from bindings.ports.llm import LLM, ChatMessage

log = logging.getLogger(__name__)


class TurnHost(Protocol):
    """What a turn needs of the instance it runs in (`AgentRuntimeCore`)."""

    storage: DurableObjectStorage
    bindings: Bindings
    procedural: ProceduralMemory
    working_lock: asyncio.Lock

    def now(self) -> float: ...

    def generator(self) -> np.random.Generator: ...

    async def flush_writes(self) -> None: ...

    def gate_for(self, tenant: str) -> WriteGate: ...

    def ensure_workflows(self, agent_type: AgentType, tenant: str) -> None: ...


@dataclass
class _Turn:
    """What a turn has established so far (read again when it is closed)."""

    run_id: str
    task_type: str
    base: RunRecord
    workflow_id: str | None = None
    episode_ids: list[str] = field(default_factory=list)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class TurnRunner:
    """Runs turns for one instance; holds nothing between turns but its host."""

    def __init__(self, host: TurnHost) -> None:
        self._host = host

    async def run(
        self, request: RunPayload, agent_type: AgentType, llm: LLM, writer: EpisodicWriter
    ) -> dict[str, Any]:
        sql = self._host.storage.sql
        started = self._host.now()
        run_id = new_ulid(started)
        logger = RunLogger(sql, self._host.bindings.clock, run_id)
        task_type = request.task_type or agent_type.default_task_type
        state = begin_turn(
            sql,
            tenant=request.tenant,
            agent_type=agent_type.name,
            instance_id=request.instance_id,
            run_id=run_id,
            now=started,
        )
        logger(
            "turn_start",
            {
                "input": request.input[:500],
                "task_type": task_type,
                "turn_count": state["turn_count"],
                "requested_by": request.requested_by,
            },
        )
        base = RunRecord(
            run_id=run_id,
            agent_type=agent_type.name,
            instance_id=request.instance_id,
            status="running",
            started_at=_ms(started),
        )
        turn = _Turn(run_id=run_id, task_type=task_type, base=base)
        try:
            outcome = await self._body(request, agent_type, llm, writer, logger, turn, state)
        except Exception as exc:
            # The turn already counts (turn_state, run_log): close it as failed rather
            # than leave a run that never ends.
            log.exception("agent turn %s failed unexpectedly", run_id)
            outcome = LoopOutcome(
                status="failed",
                failure_code="internal_error",
                failure_message=f"{type(exc).__name__}: {exc}",
            )
        return self._finish(request, agent_type, writer, logger, turn, state, outcome)

    async def _body(
        self,
        request: RunPayload,
        agent_type: AgentType,
        llm: LLM,
        writer: EpisodicWriter,
        logger: RunLogger,
        turn: _Turn,
        state: dict[str, Any],
    ) -> LoopOutcome:
        bindings = self._host.bindings
        sql = self._host.storage.sql
        await self._host.flush_writes()
        # Working-memory keys follow the namespace migration flags; its reads are counted
        # for the daily brief and flushed after the turn, off the response path.
        reads = ReadCounts()
        working = (
            WorkingMemory(
                bindings.kv,
                request.tenant,
                request.instance_id,
                write_lock=self._host.working_lock,
                gate=self._host.gate_for(request.tenant),
                agent_type=agent_type.name,
                run_id=turn.run_id,
                clock=bindings.clock,
                namespace=namespace_flags(bindings),
                read_counts=reads,
            )
            if agent_type.memory.working_memory and bindings.kv is not None
            else None
        )
        context = await assemble_context(
            agent_type=agent_type,
            turn_state=state,
            working=working,
            episodic=writer.store,
            bindings=bindings,
            tenant=request.tenant,
            input_text=request.input,
        )
        turn.episode_ids = context.episode_ids
        logger(
            "memory_read",
            {"tier": "working", "op": "snapshot", "keys": sorted(context.working_memory)},
        )
        logger(
            "memory_read",
            {"tier": "episodic", "op": "recent_episodes", "episode_ids": context.episode_ids},
        )
        if context.facts:
            logger(
                "memory_read", {"tier": "semantic", "op": "prefetch", "facts": len(context.facts)}
            )

        self._host.ensure_workflows(agent_type, request.tenant)
        selection = await self._packed_workflow(request.tenant, agent_type, turn.task_type)
        if selection is None:
            selection = self._host.procedural.select_workflow(
                agent_type.name, turn.task_type, self._host.generator()
            )
        if selection is not None:
            turn.workflow_id = selection.workflow.workflow_id
            context.workflow = next(
                (w for w in agent_type.workflows if w.workflow_id == turn.workflow_id), None
            )
            sql.exec(
                "INSERT INTO run_workflows (run_id, workflow_id, task_type, created_at) "
                "VALUES (?, ?, ?, ?)",
                turn.run_id,
                turn.workflow_id,
                turn.task_type,
                self._host.now(),
            )
            logger(
                "memory_read",
                {
                    "tier": "procedural",
                    "op": "select_workflow",
                    "workflow_id": turn.workflow_id,
                    "samples": selection.samples,
                    "pack": selection.pack,
                },
            )

        turn.base = turn.base.model_copy(
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
        writer.start_run(turn.base)

        tool_context = ToolContext(
            tenant=request.tenant,
            agent_type=agent_type,
            instance_id=request.instance_id,
            run_id=turn.run_id,
            bindings=bindings,
            working=working,
            log_step=logger,
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
                log_step=logger,
            )
        finally:
            if reads.total and bindings.db is not None:
                bindings.background.wait_until(
                    flush_counts(bindings.db, request.tenant, reads, bindings.clock.now())
                )

    async def _packed_workflow(
        self, tenant: str, agent_type: AgentType, task_type: str
    ) -> Selection | None:
        """The workflow of the tenant's active pack for this agent and task type, offered
        before the bandit samples (`agent_memory.tiers.packs`). A failed lookup falls back
        to sampling: a turn never fails over a pack."""
        db = self._host.bindings.db
        if db is None:
            return None
        try:
            pack = await WorkflowPacks(db, tenant).offered(agent_type.name, task_type)
        except Exception as exc:
            log.warning("pack lookup failed, sampling instead: %s", type(exc).__name__)
            return None
        if pack is None:
            return None
        workflow = self._host.procedural.get(pack.workflow_id)
        if workflow is None or workflow.status != "active":
            return None
        return Selection(
            workflow=workflow, sample=1.0, samples={}, pack=f"{pack.name}@{pack.version}"
        )

    def _finish(
        self,
        request: RunPayload,
        agent_type: AgentType,
        writer: EpisodicWriter,
        logger: RunLogger,
        turn: _Turn,
        state: dict[str, Any],
        outcome: LoopOutcome,
    ) -> dict[str, Any]:
        finished = self._host.now()
        completed = outcome.status == "completed"
        failure = None
        if not completed:
            failure = Failure(
                code=outcome.failure_code or "failed", message=outcome.failure_message or ""
            )
            logger("error", {"code": failure.code, "message": failure.message})
        base = turn.base
        episode = Episode(
            episode_id=new_ulid(finished),
            run_id=turn.run_id,
            agent_type=agent_type.name,
            instance_id=request.instance_id,
            kind="outcome",
            subject=request.subject,
            content=_episode_text(request.input, outcome.output, failure),
            data={
                "status": outcome.status,
                "task_type": turn.task_type,
                "workflow_id": turn.workflow_id,
                "tools_used": outcome.tools_used,
                "steps": outcome.steps,
                "failure": failure.model_dump() if failure else None,
            },
            created_at=max(_ms(finished), base.started_at),
        )
        finished_run = base.model_copy(
            update={
                "status": "completed" if completed else "failed",
                "output": (
                    {"text": outcome.output, "episode_id": episode.episode_id}
                    if completed
                    else None
                ),
                "error": None if failure is None else f"{failure.code}: {failure.message}",
                "steps": outcome.steps,
                "finished_at": max(_ms(finished), base.started_at),
            }
        )
        if base.input == {}:
            # The turn failed before start_run was queued: the upsert below creates the row.
            finished_run = finished_run.model_copy(
                update={"input": {"text": request.input, "task_type": turn.task_type}}
            )
        writer.append_episode(episode)
        if completed:
            writer.complete_run(finished_run)
        else:
            writer.fail_run(finished_run)
        finish_turn(
            self._host.storage.sql,
            instance_id=request.instance_id,
            run_id=turn.run_id,
            completed=completed,
            now=finished,
        )
        logger(
            "turn_end",
            {
                "status": outcome.status,
                "steps": outcome.steps,
                "tool_calls": outcome.tool_calls,
                "episode_id": episode.episode_id,
            },
        )
        return RunResult(
            run_id=turn.run_id,
            tenant=request.tenant,
            agent_type=agent_type.name,
            instance_id=request.instance_id,
            status=outcome.status,
            output=outcome.output,
            steps=outcome.steps,
            tool_calls=outcome.tool_calls,
            tools_used=outcome.tools_used,
            task_type=turn.task_type,
            workflow_id=turn.workflow_id,
            context_episode_ids=turn.episode_ids,
            episode_id=episode.episode_id,
            turn_count=int(state["turn_count"]),
            started_at=base.started_at,
            finished_at=finished_run.finished_at or base.started_at,
            failure=failure,
        ).model_dump()


def _episode_text(text: str, output: str, failure: Failure | None) -> str:
    result = f"Failed ({failure.code}): {failure.message}" if failure else output or "(no answer)"
    content = f"Input: {text}\nResult: {result}"
    return content if len(content) <= MAX_EPISODE_CHARS else content[: MAX_EPISODE_CHARS - 1] + "…"
