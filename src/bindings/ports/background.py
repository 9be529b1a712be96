"""`ctx.waitUntil`: work that must finish after the response is sent."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol


class BackgroundTasks(Protocol):
    def wait_until(self, work: Coroutine[Any, Any, Any]) -> None:
        """Keep the invocation alive until `work` completes; never blocks the caller."""
