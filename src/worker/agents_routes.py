"""The admin agent routes (Access gated): runs, outcomes, workflows and packs; the only routes that
call the AgentRuntime Durable Object. The agent type is checked first (404 `unknown_agent_type`);
the object's errors are answered as they are. Promotion (ADR-29) takes only a workflow the
instance reports as a pack candidate (409 `not_a_pack_candidate`, nothing written).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from agent_memory.governance.agent_types import AgentType, catalog
from agent_memory.ids import is_ulid
from agent_memory.memory import Memory
from agent_memory.namespace import (
    AGENT_TYPE_PATTERN,
    DEFAULT_INSTANCE,
    INSTANCE_PATTERN,
    AgentScope,
    is_agent_type,
)
from agent_memory.tiers.episodic import (
    DEFAULT_MIN_MEAN,
    DEFAULT_MIN_PULLS,
    Episode,
    Pack,
    RunPage,
    RunRecord,
    RunStatus,
    Workflow,
)
from agent_runtime_do.protocol import MAX_INPUT_CHARS, TASK_TYPE_PATTERN, RunResult
from bindings.environment import Bindings
from http_messages import ApiError
from worker.app import Call, Metadata, StrictModel, Subject

PACK_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


# RunBody repeats RunPayload's fields (agent_runtime_do.protocol, which adds the scope and
# `requested_by`): the object cannot import the edge.
class RunBody(StrictModel):
    """Body of `POST /v1/agents/{tenant}/{agent_type}/run`."""

    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)
    subject: Subject | None = None
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be blank")
        return value


class OutcomeBody(StrictModel):
    """Body of `POST …/runs/{run_id}/outcome`: how well the run went, in [0, 1]."""

    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)


class RunsQuery(StrictModel):
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    status: RunStatus | None = None
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=20, ge=1, le=100)


class WorkflowsQuery(StrictModel):
    instance_id: str = Field(default=DEFAULT_INSTANCE, pattern=INSTANCE_PATTERN)
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)


class CandidatesQuery(WorkflowsQuery):
    # Bounded like a promotion's: the value crosses the Durable Object RPC boundary.
    min_pulls: int = Field(default=20, ge=1, le=1_000_000)
    min_mean: float = Field(default=0.7, ge=0.0, le=1.0)


class PromotePack(StrictModel):
    """Body of a promotion: which instance's workflow, under what pack name."""

    name: str = Field(pattern=PACK_NAME_PATTERN)
    workflow_id: str = Field(min_length=1, max_length=128)
    instance_id: str = Field(pattern=INSTANCE_PATTERN)
    min_pulls: int = Field(default=DEFAULT_MIN_PULLS, ge=1, le=1_000_000)
    min_mean: float = Field(default=DEFAULT_MIN_MEAN, ge=0.0, le=1.0)


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


class PackList(BaseModel):
    packs: list[Pack]


class PackPromoted(BaseModel):
    pack: Pack


class PackDeprecated(BaseModel):
    name: str
    deprecated: int


def agent_type_param(call: Call[Any, Any]) -> AgentType:
    """The route's `{agent_type}` among the deployment's agent types, or 404."""
    name = call.params["agent_type"]
    types = catalog(call.bindings.settings.agent_types)
    found = types.get(name) if is_agent_type(name) else None
    if found is None:
        known = ", ".join(sorted(types))
        raise ApiError(404, "unknown_agent_type", f"no agent type {name!r}; known types: {known}")
    return found


def _run_id(params: dict[str, str]) -> str:
    run_id = params["run_id"]
    if not is_ulid(run_id):
        raise ApiError(404, "run_not_found", f"no run {run_id!r}")
    return run_id


