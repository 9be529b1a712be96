"""The memory lifecycle at the edge: its admin routes (Access gated; docs/lifecycle.md,
docs/placement.md; 503 for a missing binding) and its cron jobs (`worker.cron.JOBS`), which run
over every shard in turn, each within its share of the budget (`_Shares`), and report a missing
binding (a cron has no caller to answer). `weekly_prune` fixes its cutoffs at the scheduled time
(a retry continues the job); `daily_brief` adds the bounded daily upkeep after the brief.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.directory import (
    all_shards,
    control_db,
    homes,
    on_shard,
    primary_db,
    shard_usage,
)
from agent_memory.governance.feed import forget_feed_history
from agent_memory.governance.personal_data import DataKeys
from agent_memory.lifecycle.brief import TenantBrief, build_brief
from agent_memory.lifecycle.erase import EraseReport
from agent_memory.lifecycle.move import (
    FINISHED,
    MoveBudget,
    MoveStatus,
    advance,
    cancel_move,
    moves,
    recheck_move,
    start_move,
)
from agent_memory.lifecycle.portability import (
    EXPORT_STEP_SECONDS,
    expire_exports,
    running_exports,
)
from agent_memory.lifecycle.prune import (
    TenantPruneCounts,
    pruner_for,
    resume_unfinished,
    weekly_prune_id,
)
from agent_memory.lifecycle.reconciler import Change, Reconciler, ReconcileReport
from agent_memory.lifecycle.retention import (
    LifecycleUpdate,
    TenantLifecycle,
    known_tenants,
)
from agent_memory.memory import Memory
from agent_memory.namespace import TENANT_PATTERN
from agent_memory.tiers.semantic.recall import MAX_WRITE_BACK, carried_tenants
from agent_memory.tiers.working import BackfillReport, NamespaceFlags, backfill_namespace
from bindings.environment import Bindings
from bindings.ports.vectorize import VECTORIZE_MAX_VECTORS
from http_messages import ApiError
from worker.oauth.protocol import finish_revocations
from worker.oauth.protocol import sweep as oauth_sweep
from worker.routing import Call, StrictModel

log = logging.getLogger(__name__)


REWRAP_BATCH = 500
DATABASE_WARN_AT = 0.8  # the brief warns when a database or index is this full
# Carried-over recall records written back per daily run (two D1 statements each).
WRITE_BACK_PER_RUN = 200
FEED_HISTORY_MS = 14 * 86_400_000


def shard_views(bindings: Bindings) -> list[Bindings]:
    """`bindings` narrowed to each shard with a database, the primary first: every job runs
    over each of them, since each holds its own tenants' rows."""
    return [on_shard(bindings, s.name) for s in all_shards(bindings) if s.db is not None]


