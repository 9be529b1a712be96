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
from agent_memory.memory import Memory, RunDetail, call_agent
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
    Pack,
    RunPage,
    RunStatus,
)
from agent_runtime_do.protocol import MAX_INPUT_CHARS, TASK_TYPE_PATTERN, RunResult
from http_messages import ApiError
from worker.routing import Call, Metadata, StrictModel, Subject

PACK_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


# RunBody repeats RunPayload's fields (agent_runtime_do.protocol, which adds the scope and
# `requested_by`): the object cannot import the edge.
class RunBody(StrictModel):
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
    name: str = Field(pattern=PACK_NAME_PATTERN)
    workflow_id: str = Field(min_length=1, max_length=128)
    instance_id: str = Field(pattern=INSTANCE_PATTERN)
    min_pulls: int = Field(default=DEFAULT_MIN_PULLS, ge=1, le=1_000_000)
    min_mean: float = Field(default=DEFAULT_MIN_MEAN, ge=0.0, le=1.0)


class OutcomeResult(BaseModel):
    run_id: str
    workflow: dict[str, Any] | None


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


def _scope(call: Call[Any, Any], instance_id: str) -> AgentScope:
    """The instance `instance_id` of the route's tenant and agent type."""
    agent_type = agent_type_param(call).name
    return AgentScope(tenant=call.params["tenant"], agent_type=agent_type, instance_id=instance_id)


async def run_agent(call: Call[RunBody, None]) -> RunResult:
    fields = call.body.model_dump(include={"input", "task_type", "subject", "metadata"})
    payload = {**fields, "requested_by": call.auth.principal}
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
    memory = await Memory.open(call.bindings, call.params["tenant"])
    return await memory.run_detail(_run_id(call.params))


async def list_workflows(call: Call[None, WorkflowsQuery]) -> Workflows:
    query, agent_type = call.query, agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    found = await memory.workflows(agent_type, query.instance_id, query.task_type)
    return Workflows(instance_id=query.instance_id, workflows=found)


async def pack_candidates(call: Call[None, CandidatesQuery]) -> PackCandidates:
    q, agent_type = call.query, agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    found = await memory.workflows(
        agent_type, q.instance_id, q.task_type, candidates=(q.min_pulls, q.min_mean)
    )
    return PackCandidates(
        instance_id=q.instance_id, min_pulls=q.min_pulls, min_mean=q.min_mean, candidates=found
    )


async def list_packs(call: Call[None, None]) -> PackList:
    agent_type = agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    return PackList(packs=await memory.packs.list(agent_type))


async def promote_pack(call: Call[PromotePack, None]) -> PackPromoted:
    body, who, agent_type = call.body, call.auth, agent_type_param(call).name
    memory = await Memory.open(call.bindings, call.params["tenant"])
    pack = await memory.promote_pack(
        body.name,
        agent_type,
        body.instance_id,
        body.workflow_id,
        candidates=(body.min_pulls, body.min_mean),
        by=who.email or who.common_name or "access",
    )
    return PackPromoted(pack=pack)


async def deprecate_pack(call: Call[None, None]) -> PackDeprecated:
    agent_type, name = agent_type_param(call).name, call.params["name"]
    packs = (await Memory.open(call.bindings, call.params["tenant"])).packs
    changed = await packs.deprecate(agent_type, name, int(call.bindings.clock.now() * 1000))
    if changed == 0:
        raise ApiError(404, "pack_not_found", f"no active pack {name!r} for {agent_type!r}")
    return PackDeprecated(name=name, deprecated=changed)
