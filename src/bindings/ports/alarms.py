"""Durable Object alarm port: `ctx.storage.getAlarm/setAlarm/deleteAlarm`.

Semantics follow Cloudflare's (cloudflare-docs `durable-objects/api/alarms.mdx` and the
storage API partial `api-storage-alarms.mdx`): one alarm per object; setting it replaces
the previous time; a time at or before now fires "in the immediate future"; while the
`alarm()` handler runs, `get_alarm` answers None unless the handler set a new one; a
handler that raises is retried with exponential backoff (2 s first, up to 6 retries).
Times here are epoch seconds (the Clock port's unit); adapters convert to milliseconds.
"""

from __future__ import annotations

from typing import Protocol


class AlarmStorage(Protocol):
    async def get_alarm(self) -> float | None:
        """When the alarm is set to fire (epoch seconds), or None."""
        ...

    async def set_alarm(self, at: float) -> None:
        """Set (or move) the object's one alarm to `at` (epoch seconds)."""
        ...

    async def delete_alarm(self) -> None:
        """Unset the alarm, if one is set."""
        ...
