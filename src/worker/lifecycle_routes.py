"""The memory lifecycle's admin routes (Access gated; docs/lifecycle.md, docs/placement.md); 503
when a binding the route needs is missing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.directory import homes, tenant_bindings
from agent_memory.ids import is_ulid, new_ulid
from agent_memory.lifecycle.brief import TenantBrief, build_brief
from agent_memory.lifecycle.erase import EraseReport, validate_subject
from agent_memory.lifecycle.move import MoveStatus, advance, moves, start_move
from agent_memory.lifecycle.prune import TenantPruneCounts
from agent_memory.lifecycle.reconciler import Reconciler, ReconcileReport
from agent_memory.lifecycle.retention import (
    LifecycleUpdate,
    TenantLifecycle,
    get_lifecycle,
    set_lifecycle,
)
from agent_memory.lifecycle.supersession import Change, SupersessionError
from agent_memory.memory import Memory
from agent_memory.namespace import TENANT_PATTERN
from agent_memory.tiers.working import (
    InvalidBackfillCursor,
    NamespaceFlags,
    backfill_namespace,
)
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from bindings.ports.errors import BindingLimitError
from worker.app import Call, StrictModel
from worker.errors import ApiError
from worker.lifecycle_jobs import database_report, make_pruner


class PruneBody(StrictModel):
    dry_run: bool = False


class EmptyBody(StrictModel):
    pass


class BackfillBody(StrictModel):
    dry_run: bool = False
    cursor: str | None = Field(default=None, min_length=1, max_length=1024)
    max_keys: int = Field(default=250, ge=1, le=1000)
    # The migration to one working memory per agent type (issue 25) instead of the copy of
    # legacy keys to canonical ones; run it to completion once after upgrading.
    agent_types: bool = False


class LifecycleSettingsView(BaseModel):
    settings: TenantLifecycle


class LifecycleView(LifecycleSettingsView):
    brief: TenantBrief


class PruneView(BaseModel):
    prune: dict[str, Any]
    tenants: list[TenantPruneCounts]


class EraseView(EraseReport):
    erased_by: str


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


async def _tenant(call: Call[Any, Any]) -> tuple[str, Bindings]:
    """The path's tenant and the bindings of its shard (the directory, as `Memory.open`)."""
    tenant = call.params["tenant"]
    return tenant, await tenant_bindings(call.bindings, tenant)