def merged(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-shard summaries as one: counts summed, flags all-true, lists joined, the rest the
    first shard's."""
    out: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            if key not in out:
                out[key] = value
            elif isinstance(value, bool):
                out[key] = out[key] and value
            elif isinstance(value, int | float):
                out[key] = out[key] + value
            elif isinstance(value, list):
                out[key] = [*out[key], *value]
    return out


async def reconcile_all(bindings: Bindings, *, max_seconds: float) -> list[dict[str, Any]]:
    """Reconcile every tenant of `bindings`' database with facts or episodes until
    `max_seconds` have passed (the rest wait for the next day); one tenant's failure is
    logged and does not stop others."""
    if bindings.db is None:
        return []
    started = time.monotonic()
    out: list[dict[str, Any]] = []
    for tenant in await known_tenants(bindings.db, ("semantic_facts", "memory_episodes")):
        if time.monotonic() - started >= max_seconds:
            log.warning("reconcile: out of time; %s and later tenants wait a day", tenant)
            break
        reconciler = Memory(bindings, tenant).reconciler()
        if reconciler is None:
            break
        try:
            report = await reconciler.run()
        except Exception as exc:
            log.exception("reconcile: tenant %s failed", tenant)
            out.append({"tenant_id": tenant, "error": f"{type(exc).__name__}: {exc}"})
            continue
        out.append(report.model_dump(exclude={"merges", "conflicts", "new_fact_ids", "decisions"}))
    return out


def _missing(bindings: Bindings) -> dict[str, Any]:
    missing = [name for name, ok in (("DB", bindings.db), ("COLD", bindings.cold)) if ok is None]
    log.error("lifecycle: cannot run without the %s binding(s)", ", ".join(missing))
    return {"ran": False, "missing_bindings": missing}


class _Shares:
    """The invocation's lifecycle budget dealt out over the shards in turn: each gets an equal
    part of what is left, and what it gives back unspent (`refund`) goes to the next. A share
    counts as spent until refunded, so the shards together never exceed the budget."""

    def __init__(self, bindings: Bindings, count: int) -> None:
        self.operations = bindings.settings.lifecycle_max_operations
        self.deadline = time.monotonic() + bindings.settings.lifecycle_max_seconds
        self.left = count

    def next(self) -> tuple[int, float]:
        operations = self.operations // max(1, self.left)
        seconds = max(0.0, self.deadline - time.monotonic()) / max(1, self.left)
        self.operations -= operations
        self.left -= 1
        return operations, seconds

    def refund(self, share: int, spent: int) -> None:
        self.operations += max(0, share - spent)


async def weekly_prune(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    views = shard_views(bindings)
    if not views or bindings.cold is None:
        return _missing(bindings)
    scheduled_ms = int(scheduled_time * 1000)
    shares = _Shares(bindings, len(views))
    summaries: dict[str, dict[str, Any]] = {}
    tenants: list[dict[str, Any]] = []
    for view in views:
        share = shares.next()
        pruner = pruner_for(view, share)
        assert pruner is not None
        report = await pruner.run(weekly_prune_id(scheduled_ms), scheduled_ms)
        shares.refund(share[0], report.operations)
        summaries[str(view.shard)] = report.summary()
        tenants += [
            t.model_dump(exclude={"archives_now", "episodes_due", "runs_due", "events_due"})
            for t in report.tenants
        ]
    prune = merged(list(summaries.values()))
    return {"ran": True, "prune": {**prune, "shards": summaries}, "tenants": tenants}


async def daily_brief(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    views = shard_views(bindings)
    if not views:
        return _missing(bindings)
    now_ms, days = int(scheduled_time * 1000), bindings.settings.episode_retention_days
    briefs = [
        await build_brief(view.db, now_ms=now_ms, default_retention_days=days)
        for view in views
        if view.db is not None
    ]
    databases = await database_report(bindings)
    warnings = [w for d in databases for w in d.pop("warnings")]
    # Moves are advanced by the minute cron (`move_steps`); the brief lists the unfinished and
    # warns of the stopped (a check that found rows differing waits for an operator).
    unfinished = [
        m
        for m in (await moves(bindings) if len(all_shards(bindings)) > 1 else [])
        if m.phase not in FINISHED
    ]
    warnings += [
        f"move of tenant {m.tenant_id} ({m.phase}): {m.error}" for m in unfinished if m.error
    ]
    summary = merged([b.summary() for b in briefs])
    shares = _Shares(bindings, len(views))
    resumed: list[dict[str, Any]] = []
    reconciled: list[dict[str, Any]] = []
    rewrapped: dict[str, int] = {}
    for view in views:
        operations, seconds = shares.next()
        deadline = time.monotonic() + seconds  # of this shard's share (both stop when past it)
        pruner = pruner_for(view, (operations, seconds))
        spent = 0
        if pruner is not None:
            reports = await resume_unfinished(pruner)  # they share one meter: the last counts all
            spent = max((r.operations for r in reports), default=0)
            resumed += [r.summary() for r in reports]
        shares.refund(operations, spent)
        reconciled += await reconcile_all(view, max_seconds=deadline - time.monotonic())
        rewrapped |= await rewrap_data_keys(view, max_seconds=deadline - time.monotonic())
    return {
        "ran": True,
        "brief": {**summary, "warnings": [*summary.get("warnings", []), *warnings]},
        "databases": databases,
        "tenants": [t.model_dump() for b in briefs for t in b.tenants],
        "prune_resumed": resumed,
        "recall_records_written_back": await write_back_recall_records(bindings),
        "reconciled": reconciled,
        "data_keys_rewrapped": rewrapped,
        "oauth_rows_swept": await oauth_sweep(bindings) if bindings.kv is not None else 0,
        "exports_expired": await _expire_exports(bindings, now_ms),
        "moves": [
            {"tenant_id": m.tenant_id, "phase": m.phase, "error": m.error} for m in unfinished
        ],
    }


async def database_report(bindings: Bindings) -> list[dict[str, Any]]:
    """Each shard's D1 size against `D1_DATABASE_MAX_BYTES` (warning at 80 %) and its
    index's vector count against Vectorize's 10M; a shard that does not answer is reported
    as unknown, not raised."""
    usage = await shard_usage(bindings)
    limit = bindings.settings.d1_database_max_bytes
    out: list[dict[str, Any]] = []
    for shard in all_shards(bindings):
        size, vectors = usage[shard.name].bytes, usage[shard.name].vectors
        used = None if size is None else size / limit
        warnings = []
        if used is not None and used >= DATABASE_WARN_AT:
            warnings.append(
                f"shard {shard.name}: D1 database at {used:.0%} of {limit} bytes; add a shard "
                "(MEMORY_SHARDS) and move tenants to it"
            )
        if vectors is not None and vectors >= DATABASE_WARN_AT * VECTORIZE_MAX_VECTORS:
            warnings.append(f"shard {shard.name}: {vectors} vectors of {VECTORIZE_MAX_VECTORS}")
        out.append(
            {
                "shard": shard.name,
                "bytes": size,
                "max_bytes": limit,
                "used": None if used is None else round(used, 4),
                "vectors": vectors,
                "max_vectors": VECTORIZE_MAX_VECTORS,
                "warnings": warnings,
            }
        )
    return out


async def advance_moves(
    bindings: Bindings, budget: MoveBudget | None = None
) -> list[dict[str, Any]]:
    """Carry one unfinished tenant move a bounded step (`budget`, default `MOVE_STEP_CALLS`), so an
    operator's move goes on even if nobody watches it: a fenced move first (its tenant's
    writes wait on it), else the one advanced longest ago. One move a call because a Worker
    invocation allows 1,000 D1 queries, about what one step spends; the minute cron
    (`worker.cron.MOVE_STEPS`) takes turns among several. A failure is logged and reported."""
    if primary_db(bindings) is None or len(all_shards(bindings)) < 2:
        return []
    # (a move whose check found differences waits for an operator)
    waiting = [
        m for m in await moves(bindings) if m.phase not in FINISHED and not m.stopped_by_check
    ]
    if not waiting:
        return []
    move = min(waiting, key=lambda m: (m.phase != "fenced", m.updated_at, m.tenant_id))
    try:
        status = await advance(bindings, move.tenant_id, budget)
        return [{"tenant_id": move.tenant_id, "phase": status.phase}]
    except Exception as exc:
        if isinstance(exc, ApiError) and exc.code == "move_busy":
            # An operator's advance is carrying it right now: nothing to do here.
            return [{"tenant_id": move.tenant_id, "phase": move.phase, "busy": True}]
        log.exception("move: tenant %s failed to advance", move.tenant_id)
        return [{"tenant_id": move.tenant_id, "error": f"{type(exc).__name__}: {exc}"}]


async def move_steps(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    """The minute cron: one step of a tenant move (`advance_moves`), and the access tokens
    of OAuth grants revoked by SQL alone ended (`finish_revocations`); two queries when
    there is nothing to do."""
    oauth = bindings.db is not None and bindings.kv is not None
    ended = await finish_revocations(bindings) if oauth else 0
    report = {"ran": True, "moves": await advance_moves(bindings)}
    exported = await advance_exports(bindings) if bindings.db is not None else []
    return (
        report
        | ({"oauth_tokens_ended": ended} if ended else {})
        | ({"exports": exported} if exported else {})
    )


async def advance_exports(bindings: Bindings) -> list[dict[str, Any]]:
    """One bounded step of the unfinished export advanced longest ago (docs/portability.md):
    an export nobody watches finishes by itself. A failure is logged and reported."""
    out = []
    for tenant, job_id in await running_exports(control_db(bindings)):
        try:
            exporter = (await Memory.open(bindings, tenant)).exporter()
            job = await exporter.advance(job_id, max_seconds=EXPORT_STEP_SECONDS)
            out.append({"tenant_id": tenant, "job_id": job_id, "status": job.status})
        except Exception as exc:
            log.exception("export %s/%s: step failed", tenant, job_id)
            out.append({"tenant_id": tenant, "job_id": job_id, "error": f"{exc}"})
    return out


async def write_back_recall_records(bindings: Bindings) -> dict[str, int]:
    """Write the recall records D1 refused (kept in KV by `recall_record`) back to D1, up to
    `WRITE_BACK_PER_RUN` in all; the count per tenant that had any. A tenant whose write-back
    fails is logged and keeps its records for the next run or its next recall."""
    if bindings.db is None or bindings.vectors is None or bindings.kv is None:
        return {}
    done: dict[str, int] = {}
    left = WRITE_BACK_PER_RUN
    for tenant in await carried_tenants(bindings.kv):
        if left <= 0:
            break
        try:
            memory = (await Memory.open(bindings, tenant)).semantic()
            count = await memory.write_back_recall_records(min(left, MAX_WRITE_BACK))
        except Exception:
            log.exception("recall records: writing back tenant %s failed", tenant)
            continue
        done[tenant] = count
        left -= count
    return done


async def rewrap_data_keys(bindings: Bindings, *, max_seconds: float) -> dict[str, int]:
    """KEK rotation (docs/personal-data.md): re-wrap every tenant's data keys that are not
    under the newest key of `MEMORY_PII_KEKS`, 500 at a time, until done or `max_seconds`
    have passed (the rest wait a day). Returns the count per tenant that had any."""
    keks = bindings.settings.pii_keks
    if bindings.db is None or bindings.cipher is None or keks is None:
        return {}
    started = time.monotonic()
    done: dict[str, int] = {}
    for tenant in await known_tenants(bindings.db, ("subject_data_keys",)):
        keys = DataKeys(
            tenant, db=bindings.db, cipher=bindings.cipher, keks=keks, clock=bindings.clock
        )
        while time.monotonic() - started < max_seconds:
            count = await keys.rewrap(limit=REWRAP_BATCH)
            if count:
                done[tenant] = done.get(tenant, 0) + count
            if count < REWRAP_BATCH:
                break
    return done


async def _expire_exports(bindings: Bindings, now_ms: int) -> int:
    """Exports past their expiry lose their parts; delivery records and erasure marks older
    than the feed queue's retention (14 days) go."""
    control = primary_db(bindings)
    if control is None:
        return 0
    await forget_feed_history(control, now_ms - FEED_HISTORY_MS)
    return 0 if bindings.cold is None else await expire_exports(control, bindings.cold, now_ms)


class PruneBody(StrictModel):
    dry_run: bool = False


class EmptyBody(StrictModel):
    pass


class BackfillBody(StrictModel):
    dry_run: bool = False
    cursor: str | None = Field(default=None, min_length=1, max_length=1024)
    max_keys: int = Field(default=250, ge=1, le=1000)


class LifecycleSettingsView(BaseModel):
    settings: TenantLifecycle


class LifecycleView(LifecycleSettingsView):
    brief: TenantBrief


class PruneView(BaseModel):
    prune: dict[str, Any]
    tenants: list[TenantPruneCounts]


class EraseView(EraseReport):
    erased_by: str


class BackfillView(BackfillReport):
    tenant: str
    phase: str


async def _memory(call: Call[Any, Any]) -> Memory:
    return await Memory.open(call.bindings, call.params["tenant"])


async def get_tenant_lifecycle(call: Call[None, None]) -> LifecycleView:
    memory = await _memory(call)
    return LifecycleView(settings=await memory.lifecycle(), brief=await memory.brief())


async def put_tenant_lifecycle(call: Call[LifecycleUpdate, None]) -> LifecycleSettingsView:
    settings = await (await _memory(call)).lifecycle(call.body, by=call.auth.principal)
    return LifecycleSettingsView(settings=settings)


async def prune_tenant(call: Call[PruneBody, None]) -> PruneView:
    report = await (await _memory(call)).prune(dry_run=call.body.dry_run)
    return PruneView(prune=report.summary(), tenants=report.tenants)


async def reconcile_tenant(call: Call[EmptyBody, None]) -> ReconcileReport:
    return await (await _reconciler(call)).run()


class SupersessionView(Change):
    """An undone or replayed supersession."""


async def _reconciler(call: Call[Any, Any]) -> Reconciler:
    reconciler = (await _memory(call)).reconciler()
    if reconciler is None:
        needs = "the reconciler needs the DB and VECTORIZE bindings and an embedder"
        raise ApiError(503, "lifecycle_unavailable", needs)
    return reconciler


async def restore_fact(call: Call[EmptyBody, None]) -> SupersessionView:
    change = await (await _reconciler(call)).undo(call.params["fact_id"], call.auth.principal)
    return SupersessionView(**change.model_dump())


async def replay_supersession(call: Call[EmptyBody, None]) -> SupersessionView:
    change = await (await _reconciler(call)).replay(call.params["event_id"], call.auth.principal)
    return SupersessionView(**change.model_dump())


async def erase_subject(call: Call[None, None]) -> EraseView:
    report = await (await _memory(call)).eraser().erase(call.params["subject"])
    if not report.complete:
        # Some tier failed; what was removed is in the details. Repeating the DELETE
        # finishes the job (every step is idempotent).
        raise ApiError(
            502,
            "erase_incomplete",
            "the erase did not finish in every tier; repeat the request",
            report.model_dump(),
        )
    return EraseView(**report.model_dump(), erased_by=call.auth.principal)


async def backfill_tenant_namespace(call: Call[BackfillBody, None]) -> BackfillView:
    """One bounded step of the namespace backfill; repeat with `next_cursor` until null."""
    tenant, body, bindings = call.params["tenant"], call.body, call.bindings
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    report = await backfill_namespace(
        bindings.kv, bindings.clock, tenant=tenant, **body.model_dump()
    )
    return BackfillView(
        tenant=tenant, phase=NamespaceFlags.of(bindings.settings).phase, **report.model_dump()
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
    placed = await homes(call.bindings)
    report = await database_report(call.bindings)
    counts = {d["shard"]: sum(1 for s in placed.values() if s == d["shard"]) for d in report}
    return ShardsView(shards=[ShardView(**d, tenants=counts[d["shard"]]) for d in report])


async def start_tenant_move(call: Call[MoveBody, None]) -> MoveStatus:
    await start_move(call.bindings, call.body.tenant, call.body.to)
    return await advance(call.bindings, call.body.tenant)


async def list_tenant_moves(call: Call[None, None]) -> MoveList:
    return MoveList(moves=await moves(call.bindings))


async def advance_tenant_move(call: Call[MoveTenant, None]) -> MoveStatus:
    return await advance(call.bindings, call.body.tenant)


async def cancel_tenant_move(call: Call[MoveTenant, None]) -> MoveStatus:
    return await cancel_move(call.bindings, call.body.tenant)


async def recheck_tenant_move(call: Call[MoveTenant, None]) -> MoveStatus:
    return await recheck_move(call.bindings, call.body.tenant)
