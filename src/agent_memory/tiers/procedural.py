"""Tier 4, procedural memory: a Thompson-sampling bandit over workflows, and workflow packs.

The bandit lives in the AgentRuntime Durable Object's SQLite (`procedural_workflows`,
agent-local, ADR-043): each workflow's success rate has a Beta(alpha, beta) posterior from
Beta(1, 1). `select_workflow` draws one sample per active workflow (numpy, with the caller's
seeded `Generator`) and returns the largest; `record_outcome(score ∈ [0, 1])` adds `score`
to alpha and `1 - score` to beta in ONE UPDATE (atomic even if the object interleaves
events); `pack_candidates` are the workflows stable enough to promote (ADR-29).

Packs (`WorkflowPacks`, D1, every statement starts with `tenant_id = ?`): an operator
promotes a stable workflow into a named, versioned pack for every instance of an agent type;
`offered` is what a turn asks first (the newest active pack for the task type, used instead
of sampling). Promoting a name again adds the next version and deprecates the one before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from agent_memory.governance.agent_types import WorkflowSpec
from agent_memory.governance.writes import WriteGate, WriteProposal
from agent_memory.namespace import TENANT_RE
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.do_sql import SqlStorage
from bindings.ports.sql import Row, SqlValue

DEFAULT_MIN_PULLS = 20
DEFAULT_MIN_MEAN = 0.7


class UnknownWorkflowError(LookupError):
    """No workflow has this id."""


class Workflow(BaseModel):
    model_config = ConfigDict(frozen=True)

    workflow_id: str
    agent_type: str
    task_type: str
    spec: dict[str, Any]
    alpha: float
    beta: float
    pulls: int
    status: Literal["active", "retired"]
    created_at: float
    updated_at: float

    @property
    def posterior_mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def summary(self) -> dict[str, Any]:
        """JSON view for admin endpoints, with the posterior mean."""
        return {**self.model_dump(), "posterior_mean": round(self.posterior_mean, 6)}


class Selection(BaseModel):
    workflow: Workflow
    sample: float
    samples: dict[str, float]
    # "name@version" when a workflow pack chose it instead of sampling (`packs.py`).
    pack: str | None = None


_COLUMNS = (
    "workflow_id, agent_type, task_type, spec, alpha, beta, pulls, status, created_at, updated_at"
)


def _workflow(row: Row) -> Workflow:
    return Workflow.model_validate({**row, "spec": json.loads(row["spec"])})


class ProceduralMemory:
    """The bandit of one Durable Object (synchronous: DO SQL is synchronous)."""

    def __init__(self, sql: SqlStorage) -> None:
        self._sql = sql
        # Writes are proposals checked by the write policy (ADR-0051). This object does not
        # know its tenant, so callers that can record events pass their own gate.
        self._gate = WriteGate("procedural")

    def register(
        self,
        *,
        workflow_id: str,
        agent_type: str,
        task_type: str,
        spec: dict[str, Any],
        now: float,
        gate: WriteGate | None = None,
    ) -> None:
        """Add a workflow with a Beta(1, 1) prior; an existing id is left as it is."""
        gate = gate or self._gate
        proposal = WriteProposal(
            tier="procedural",
            key=workflow_id,
            value={"agent_type": agent_type, "task_type": task_type, "spec": spec},
            source="workflow_registry",
            agent_type=agent_type,
        )
        gate.check(proposal)
        cursor = self._sql.exec(
            f"INSERT INTO procedural_workflows ({_COLUMNS}) "
            "VALUES (?, ?, ?, ?, 1.0, 1.0, 0, 'active', ?, ?) "
            "ON CONFLICT (workflow_id) DO NOTHING",
            workflow_id,
            agent_type,
            task_type,
            json.dumps(spec, separators=(",", ":"), sort_keys=True),
            now,
            now,
        )
        list(cursor)  # consume so rows_written is final
        if cursor.rows_written:
            gate.defer([proposal])

    def register_specs(
        self,
        agent_type: str,
        specs: Iterable[WorkflowSpec],
        now: float,
        gate: WriteGate | None = None,
    ) -> None:
        for spec in specs:
            self.register(
                workflow_id=spec.workflow_id,
                agent_type=agent_type,
                task_type=spec.task_type,
                spec={"instructions": spec.instructions, **spec.spec},
                now=now,
                gate=gate,
            )

    def get(self, workflow_id: str) -> Workflow | None:
        rows = self._sql.exec(
            f"SELECT {_COLUMNS} FROM procedural_workflows WHERE workflow_id = ?", workflow_id
        ).to_array()
        return _workflow(rows[0]) if rows else None

    def workflows(
        self, agent_type: str, task_type: str | None = None, *, include_retired: bool = False
    ) -> list[Workflow]:
        sql = f"SELECT {_COLUMNS} FROM procedural_workflows WHERE agent_type = ?"
        params: list[str] = [agent_type]
        if task_type is not None:
            sql += " AND task_type = ?"
            params.append(task_type)
        if not include_retired:
            sql += " AND status = 'active'"
        rows = self._sql.exec(sql + " ORDER BY workflow_id", *params).to_array()
        return [_workflow(row) for row in rows]

    def select_workflow(
        self, agent_type: str, task_type: str, rng: np.random.Generator
    ) -> Selection | None:
        """Thompson sampling: the active workflow with the largest Beta draw."""
        candidates = self.workflows(agent_type, task_type)
        if not candidates:
            return None
        alphas = np.array([w.alpha for w in candidates], dtype=np.float64)
        betas = np.array([w.beta for w in candidates], dtype=np.float64)
        draws = rng.beta(alphas, betas)
        best = int(np.argmax(draws))
        return Selection(
            workflow=candidates[best],
            sample=float(draws[best]),
            samples={w.workflow_id: float(d) for w, d in zip(candidates, draws, strict=True)},
        )

    def record_outcome(
        self, workflow_id: str, score: float, now: float, gate: WriteGate | None = None
    ) -> Workflow:
        """Update the posterior with one outcome; returns the updated workflow."""
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ValueError("score must be a number in [0, 1]")
        value = float(score)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {value}")
        gate = gate or self._gate
        proposal = WriteProposal(
            tier="procedural", key=workflow_id, value={"score": value}, source="outcome"
        )
        gate.check(proposal)
        cursor = self._sql.exec(
            "UPDATE procedural_workflows SET alpha = alpha + ?, beta = beta + ?, "
            "pulls = pulls + 1, updated_at = ? WHERE workflow_id = ?",
            value,
            1.0 - value,
            now,
            workflow_id,
        )
        list(cursor)  # consume so rows_written is final
        if cursor.rows_written == 0:
            raise UnknownWorkflowError(f"no workflow {workflow_id!r}")
        updated = self.get(workflow_id)
        if updated is None:  # deleted between the two statements: cannot happen in one DO
            raise UnknownWorkflowError(f"no workflow {workflow_id!r}")
        gate.defer([proposal])
        return updated

    def retire(self, workflow_id: str, now: float) -> None:
        self._sql.exec(
            "UPDATE procedural_workflows SET status = 'retired', updated_at = ? "
            "WHERE workflow_id = ?",
            now,
            workflow_id,
        )

    def pack_candidates(
        self,
        agent_type: str,
        *,
        min_pulls: int = DEFAULT_MIN_PULLS,
        min_mean: float = DEFAULT_MIN_MEAN,
    ) -> list[Workflow]:
        """Stable, successful workflows (enough pulls, high posterior mean), best first."""
        found = [
            w
            for w in self.workflows(agent_type)
            if w.pulls >= min_pulls and w.posterior_mean >= min_mean
        ]
        return sorted(found, key=lambda w: (-w.posterior_mean, w.workflow_id))


_PACK_COLS = (
    "name, version, agent_type, workflow_id, task_type, source_instance_id, alpha, beta, "
    "pulls, status, promoted_by, created_at, deprecated_at"
)


class Pack(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    agent_type: str
    workflow_id: str
    task_type: str
    source_instance_id: str
    alpha: float
    beta: float
    pulls: int
    status: Literal["active", "deprecated"]
    promoted_by: str
    created_at: int
    deprecated_at: int | None = None


def _pack(row: Row) -> Pack:
    return Pack.model_validate({**row, "version": int(row["version"]), "pulls": int(row["pulls"])})


class WorkflowPacks:
    """One tenant's workflow packs."""

    def __init__(self, db: D1Database, tenant: str) -> None:
        if not TENANT_RE.fullmatch(tenant):
            raise ValueError(f"invalid tenant id {tenant!r}")
        self._db = db
        self.tenant = tenant

    def _sql(self, sql: str, params: tuple[SqlValue, ...]) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant, *params)

    async def promote(
        self, name: str, workflow: Workflow, *, instance_id: str, by: str, now_ms: int
    ) -> Pack:
        """Add the next version of `name` for the workflow's agent type and deprecate the
        versions before it, in one batch (one transaction)."""
        # The next version is computed inside the INSERT, so two promotions of one name
        # cannot pick the same number; the batch is one transaction.
        results = await self._db.batch(
            [
                self._db.prepare(
                    "UPDATE workflow_packs SET status = 'deprecated', deprecated_at = ? "
                    "WHERE tenant_id = ? AND agent_type = ? AND name = ? AND status = 'active'"
                ).bind(now_ms, self.tenant, workflow.agent_type, name),
                self._db.prepare(
                    f"INSERT INTO workflow_packs (tenant_id, {_PACK_COLS}) "
                    "SELECT ?, ?, COALESCE(MAX(version), 0) + 1, ?, ?, ?, ?, ?, ?, ?, 'active', "
                    "?, ?, NULL FROM workflow_packs "
                    "WHERE tenant_id = ? AND agent_type = ? AND name = ? RETURNING version"
                ).bind(
                    self.tenant,
                    name,
                    workflow.agent_type,
                    workflow.workflow_id,
                    workflow.task_type,
                    instance_id,
                    float(workflow.alpha),
                    float(workflow.beta),
                    int(workflow.pulls),
                    by,
                    now_ms,
                    self.tenant,
                    workflow.agent_type,
                    name,
                ),
            ]
        )
        version = int(results[1].results[0]["version"])
        found = await self.get(workflow.agent_type, name, version)
        if found is None:  # written in the batch above
            raise RuntimeError("the promoted pack was not found")
        return found

    async def get(self, agent_type: str, name: str, version: int) -> Pack | None:
        row = await self._sql(
            f"SELECT {_PACK_COLS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
            "AND name = ? AND version = ?",
            (agent_type, name, version),
        ).first()
        return _pack(row) if row is not None else None

    async def list(self, agent_type: str) -> list[Pack]:
        """Every version of every pack of the agent type, newest first."""
        result = await self._sql(
            f"SELECT {_PACK_COLS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
            "ORDER BY created_at DESC, name, version DESC",
            (agent_type,),
        ).all()
        return [_pack(row) for row in result.results]

    async def deprecate(self, agent_type: str, name: str, now_ms: int) -> int:
        """Deprecate the active version of `name`; returns how many were (0 or 1)."""
        result = await (
            self._db.prepare(
                "UPDATE workflow_packs SET status = 'deprecated', deprecated_at = ? "
                "WHERE tenant_id = ? AND agent_type = ? AND name = ? AND status = 'active'"
            )
            .bind(now_ms, self.tenant, agent_type, name)
            .run()
        )
        return int(result.meta.changes)

    async def offered(self, agent_type: str, task_type: str) -> Pack | None:
        """The newest active pack of the agent type for the task type, if any."""
        row = await self._sql(
            f"SELECT {_PACK_COLS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
            "AND task_type = ? AND status = 'active' ORDER BY created_at DESC, name LIMIT 1",
            (agent_type, task_type),
        ).first()
        return _pack(row) if row is not None else None


ERASED_SOURCE = "erased"


async def forget_pack_sources(db: D1Database, tenant: str, subject: str) -> int:
    """A subject erase: packs promoted from an instance whose id names `subject` keep their
    workflow but not that id (`ERASED_SOURCE` instead); how many changed."""
    result = await (
        db.prepare(
            "UPDATE workflow_packs SET source_instance_id = ? "
            "WHERE tenant_id = ? AND instr(source_instance_id, ?) > 0"
        )
        .bind(ERASED_SOURCE, tenant, subject)
        .run()
    )
    return int(result.meta.changes)
