"""The lifecycle's cron jobs (`worker.cron.JOBS`).

`weekly_prune`: job `weekly-{ISO week}`, cutoffs fixed at the scheduled time (a retry
continues the job). `daily_brief`: the brief, then within the invocation's budget: resume
an unfinished prune, index pre-0009 facts, write back recall records KV kept, reconcile
every tenant, re-wrap data keys after a KEK rotation. A missing binding is reported, not
raised: a cron has no caller to answer.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from agent_memory.governance.personal_data import DataKeys
from agent_memory.hot_warm_cold import placement_table
from agent_memory.lifecycle.brief import build_brief
from agent_memory.lifecycle.prune import PruneBudget, Pruner, resume_unfinished, weekly_prune_id
from agent_memory.lifecycle.retention import known_tenants
from agent_memory.memory import Memory
from agent_memory.tiers.semantic.keyword_index import ReindexBudget, reindex_pending
from agent_memory.tiers.semantic.recall import MAX_WRITE_BACK, carried_tenants
from bindings.environment import Bindings

log = logging.getLogger(__name__)


REWRAP_BATCH = 500
# Per daily run: ~2 D1 statements per 100 facts (≈ 400 for the total), a fair share per
# tenant, and at most this much of the invocation's time.
REINDEX_BUDGET = ReindexBudget(facts_per_tenant=5_000, facts_total=20_000, max_seconds=300.0)
# Carried-over recall records written back per daily run (two D1 statements each).
WRITE_BACK_PER_RUN = 200


def make_pruner(bindings: Bindings) -> Pruner | None:
    """The pruner over every tenant (or those a call names), None without D1 and R2."""
    if bindings.db is None or bindings.cold is None:
        return None
    settings = bindings.settings
    return Pruner(
        bindings.db,
        bindings.cold,
        bindings.clock,
        default_retention_days=settings.episode_retention_days,
        budget=PruneBudget(
            max_operations=settings.lifecycle_max_operations,
            max_seconds=settings.lifecycle_max_seconds,
            batch_rows=settings.prune_batch_rows,
        ),
        placement=placement_table(bindings),
    )


async def reconcile_all(bindings: Bindings, *, max_seconds: float) -> list[dict[str, Any]]:
    """Reconcile every tenant with facts or episodes until `max_seconds` have passed (the
    rest wait for the next day); one tenant's failure is logged and does not stop others."""
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


async def weekly_prune(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    pruner = make_pruner(bindings)
    if pruner is None:
        return _missing(bindings)
    scheduled_ms = int(scheduled_time * 1000)
    report = await pruner.run(weekly_prune_id(scheduled_ms), scheduled_ms)
    return {
        "ran": True,
        "prune": report.summary(),
        "tenants": [
            t.model_dump(exclude={"archives_now", "episodes_due", "runs_due", "events_due"})
            for t in report.tenants
        ],
    }


async def daily_brief(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    if bindings.db is None:
        return _missing(bindings)
    brief = await build_brief(
        bindings.db,
        now_ms=int(scheduled_time * 1000),
        default_retention_days=bindings.settings.episode_retention_days,
    )
    result: dict[str, Any] = {
        "ran": True,
        "brief": brief.summary(),
        "tenants": [t.model_dump() for t in brief.tenants],
    }
    started = time.monotonic()

    def left() -> float:
        """Seconds of the invocation's lifecycle budget still unspent."""
        return max(0.0, bindings.settings.lifecycle_max_seconds - (time.monotonic() - started))

    pruner = make_pruner(bindings)
    if pruner is not None:
        resumed = await resume_unfinished(pruner)
        result["prune_resumed"] = [r.summary() for r in resumed]
    budget = REINDEX_BUDGET.model_copy(
        update={"max_seconds": min(REINDEX_BUDGET.max_seconds, left())}
    )
    result["reindexed"] = (await reindex_pending(bindings.db, budget)).model_dump()
    result["recall_records_written_back"] = await write_back_recall_records(bindings)
    result["reconciled"] = await reconcile_all(bindings, max_seconds=left())
    result["data_keys_rewrapped"] = await rewrap_data_keys(bindings, max_seconds=left())
    return result


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
            memory = Memory(bindings, tenant).semantic()
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
