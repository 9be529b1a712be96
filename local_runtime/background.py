"""`ctx.waitUntil` for the local runtime: tasks that outlive the response."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class LocalBackgroundTasks:
    """Runs each coroutine as a task after the response; `drain()` waits for all of them.

    Like Cloudflare, a failure inside the work is the work's own business (it must log or
    retry); here an escaped exception is logged so it is never silent.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every task (including tasks those tasks start) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
            # A finished task leaves the set in its done callback, which runs on a later turn
            # of the loop; since Python 3.12, gather over finished tasks completes without
            # yielding, so without this the loop would never get that turn.
            await asyncio.sleep(0)
