"""Durable Object alarm port (`ctx.storage.getAlarm/setAlarm/deleteAlarm`), with Cloudflare's
semantics (durable-objects/api/alarms.mdx): one alarm per object, setting it replaces the
previous time, a past time fires at once, `get_alarm` is None while `alarm()` runs unless it
set a new one, and a handler that raises is retried (2 s backoff, up to 6 times). Times are
epoch seconds (the Clock's unit); adapters convert to milliseconds.
"""

from __future__ import annotations

from typing import Protocol


class AlarmStorage(Protocol):
    async def get_alarm(self) -> float | None:
        """When the alarm is set to fire (epoch seconds), or None."""

    async def set_alarm(self, at: float) -> None:
        """Set (or move) the object's one alarm to `at` (epoch seconds)."""

    async def delete_alarm(self) -> None:
        """Unset the alarm, if one is set."""
