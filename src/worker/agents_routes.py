"""The admin agent-run path: the only routes that reach the AgentRuntime Durable Object.

Every route here is Cloudflare Access gated (`auth=ACCESS` in `worker.app.ROUTES`: the
router checks the token and the tenant grant first, then the body and query). Then the
agent type is checked; only a request that passed all of that reaches storage.

    POST /v1/agents/{tenant}/{agent_type}/run                      run one turn
    POST /v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome    score a run (procedural)
    GET  /admin/agents/{tenant}/runs                                list runs (D1, cursor)
    GET  /admin/agents/{tenant}/runs/{run_id}                       a run + episodes + log
    GET  /admin/agents/{tenant}/{agent_type}/workflows              the bandit's workflows
    GET  /admin/agents/{tenant}/{agent_type}/pack-candidates        workflows ready to pack

Errors: 401/403 from the gate, 404 `unknown_agent_type` / `run_not_found`, 422
`validation_error` / `invalid_path` / `invalid_cursor`, 503 when a binding is missing,
and whatever the Durable Object reports (`agent_runtime_do.protocol.rpc_error`).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_memory.governance.agent_types import AgentType, catalog
from agent_memory.governance.personal_data import PersonalData
from agent_memory.ids import is_ulid
from agent_memory.scope import (
    AGENT_TYPE_PATTERN,
    DEFAULT_INSTANCE,
    INSTANCE_PATTERN,
    AgentScope,
    is_agent_type,
)
from agent_memory.tiers.episodic import Episode, EpisodicStore, RunPage, RunRecord
from agent_runtime_do.protocol import MAX_INPUT_CHARS, TASK_TYPE_PATTERN, RunResult
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from bindings.ports.durable_objects import DurableObjectNamespace
from worker.errors import ApiError
from worker.router import Call

MAX_METADATA_BYTES = 4096


class RunBody(BaseModel):
    """Body of `POST /v1/agents/{tenant}/{agent_type}/run`."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be blank")
        return value

    @field_validator("subject")
    @classmethod
    def _printable_subject(cls, value: str | None) -> str | None:
        # Subjects are matched, erased and shown as identifiers: no control characters.
        if value is not None and any(unicodedata.category(c) == "Cc" for c in value):
            raise ValueError("subject must not contain control characters")
        return value

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
            raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
        return value


class OutcomeBody(BaseModel):
    """Body of `POST …/runs/{run_id}/outcome`: how well the run went, in [0, 1]."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)


class RunsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    status: Literal["running", "completed", "failed"] | None = None
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=20, ge=1, le=100)


class WorkflowsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)


class CandidatesQuery(WorkflowsQuery):
    min_pulls: int = Field(default=20, ge=1)
    min_mean: float = Field(default=0.7, ge=0.0, le=1.0)


class OutcomeResult(BaseModel):
    run_id: str
    workflow: dict[str, Any] | None


class FailedWriteView(BaseModel):
    op: str
    payload: dict[str, Any]
    error: str
    attempts: int
    created_at: float


class RunDetail(BaseModel):
    run: RunRecord
    episodes: list[Episode]
    run_log: list[Any]
    workflow: dict[str, Any] | None
    failed_writes: list[FailedWriteView]


class Workflows(BaseModel):
    instance_id: str
    workflows: list[dict[str, Any]]


class PackCandidates(BaseModel):
    instance_id: str
    min_pulls: int
    min_mean: float
    candidates: list[dict[str, Any]]


# --- helpers ----------------------------------------------------------------------------


def agent_type_param(call: Call[Any, Any]) -> AgentType:
    """The route's `{agent_type}` among the deployment's agent types, or 404."""
    name = call.params["agent_type"]
    types = catalog(call.bindings.settings.agent_types)
    found = types.get(name) if is_agent_type(name) else None
    if found is None:
        raise ApiError(
            404,
            "unknown_agent_type",
            f"no agent type {name!r}; known types: {', '.join(sorted(types))}",
        )
    return found


def _run_id(params: dict[str, str]) -> str:
    run_id = params["run_id"]
    if not is_ulid(run_id):
        raise ApiError(404, "run_not_found", f"no run {run_id!r}")
    return run_id


def _agents(bindings: Bindings) -> DurableObjectNamespace:
    if bindings.agents is None:
        raise ApiError(503, "agent_runtime_unavailable", "the AgentRuntime binding is missing")
    return bindings.agents


def _db(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise ApiError(503, "episodic_unavailable", "the D1 binding is missing")
    return bindings.db


async def call_agent(
    bindings: Bindings, scope: AgentScope, method: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """RPC to the scope's AgentRuntime; an error answer becomes an `ApiError`."""
    stub = _agents(bindings).get_by_name(scope.object_name)
    result = await stub.call(
        method,
        {
            "tenant": scope.tenant,
            "agent_type": scope.agent_type,
            "instance_id": scope.instance_id,
            **payload,
        },
    )
    error = result.get("error")
    if isinstance(error, dict):
        raise ApiError(
            int(error.get("status", 500)),
            str(error.get("code", "agent_runtime_error")),
            str(error.get("message", "the agent runtime reported an error")),
        )
    return result