async def call_agent(
    bindings: Bindings, scope: AgentScope, method: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """RPC to the scope's AgentRuntime; an error answer becomes an `ApiError`."""
    if bindings.agents is None:
        raise ApiError(503, "agent_runtime_unavailable", "the AgentRuntime binding is missing")
    stub = bindings.agents.get_by_name(scope.object_name)
    scoped = {"tenant": scope.tenant, "agent_type": scope.agent_type}
    result = await stub.call(method, {**scoped, "instance_id": scope.instance_id, **payload})
    error = result.get("error")
    if isinstance(error, dict):
        raise ApiError(
            int(error.get("status", 500)),
            str(error.get("code", "agent_runtime_error")),
            str(error.get("message", "the agent runtime reported an error")),
        )
    return result


def _scope(call: Call[Any, Any], instance_id: str) -> AgentScope:
    """The instance `instance_id` of the route's tenant and agent type."""
    agent_type = agent_type_param(call).name
    return AgentScope(tenant=call.params["tenant"], agent_type=agent_type, instance_id=instance_id)


async def _candidates(
    bindings: Bindings, scope: AgentScope, task_type: str | None, min_pulls: int, min_mean: float
) -> list[dict[str, Any]]:
    """The instance's workflows ready to pack."""
    options = {"candidates_only": True, "min_pulls": min_pulls, "min_mean": min_mean}
    found = await call_agent(bindings, scope, "workflows", {"task_type": task_type, **options})
    return list(found["workflows"])


# --- runs ---------------------------------------------------------------------------------


async def run_agent(call: Call[RunBody, None]) -> RunResult:
    fields = call.body.model_dump(include={"input", "task_type", "subject", "metadata"})
    payload = {**fields, "requested_by": call.operator.principal}
    result = await call_agent(call.bindings, _scope(call, call.body.instance_id), "run", payload)
    return RunResult.model_validate(result)


async def record_outcome(call: Call[OutcomeBody, None]) -> OutcomeResult:
    scope = _scope(call, call.body.instance_id)
    payload = {"run_id": _run_id(call.params), "score": call.body.score}
    result = await call_agent(call.bindings, scope, "record_outcome", payload)
    return OutcomeResult.model_validate(result)


async def list_runs(call: Call[None, RunsQuery]) -> RunPage:
    memory = await Memory.open(call.bindings, call.params["tenant"])
    return await memory.episodic.list_runs(**call.query.model_dump())  # its fields are the filters


async def get_run(call: Call[None, None]) -> RunDetail:
    tenant, bindings = call.params["tenant"], call.bindings
    run_id = _run_id(call.params)
    store = (await Memory.open(bindings, tenant)).episodic
    run = await store.get_run(run_id)
    if run is None:
        raise ApiError(404, "run_not_found", f"tenant {tenant!r} has no run {run_id!r}")
    scope = AgentScope(tenant=tenant, agent_type=run.agent_type, instance_id=run.instance_id)
    # The run log lives in the instance's Durable Object; asking it also waits (briefly)
    # for the instance's pending episodic writes, so the re-read below is current.
    detail = await call_agent(bindings, scope, "run_log", {"run_id": run_id})
    return RunDetail(
        run=await store.get_run(run_id) or run,
        episodes=await store.episodes_for_run(run_id),
        run_log=detail.get("run_log", []),
        workflow=detail.get("workflow"),
        failed_writes=detail.get("failed_writes", []),
    )


# --- workflows and packs ------------------------------------------------------------------


async def list_workflows(call: Call[None, WorkflowsQuery]) -> Workflows:
    query, agent_type = call.query, agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    found = await memory.workflows(agent_type, query.instance_id, query.task_type)
    return Workflows(instance_id=query.instance_id, workflows=found)


async def pack_candidates(call: Call[None, CandidatesQuery]) -> PackCandidates:
    q = call.query
    scope = _scope(call, q.instance_id)
    found = await _candidates(call.bindings, scope, q.task_type, q.min_pulls, q.min_mean)
    return PackCandidates(
        instance_id=q.instance_id, min_pulls=q.min_pulls, min_mean=q.min_mean, candidates=found
    )


async def list_packs(call: Call[None, None]) -> PackList:
    agent_type = agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    return PackList(packs=await memory.packs.list(agent_type))


async def promote_pack(call: Call[PromotePack, None]) -> PackPromoted:
    body, identity = call.body, call.operator
    scope = _scope(call, body.instance_id)
    packs = (await Memory.open(call.bindings, scope.tenant)).packs
    found = await _candidates(call.bindings, scope, None, body.min_pulls, body.min_mean)
    chosen = next((w for w in found if w["workflow_id"] == body.workflow_id), None)
    if chosen is None:
        raise ApiError(
            409,
            "not_a_pack_candidate",
            f"workflow {body.workflow_id!r} of instance {body.instance_id!r} has fewer than "
            f"{body.min_pulls} pulls or a posterior mean under {body.min_mean}",
        )
    pack = await packs.promote(
        body.name,
        Workflow.model_validate({k: chosen[k] for k in Workflow.model_fields}),
        instance_id=body.instance_id,
        by=identity.email or identity.common_name or "access",
        now_ms=int(call.bindings.clock.now() * 1000),
    )
    return PackPromoted(pack=pack)


async def deprecate_pack(call: Call[None, None]) -> PackDeprecated:
    agent_type, name = agent_type_param(call).name, call.params["name"]
    packs = (await Memory.open(call.bindings, call.params["tenant"])).packs
    changed = await packs.deprecate(agent_type, name, int(call.bindings.clock.now() * 1000))
    if changed == 0:
        raise ApiError(404, "pack_not_found", f"no active pack {name!r} for {agent_type!r}")
    return PackDeprecated(name=name, deprecated=changed)
