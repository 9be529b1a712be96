"""Workflow packs: promote a proven procedural workflow for every agent of a type (ADR-29).

    GET    /admin/tenants/{tenant}/agents/{agent_type}/packs           every pack version
    POST   /admin/tenants/{tenant}/agents/{agent_type}/packs           promote a candidate
    DELETE /admin/tenants/{tenant}/agents/{agent_type}/packs/{name}    deprecate a pack

Promotion asks the named agent instance's Durable Object for its pack candidates (enough
pulls, posterior mean above the threshold) and refuses a workflow that is not one: 409
`not_a_pack_candidate`, nothing written. Access gated (the router checks the token and the
tenant grant first).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.scope import INSTANCE_PATTERN, AgentScope
from agent_memory.tiers.procedural import (
    DEFAULT_MIN_MEAN,
    DEFAULT_MIN_PULLS,
    Pack,
    Workflow,
    WorkflowPacks,
)
from bindings.environment import Bindings
from worker.agents_routes import agent_type_param, call_agent
from worker.errors import ApiError
from worker.router import Call

PACK_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class PromotePack(BaseModel):
    """Body of a promotion: which instance's workflow, under what pack name."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=PACK_NAME_PATTERN)
    workflow_id: str = Field(min_length=1, max_length=128)
    instance_id: str = Field(pattern=INSTANCE_PATTERN)
    min_pulls: int = Field(default=DEFAULT_MIN_PULLS, ge=1, le=1_000_000)
    min_mean: float = Field(default=DEFAULT_MIN_MEAN, ge=0.0, le=1.0)


class PackList(BaseModel):
    packs: list[Pack]


class PackPromoted(BaseModel):
    pack: Pack


class PackDeprecated(BaseModel):
    name: str
    deprecated: int


def _packs(bindings: Bindings, tenant: str) -> WorkflowPacks:
    if bindings.db is None:
        raise ApiError(503, "packs_unavailable", "workflow packs need the D1 binding")
    return WorkflowPacks(bindings.db, tenant)


async def list_packs(call: Call[None, None]) -> PackList:
    tenant, agent_type = call.params["tenant"], agent_type_param(call)
    return PackList(packs=await _packs(call.bindings, tenant).list(agent_type.name))


async def promote_pack(call: Call[PromotePack, None]) -> PackPromoted:
    tenant, agent_type = call.params["tenant"], agent_type_param(call)
    body, bindings, identity = call.body, call.bindings, call.operator
    packs = _packs(bindings, tenant)
    scope = AgentScope(tenant=tenant, agent_type=agent_type.name, instance_id=body.instance_id)
    found = await call_agent(
        bindings,
        scope,
        "workflows",
        {"candidates_only": True, "min_pulls": body.min_pulls, "min_mean": body.min_mean},
    )
    chosen = next((w for w in found["workflows"] if w["workflow_id"] == body.workflow_id), None)
    if chosen is None:
        raise ApiError(
            409,
            "not_a_pack_candidate",
            f"workflow {body.workflow_id!r} of instance {body.instance_id!r} has fewer than "
            f"{body.min_pulls} pulls or a posterior mean under {body.min_mean}",
        )
    workflow = Workflow.model_validate({k: chosen[k] for k in Workflow.model_fields})
    pack = await packs.promote(
        body.name,
        workflow,
        instance_id=body.instance_id,
        by=identity.email or identity.common_name or "access",
        now_ms=int(bindings.clock.now() * 1000),
    )
    return PackPromoted(pack=pack)


async def deprecate_pack(call: Call[None, None]) -> PackDeprecated:
    tenant, agent_type, name = (
        call.params["tenant"],
        agent_type_param(call),
        call.params["name"],
    )
    changed = await _packs(call.bindings, tenant).deprecate(
        agent_type.name, name, int(call.bindings.clock.now() * 1000)
    )
    if changed == 0:
        raise ApiError(404, "pack_not_found", f"no active pack {name!r} for {agent_type.name!r}")
    return PackDeprecated(name=name, deprecated=changed)
