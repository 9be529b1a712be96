"""The scheduled handler: maps a cron expression to the job it runs.

Crons are declared in wrangler.toml `[triggers]`; both lists must agree (a test checks).
The jobs' module (`worker.lifecycle_jobs`: prune, brief, reconcile) imports on the first
scheduled event, not at start-up (docs/pyodide.md "Start-up").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bindings.environment import Bindings

log = logging.getLogger(__name__)

WEEKLY_PRUNE = "0 3 * * SUN"
DAILY_BRIEF = "0 6 * * *"

Job = Callable[[Bindings, float], Awaitable[dict[str, Any]]]


async def _not_scheduled(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    return {"ran": False}


async def weekly_prune(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    """`worker.lifecycle_jobs.weekly_prune`, imported when first run."""
    from worker.lifecycle_jobs import weekly_prune as job

    return await job(bindings, scheduled_time)


async def daily_brief(bindings: Bindings, scheduled_time: float) -> dict[str, Any]:
    """`worker.lifecycle_jobs.daily_brief`, imported when first run."""
    from worker.lifecycle_jobs import daily_brief as job

    return await job(bindings, scheduled_time)


JOBS: dict[str, Job] = {WEEKLY_PRUNE: weekly_prune, DAILY_BRIEF: daily_brief}


def register(cron: str, job: Job) -> None:
    JOBS[cron] = job


async def run_scheduled(cron: str, scheduled_time: float, bindings: Bindings) -> dict[str, Any]:
    """Run the job for `cron`. An unknown cron is logged and does nothing."""
    job = JOBS.get(cron)
    if job is None:
        log.warning("scheduled: no job for cron %r", cron)
        return {"cron": cron, "job": None, "result": await _not_scheduled(bindings, scheduled_time)}
    result = await job(bindings, scheduled_time)
    log.info("scheduled: cron %r finished: %s", cron, result)
    return {"cron": cron, "job": getattr(job, "__name__", "job"), "result": result}
