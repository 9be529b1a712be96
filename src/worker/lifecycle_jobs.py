"""The lifecycle's cron jobs (registered in `worker.cron.JOBS`).

* `weekly_prune` (`0 3 * * 0`): runs prune job `weekly-{ISO week}` with cutoffs fixed at the
  cron's scheduled time (`agent_memory.prune`). A retried invocation continues the job.
* `daily_brief` (`0 6 * * *`): the per-tenant brief (`agent_memory.brief`), then, with
  the rest of the invocation's budget, resumes a prune job the weekly run could not finish
  and runs the reconciler.

Both return a JSON-able dict (what `wrangler dev`'s scheduled route and the local runtime
print) and log per-tenant lines. A missing binding is reported, not raised: a cron has no
caller to answer.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_memory.brief import build_brief
from agent_memory.prune import PruneBudget, Pruner, resume_unfinished, weekly_prune_id
from bindings.environment import Bindings

log = logging.getLogger(__name__)


def lifecycle_budget(bindings: Bindings) -> PruneBudget:
    settings = bindings.settings
    return PruneBudget(
        max_operations=settings.lifecycle_max_operations,
        max_seconds=settings.lifecycle_max_seconds,
        batch_rows=settings.prune_batch_rows,
    )


def make_pruner(bindings: Bindings) -> Pruner | None:
    if bindings.db is None or bindings.cold is None:
        return None
    return Pruner(
        bindings.db,
        bindings.cold,
        bindings.clock,
        default_retention_days=bindings.settings.episode_retention_days,
        budget=lifecycle_budget(bindings),
    )


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
    pruner = make_pruner(bindings)
    if pruner is not None:
        resumed = await resume_unfinished(pruner)
        result["prune_resumed"] = [r.summary() for r in resumed]
    return result
