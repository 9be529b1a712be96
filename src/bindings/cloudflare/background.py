"""`bindings.ports.background.BackgroundTasks` over `ctx.waitUntil`.

The SDK patches the entrypoint's `ctx.waitUntil` (`_pyodide_entrypoint_helper.patchWaitUntil`)
so it accepts Python coroutines directly (cheat sheet section 1; SDK `entrypoints.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class CloudflareBackgroundTasks:
    """Implements `BackgroundTasks`: the invocation stays alive until the work finishes."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        self._ctx.waitUntil(_logged(work))


async def _logged(work: Coroutine[Any, Any, Any]) -> Any:
    # After the response nobody awaits this work: an escaping error would only reach the
    # runtime's console. Log it here with its traceback so a lost write is never silent.
    try:
        return await work
    except Exception:
        log.exception("background work failed: %s", getattr(work, "__qualname__", work))
        raise
