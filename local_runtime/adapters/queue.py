"""Cloudflare Queues for the local runtime: messages in `queues.sqlite` of the state folder,
so what was sent survives a restart, as on Cloudflare.

The documented semantics (queues/configuration/batching-retries, dead-letter-queues), compared
with workerd's own queues in tests/miniflare/test_queues_on_workerd.py: a retry's delay keeps a
message invisible until due; a consumer gets up to `max_batch_size` due messages, oldest first,
with `attempts` (1 on the first delivery), and acks or retries each (a consumer that raises
retries the whole batch); past `max_retries` a message goes to the `dead_letter_queue`, or is
dropped. Consumer settings come from wrangler.toml's `[[queues.consumers]]` (`consumer_settings`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bindings.ports.clock import Clock
from bindings.ports.queue import QueueMessage, check_batch

# A message id -> None (ack) or seconds to wait before the next attempt (retry).
Verdicts = Mapping[str, int | None]
Consumer = Callable[[str, list[QueueMessage]], Awaitable[Verdicts]]


@dataclass(frozen=True)
class ConsumerSettings:
    """One `[[queues.consumers]]` entry (its documented defaults where a key is absent)."""

    max_batch_size: int = 10
    max_retries: int = 3
    retry_delay: int = 0
    dead_letter_queue: str | None = None


def consumer_settings(config: Mapping[str, Any]) -> dict[str, ConsumerSettings]:
    """Each consumed queue's settings from a parsed wrangler.toml."""
    out: dict[str, ConsumerSettings] = {}
    for entry in config.get("queues", {}).get("consumers", []):
        known = {k: entry[k] for k in ConsumerSettings.__dataclass_fields__ if k in entry}
        out[str(entry["queue"])] = ConsumerSettings(**known)
    return out


class LocalQueues:
    """Every queue's messages: `messages(seq, queue, id, body, attempts, visible_ms, sent_ms)`."""

    def __init__(self, path: str | Path | None, clock: Clock) -> None:
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA secure_delete=ON")  # an erase's deletes leave no bytes
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "queue TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, attempts INTEGER NOT "
            "NULL DEFAULT 0, visible_ms INTEGER NOT NULL, sent_ms INTEGER NOT NULL)"
        )
        self._clock = clock
        self._guard = threading.Lock()

    def _now_ms(self) -> int:
        return int(self._clock.now() * 1000)

    def producer(self, queue: str) -> LocalQueue:
        return LocalQueue(self, queue)

    def enqueue(self, queue: str, texts: Sequence[str]) -> None:
        now = self._now_ms()
        rows = [(queue, uuid.uuid4().hex, text, now, now) for text in texts]
        with self._guard:
            self._db.executemany(
                "INSERT INTO messages (queue, id, body, visible_ms, sent_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def pending(self, queue: str) -> list[QueueMessage]:
        """Every message of `queue` not yet acked, due or not (tests, the inspector's CLI)."""
        with self._guard:
            rows = self._db.execute(
                "SELECT id, body, attempts, sent_ms FROM messages WHERE queue = ? ORDER BY seq",
                (queue,),
            ).fetchall()
        return [QueueMessage(r[0], json.loads(r[1]), r[2], r[3]) for r in rows]

    async def deliver(self, queue: str, settings: ConsumerSettings, consumer: Consumer) -> int:
        """Hand one batch of `queue`'s due messages to `consumer` and settle them; how many
        it was handed (0: nothing due)."""
        now = self._now_ms()
        with self._guard:
            rows = self._db.execute(
                "SELECT seq, id, body, attempts, sent_ms FROM messages WHERE queue = ? "
                "AND visible_ms <= ? ORDER BY visible_ms, seq LIMIT ?",
                (queue, now, settings.max_batch_size),
            ).fetchall()
        if not rows:
            return 0
        batch = [QueueMessage(r[1], json.loads(r[2]), r[3] + 1, r[4]) for r in rows]
        try:
            verdicts: Verdicts = await consumer(queue, batch)
        except Exception:  # the whole batch is retried, as on Cloudflare
            verdicts = {m.id: settings.retry_delay for m in batch}
        for (seq, _, body, attempts, _), message in zip(rows, batch, strict=True):
            delay = verdicts.get(message.id, settings.retry_delay)
            self._settle(seq, body, attempts + 1, delay, settings)
        return len(batch)

    def _settle(
        self, seq: int, body: str, attempts: int, delay: int | None, settings: ConsumerSettings
    ) -> None:
        with self._guard:
            if delay is None or attempts > settings.max_retries:
                self._db.execute("DELETE FROM messages WHERE seq = ?", (seq,))
            else:
                visible = self._now_ms() + max(delay, 0) * 1000
                self._db.execute(
                    "UPDATE messages SET attempts = ?, visible_ms = ? WHERE seq = ?",
                    (attempts, visible, seq),
                )
        if delay is not None and attempts > settings.max_retries and settings.dead_letter_queue:
            self.enqueue(settings.dead_letter_queue, [body])

    def forget(self, text: str) -> int:
        """Delete every message whose body holds `text` (a subject erase, locally)."""
        with self._guard:
            return self._db.execute(
                "DELETE FROM messages WHERE instr(body, ?) > 0", (text,)
            ).rowcount

    def checkpoint(self) -> None:
        with self._guard:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self._db.close()


class LocalQueue:
    """A producer binding (`env.FEED`) over one queue of `LocalQueues`."""

    def __init__(self, queues: LocalQueues, name: str) -> None:
        self._queues = queues
        self.name = name

    async def send_batch(self, bodies: Sequence[Any]) -> None:
        self._queues.enqueue(self.name, check_batch(bodies))
