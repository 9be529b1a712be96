"""Durable Object alarms for the local runtime: the table of every object's alarm, and
`LocalAlarms`, one object's view of it (`bindings.ports.do_sql.AlarmStorage`).

Cloudflare's documented semantics (durable-objects/api/alarms): one alarm per object, which
`set_alarm` replaces; durable (a SQLite file), so a restarted `agent-memory dev` still fires
it; one at or before now is due at once; once it fires it is no longer set unless the handler
sets a new one; a handler that raises is retried with exponential backoff, 2 s first, up to 6
retries, keeping a new alarm the failed handler set if it is earlier. Firing is the namespace's
(`local_runtime.durable_objects`), from the dev server's loop or a test's clock.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from pathlib import Path

MAX_RETRIES = 6
FIRST_RETRY_SECONDS = 2.0


class AlarmTable:
    """Every object's alarm: `alarms(object_id, scheduled_ms, retry_count)`."""

    def __init__(self, path: str | Path | None) -> None:
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            isolation_level=None,
            check_same_thread=False,
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS alarms (object_id TEXT PRIMARY KEY, "
            "scheduled_ms INTEGER NOT NULL, retry_count INTEGER NOT NULL DEFAULT 0)"
        )
        self._guard = threading.Lock()

    def for_object(self, object_id: str) -> LocalAlarms:
        return LocalAlarms(self, object_id)

    def get(self, object_id: str) -> float | None:
        with self._guard:
            row = self._db.execute(
                "SELECT scheduled_ms FROM alarms WHERE object_id = ?", (object_id,)
            ).fetchone()
        return None if row is None else int(row[0]) / 1000.0

    def set(self, object_id: str, at: float, *, retry_count: int = 0) -> None:
        if not math.isfinite(at):
            raise ValueError(f"an alarm time must be a finite number of seconds, not {at!r}")
        with self._guard:
            self._db.execute(
                "INSERT INTO alarms (object_id, scheduled_ms, retry_count) VALUES (?, ?, ?) "
                "ON CONFLICT (object_id) DO UPDATE SET scheduled_ms = excluded.scheduled_ms, "
                "retry_count = excluded.retry_count",
                (object_id, math.ceil(at * 1000.0), retry_count),
            )

    def delete(self, object_id: str) -> None:
        with self._guard:
            self._db.execute("DELETE FROM alarms WHERE object_id = ?", (object_id,))

    def due(self, now: float) -> list[tuple[str, int]]:
        """Objects whose alarm is due at `now`, earliest first, with their retry counts."""
        with self._guard:
            rows = self._db.execute(
                "SELECT object_id, retry_count FROM alarms WHERE scheduled_ms <= ? "
                "ORDER BY scheduled_ms, object_id",
                (now * 1000.0,),
            ).fetchall()
        return [(str(object_id), int(retries)) for object_id, retries in rows]

    def finish(self, object_id: str, *, failed: bool, retry_count: int, now: float) -> None:
        """The handler ended; a failed one is retried with backoff (up to MAX_RETRIES)."""
        if not failed or retry_count >= MAX_RETRIES:
            return
        retry_at = now + FIRST_RETRY_SECONDS * 2**retry_count
        current = self.get(object_id)
        if current is None or retry_at < current:
            self.set(object_id, retry_at, retry_count=retry_count + 1)

    def close(self) -> None:
        self._db.close()


class LocalAlarms:
    """Implements `bindings.ports.do_sql.AlarmStorage` for one object."""

    def __init__(self, table: AlarmTable, object_id: str) -> None:
        self._table = table
        self.object_id = object_id

    async def get_alarm(self) -> float | None:
        return self._table.get(self.object_id)

    async def set_alarm(self, at: float) -> None:
        self._table.set(self.object_id, at)

    async def delete_alarm(self) -> None:
        self._table.delete(self.object_id)
