"""The scheduled handler: cron expression -> job (also in wrangler.toml `[triggers]`; a test checks
both agree). Jobs import on the first scheduled event, not at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bindings.environment import Bindings
from worker.routing import LazyHandler

log = logging.getLogger(__name__)
WEEKLY_PRUNE = "0 3 * * SUN"
DAILY_BRIEF = "0 6 * * *"
# Tenant moves step every minute, so a fenced tenant waits minutes, not days (lifecycle.move).
MOVE_STEPS = "* * * * *"
Job = Callable[[Bindings, float], Awaitable[dict[str, Any]]]
JOBS: dict[str, Job | LazyHandler] = {
    WEEKLY_PRUNE: LazyHandler("worker.lifecycle_jobs:weekly_prune"),
    DAILY_BRIEF: LazyHandler("worker.lifecycle_jobs:daily_brief"),
    MOVE_STEPS: LazyHandler("worker.lifecycle_jobs:move_steps"),
}


async def run_scheduled(cron: str, scheduled_time: float, bindings: Bindings) -> dict[str, Any]:
    """Run the job for `cron`. An unknown cron is logged and does nothing."""
    job = JOBS.get(cron)
    if job is None:
        log.warning("scheduled: no job for cron %r", cron)
        return {"cron": cron, "job": None, "result": {"ran": False}}
    run: Job = job.resolve() if isinstance(job, LazyHandler) else job
    result = await run(bindings, scheduled_time)
    log.info("scheduled: cron %r finished: %s", cron, result)
    return {"cron": cron, "job": getattr(run, "__name__", "job"), "result": result}