# --- routes -----------------------------------------------------------------------------


async def run_agent(call: Call[RunBody, None]) -> RunResult:
    tenant, body = call.params["tenant"], call.body
    agent_type = agent_type_param(call)
    scope = AgentScope(tenant=tenant, agent_type=agent_type.name, instance_id=body.instance_id)
    result = await call_agent(
        call.bindings,
        scope,
        "run",
        {
            "input": body.input,
            "task_type": body.task_type,
            "subject": body.subject,
            "metadata": body.metadata,
            "requested_by": call.operator.principal,
        },
    )
    return RunResult.model_validate(result)


async def record_outcome(call: Call[OutcomeBody, None]) -> OutcomeResult:
    tenant, body = call.params["tenant"], call.body
    agent_type = agent_type_param(call)
    run_id = _run_id(call.params)
    scope = AgentScope(tenant=tenant, agent_type=agent_type.name, instance_id=body.instance_id)
    result = await call_agent(
        call.bindings, scope, "record_outcome", {"run_id": run_id, "score": body.score}
    )
    return OutcomeResult.model_validate(result)


async def list_runs(call: Call[None, RunsQuery]) -> RunPage:
    tenant, query, bindings = call.params["tenant"], call.query, call.bindings
    store = EpisodicStore(
        _db(bindings), tenant, personal=PersonalData.from_bindings(bindings, tenant)
    )
    return await store.list_runs(
        agent_type=query.agent_type, status=query.status, cursor=query.cursor, limit=query.limit
    )


async def get_run(call: Call[None, None]) -> RunDetail:
    tenant, bindings = call.params["tenant"], call.bindings
    run_id = _run_id(call.params)
    store = EpisodicStore(
        _db(bindings), tenant, personal=PersonalData.from_bindings(bindings, tenant)
    )
    run = await store.get_run(run_id)
    if run is None:
        raise ApiError(404, "run_not_found", f"tenant {tenant!r} has no run {run_id!r}")
    scope = AgentScope(tenant=tenant, agent_type=run.agent_type, instance_id=run.instance_id)
    # The run log lives in the instance's Durable Object; asking it also waits (briefly)
    # for the instance's pending episodic writes, so the re-read below is current.
    detail = await call_agent(bindings, scope, "run_log", {"run_id": run_id})
    run = await store.get_run(run_id) or run
    episodes = await store.episodes_for_run(run_id)
    return RunDetail(
        run=run,
        episodes=episodes,
        run_log=detail.get("run_log", []),
        workflow=detail.get("workflow"),
        failed_writes=detail.get("failed_writes", []),
    )


async def list_workflows(call: Call[None, WorkflowsQuery]) -> Workflows:
    tenant, query = call.params["tenant"], call.query
    agent_type = agent_type_param(call)
    scope = AgentScope(tenant=tenant, agent_type=agent_type.name, instance_id=query.instance_id)
    result = await call_agent(call.bindings, scope, "workflows", {"task_type": query.task_type})
    return Workflows.model_validate({"instance_id": query.instance_id, **result})


async def pack_candidates(call: Call[None, CandidatesQuery]) -> PackCandidates:
    tenant, query = call.params["tenant"], call.query
    agent_type = agent_type_param(call)
    scope = AgentScope(tenant=tenant, agent_type=agent_type.name, instance_id=query.instance_id)
    result = await call_agent(
        call.bindings,
        scope,
        "workflows",
        {
            "task_type": query.task_type,
            "candidates_only": True,
            "min_pulls": query.min_pulls,
            "min_mean": query.min_mean,
        },
    )
    return PackCandidates(
        instance_id=query.instance_id,
        min_pulls=query.min_pulls,
        min_mean=query.min_mean,
        candidates=result["workflows"],
    )


# Route patterns that may reach an agent's Durable Object: the agent-run and admin-agents
# routes, the memory API (procedural memory lives in the object), pack promotion (which
# reads the instance's pack candidates) and subject erase (which clears the subject from
# every instance's run log, turn state and queued writes).
AGENT_ROUTE_PREFIXES = (
    "/v1/agents/",
    "/admin/agents/",
    "/api/v1/memory/",
    "/admin/tenants/{tenant}/agents/",
    "/admin/tenants/{tenant}/subjects/",
)