def _db(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise ApiError(503, "lifecycle_unavailable", "the D1 binding is missing")
    return bindings.db


async def get_tenant_lifecycle(call: Call[None, None]) -> LifecycleView:
    tenant, bindings = await _tenant(call)
    db = _db(bindings)
    days = bindings.settings.episode_retention_days
    settings = await get_lifecycle(db, tenant, days)
    now_ms = int(bindings.clock.now() * 1000)
    brief = await build_brief(db, now_ms=now_ms, default_retention_days=days, tenants=[tenant])
    return LifecycleView(settings=settings, brief=brief.tenants[0])


async def put_tenant_lifecycle(call: Call[LifecycleUpdate, None]) -> LifecycleSettingsView:
    tenant, bindings = await _tenant(call)
    settings = await set_lifecycle(
        _db(bindings),
        tenant,
        call.body,
        default_days=bindings.settings.episode_retention_days,
        now_ms=int(bindings.clock.now() * 1000),
        updated_by=call.operator.principal,
    )
    return LifecycleSettingsView(settings=settings)


async def prune_tenant(call: Call[PruneBody, None]) -> PruneView:
    tenant, bindings = await _tenant(call)
    pruner = make_pruner(bindings)
    if pruner is None:
        raise ApiError(503, "lifecycle_unavailable", "the prune needs the DB and COLD bindings")
    now_ms = int(bindings.clock.now() * 1000)
    if call.body.dry_run:
        report = await pruner.dry_run(now_ms, tenants=[tenant])
    else:
        job = f"manual-{new_ulid(now_ms / 1000)}"
        report = await pruner.run(job, now_ms, tenants=[tenant])
    return PruneView(prune=report.summary(), tenants=report.tenants)


async def reconcile_tenant(call: Call[EmptyBody, None]) -> ReconcileReport:
    return await (await _reconciler(call)).run()


class SupersessionView(BaseModel):
    """An undone or replayed supersession: `fact_id` lost to `superseded_by`; `event_id`
    is the event recording the change, `by` the operator."""

    fact_id: str
    superseded_by: str
    event_id: str
    by: str


async def _reconciler(call: Call[Any, Any]) -> Reconciler:
    reconciler = (await Memory.open(call.bindings, call.params["tenant"])).reconciler()
    if reconciler is None:
        needs = "the reconciler needs the DB and VECTORIZE bindings and an embedder"
        raise ApiError(503, "lifecycle_unavailable", needs)
    return reconciler


async def _supersession(
    call: Call[EmptyBody, None],
    param: str,
    act: Callable[[Reconciler, str, str], Awaitable[Change]],
) -> SupersessionView:
    """Undo or replay through the tenant's reconciler; its refusals as their API errors."""
    value = call.params[param]
    if not is_ulid(value):
        raise ApiError(422, "invalid_path", f"{param} must be a 26-character ULID")
    try:
        change = await act((await _reconciler(call)), value, call.operator.principal)
    except SupersessionError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    return SupersessionView(**asdict(change))


async def restore_fact(call: Call[EmptyBody, None]) -> SupersessionView:
    return await _supersession(call, "fact_id", lambda r, fact, by: r.undo(fact, by))


async def replay_supersession(call: Call[EmptyBody, None]) -> SupersessionView:
    return await _supersession(call, "event_id", lambda r, event, by: r.replay(event, by))


async def erase_subject(call: Call[None, None]) -> EraseView:
    tenant = call.params["tenant"]
    try:
        subject = validate_subject(call.params["subject"])
    except ValueError as exc:
        raise ApiError(422, "invalid_path", str(exc)) from None
    report = await (await Memory.open(call.bindings, tenant)).eraser().erase(subject)
    if not report.complete:
        # Some tier failed; what was removed is in the details. Repeating the DELETE
        # finishes the job (every step is idempotent).
        raise ApiError(
            502,
            "erase_incomplete",
            "the erase did not finish in every tier; repeat the request",
            report.model_dump(),
        )
    return EraseView(**report.model_dump(), erased_by=call.operator.principal)


async def backfill_tenant_namespace(call: Call[BackfillBody, None]) -> BackfillView:
    """One bounded step of the namespace backfill; repeat with `next_cursor` until null."""
    tenant, body, bindings = call.params["tenant"], call.body, call.bindings
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    step = body.model_dump(exclude={"agent_types"})
    try:
        if body.agent_types:
            report = await (await Memory.open(bindings, tenant)).adopt_untyped_working(**step)
        else:
            report = await backfill_namespace(bindings.kv, bindings.clock, tenant=tenant, **step)
    except (BindingLimitError, InvalidBackfillCursor):
        raise ApiError(422, "invalid_cursor", "cursor is not one this route returned") from None
    return BackfillView(
        tenant=tenant, phase=NamespaceFlags.of(bindings.settings).phase, **asdict(report)
    )


# -- tenant placement (issue 29, docs/placement.md): platform admins only (no {tenant}) -----


class MoveBody(StrictModel):
    tenant: str = Field(pattern=TENANT_PATTERN)
    to: str = Field(min_length=1, max_length=32)


class MoveTenant(StrictModel):
    tenant: str = Field(pattern=TENANT_PATTERN)


class MoveList(BaseModel):
    moves: list[MoveStatus]


class ShardView(BaseModel):
    shard: str
    bytes: int | None
    max_bytes: int
    used: float | None
    vectors: int | None
    max_vectors: int
    tenants: int
    warnings: list[str]


class ShardsView(BaseModel):
    shards: list[ShardView]


async def list_shards(call: Call[None, None]) -> ShardsView:
    """Each shard's database size and vector count against their limits, and how many
    tenants the directory places there."""
    placed = await homes(call.bindings)
    report = await database_report(call.bindings)
    counts = {d["shard"]: sum(1 for s in placed.values() if s == d["shard"]) for d in report}
    return ShardsView(shards=[ShardView(**d, tenants=counts[d["shard"]]) for d in report])


async def start_tenant_move(call: Call[MoveBody, None]) -> MoveStatus:
    """Start moving a tenant to another shard and take its first bounded step."""
    await start_move(call.bindings, call.body.tenant, call.body.to)
    return await advance(call.bindings, call.body.tenant)


async def list_tenant_moves(call: Call[None, None]) -> MoveList:
    return MoveList(moves=await moves(call.bindings))


async def advance_tenant_move(call: Call[MoveTenant, None]) -> MoveStatus:
    """One more bounded step of a tenant's move (after a crash, too)."""
    return await advance(call.bindings, call.body.tenant)
