"""Workflow packs: procedural workflows promoted for every agent of a type in a tenant.

The bandit (`procedural.py`) learns per agent instance. When one of its workflows is stable
(enough pulls, posterior mean above a threshold: `ProceduralMemory.pack_candidates`), an
operator promotes it into a named, versioned pack in D1. `offered` is what a turn asks
first: the newest active pack of the agent type for the task type, whose workflow the turn
uses instead of sampling. Promoting a name again adds the next version and deprecates the
one before; `deprecate` retires a name explicitly (the bandit decides again). Every
statement starts with `tenant_id = ?`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent_memory.scope import TENANT_RE
from agent_memory.tiers.procedural import Workflow
from bindings.ports.d1 import D1Database
from bindings.ports.sql import Row

_COLUMNS = (
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
                    f"INSERT INTO workflow_packs (tenant_id, {_COLUMNS}) "
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
        row = await (
            self._db.prepare(
                f"SELECT {_COLUMNS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
                "AND name = ? AND version = ?"
            )
            .bind(self.tenant, agent_type, name, version)
            .first()
        )
        return _pack(row) if row is not None else None

    async def list(self, agent_type: str) -> list[Pack]:
        """Every version of every pack of the agent type, newest first."""
        result = await (
            self._db.prepare(
                f"SELECT {_COLUMNS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
                "ORDER BY created_at DESC, name, version DESC"
            )
            .bind(self.tenant, agent_type)
            .all()
        )
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
        row = await (
            self._db.prepare(
                f"SELECT {_COLUMNS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
                "AND task_type = ? AND status = 'active' ORDER BY created_at DESC, name LIMIT 1"
            )
            .bind(self.tenant, agent_type, task_type)
            .first()
        )
        return _pack(row) if row is not None else None
