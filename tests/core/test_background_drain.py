"""`LocalBackgroundTasks.drain` (the local `ctx.waitUntil`) returns once every task is done,
also when a task finished before its done callback ran (the suite hung on Python 3.13: since
3.12, `gather` over finished tasks completes without yielding to the loop)."""

from __future__ import annotations

import asyncio
import threading

from local_runtime.background import LocalBackgroundTasks


def test_drain_returns_when_a_task_finished_before_its_callback_ran() -> None:
    ran: list[str] = []

    async def scenario() -> None:
        background = LocalBackgroundTasks()

        async def work() -> None:
            ran.append("work")

        background.wait_until(work())
        # One turn of the loop: the task runs to its end and schedules its done callback,
        # which has not run yet when drain starts.
        await asyncio.sleep(0)
        await background.drain()
        ran.append("drained")
        assert background.pending == 0

    # In a thread: on the old code drain spins without yielding, so no timeout inside the
    # loop could stop it; the join's timeout is the test's verdict.
    runner = threading.Thread(target=asyncio.run, args=(scenario(),), daemon=True)
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive() and ran == ["work", "drained"]
