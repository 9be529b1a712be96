"""The response bodies the OpenAPI document names, as pydantic models.

What the handlers answer, written down for clients and for schemathesis's conformance
checks (`worker.openapi`). Extra keys are allowed (`extra="allow"`) so a response may grow
a field without breaking a client; `ErrorBody` is the one error shape of `worker.errors`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.lifecycle.erase import EraseReport
from agent_memory.lifecycle.retention import TenantLifecycle
from agent_memory.tiers.episodic import Episode, RunRecord


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(_Open):
    code: str = Field(description="Stable identifier clients may branch on")
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(BaseModel):
    """Every error the Worker answers (outside MCP's JSON-RPC envelope)."""

    error: ErrorDetail


class Health(_Open):
    status: Literal["ok"]
    environment: str
    bindings: dict[str, bool]
    embedding: dict[str, Any] | None


class OutcomeResult(_Open):
    run_id: str
    workflow: dict[str, Any] | None


class FailedWriteView(_Open):
    op: str
    payload: dict[str, Any]
    error: str
    attempts: int
    created_at: float


class RunDetail(_Open):
    run: RunRecord
    episodes: list[Episode]
    run_log: list[Any]
    workflow: dict[str, Any] | None
    failed_writes: list[FailedWriteView]


class Workflows(_Open):
    instance_id: str
    workflows: list[dict[str, Any]]


class PackCandidates(_Open):
    instance_id: str
    min_pulls: int
    min_mean: float
    candidates: list[dict[str, Any]]


class FactDeleted(_Open):
    tenant: str
    fact_id: str
    deleted: bool
    vector_deleted: bool
    complete: bool


class LifecycleView(_Open):
    settings: TenantLifecycle
    brief: dict[str, Any]


class LifecycleSettingsView(_Open):
    settings: TenantLifecycle


class PruneView(_Open):
    prune: dict[str, Any]
    tenants: list[dict[str, Any]]


class EraseView(EraseReport):
    model_config = ConfigDict(extra="allow")
    erased_by: str


class ScheduledResult(_Open):
    """What the scheduled handler reports (local dev endpoint only)."""


class McpMessage(_Open):
    """One JSON-RPC 2.0 message (MCP 2025-06-18 Streamable HTTP: one message per POST)."""

    jsonrpc: Literal["2.0"]
    method: str | None = None
    id: str | int | None = None
    params: dict[str, Any] | None = None


class McpReply(_Open):
    """A JSON-RPC response: `result` or `error` (whose `code` is a JSON-RPC integer)."""

    jsonrpc: Literal["2.0"]
    id: str | int | None = None


class BackfillBody(BaseModel):
    """Body of `POST /admin/tenants/{tenant}/namespace-backfill`."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
    cursor: str | None = Field(default=None, min_length=1, max_length=1024)
    max_keys: int = Field(default=250, ge=1, le=1000)


class BackfillView(BaseModel):
    tenant: str
    phase: str
    scanned: int
    copied: int
    already_canonical: int
    expiring: int
    invalid: int
    dry_run: bool
    next_cursor: str | None
