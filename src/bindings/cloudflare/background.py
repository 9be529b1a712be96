"""`BackgroundTasks` over `ctx.waitUntil` (an ExecutionContext or a Durable Object's state).

workerd accepts a Python coroutine in `waitUntil` only from an ExecutionContext (a DO state gets
a borrowed proxy that is destroyed on return: tests/pyodide/py/test_background.py), so the work
runs here as an asyncio task, held until done, and `waitUntil` gets a JS Promise settled by it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from js import Error, Promise
from pyodide.ffi import create_once_callable

log = logging.getLogger(__name__)

_running: set[asyncio.Future[Any]] = set()


class CloudflareBackgroundTasks:
    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(_logged(work))
        _running.add(task)
        task.add_done_callback(_running.discard)
        self._ctx.waitUntil(_promise_settled_by(task))


def _promise_settled_by(task: asyncio.Future[Any]) -> Any:
    """A JS Promise settled when `task` ends (the executor runs synchronously inside
    `new Promise`, so a once-callable proxy is enough)."""

    def executor(resolve: Any, reject: Any) -> None:
        def settle(done: asyncio.Future[Any]) -> None:
            if done.cancelled():
                reject(Error.new("background work was cancelled"))
            elif (failure := done.exception()) is not None:
                reject(Error.new(f"{type(failure).__name__}: {failure}"))
            else:
                resolve()

        task.add_done_callback(settle)

    return Promise.new(create_once_callable(executor))


async def _logged(work: Coroutine[Any, Any, Any]) -> Any:
    # Nobody awaits this after the response: log the traceback so a lost write is not silent.
    try:
        return await work
    except Exception:
        log.exception("background work failed: %s", getattr(work, "__qualname__", work))
        raise
