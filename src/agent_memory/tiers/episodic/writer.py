"""Episodic writes off the response path: ordered, retried, never silently lost.

`EpisodicWriter` runs `EpisodicStore` writes through `BackgroundTasks.wait_until` (i.e.
`ctx.waitUntil`), one after another in submission order (a run's completion never overtakes
its start), each retried with exponential backoff. A write that still fails is logged at
ERROR with its full payload and handed to `on_failure` (the Durable Object keeps it in its
`failed_writes` table and shows it in the admin run view).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from pydantic import BaseModel

from agent_memory.tiers.episodic.models import (
    Episode,
    EpisodeLimitReached,
    RunRecord,
    WriteOp,
    to_json,
)
from agent_memory.tiers.episodic.store import EpisodicStore
from bindings.ports.background import BackgroundTasks

log = logging.getLogger(__name__)


class FailedWrite(BaseModel):
    """An episodic write that exhausted its retries: everything needed to replay it."""

    op: WriteOp
    run_id: str
    payload: dict[str, Any]
    error: str
    attempts: int


Sleep = Callable[[float], Awaitable[None]]
FailureSink = Callable[[FailedWrite], None]


class Outbox(Protocol):
    """Durable record of writes queued but not yet settled (the Durable Object's SQLite).

    `add` runs synchronously before the caller answers, so a write acknowledged to a client
    survives the process dying before the background work ran; `done` forgets it once it
    landed in D1 or was handed to the failure sink. `EpisodicWriter.replay` re-queues what
    is left after a restart (every write is idempotent, so one that had landed is harmless).
    """

    def add(self, op: WriteOp, run_id: str, payload: dict[str, Any]) -> int: ...

    def done(self, seq: int) -> None: ...


class PendingWrite(BaseModel):
    """A write an outbox still holds: its sequence number and what to replay."""

    seq: int
    op: WriteOp
    run_id: str
    payload: dict[str, Any]


DEFAULT_ATTEMPTS = 4
DEFAULT_BASE_DELAY = 0.25  # 0.25 s, 0.5 s, 1 s between attempts: well inside waitUntil's 30 s


class EpisodicWriter:
    """Queues episodic writes off the response path, in order, with retries."""

    def __init__(
        self,
        store: EpisodicStore,
        background: BackgroundTasks,
        *,
        on_failure: FailureSink | None = None,
        attempts: int = DEFAULT_ATTEMPTS,
        base_delay: float = DEFAULT_BASE_DELAY,
        sleep: Sleep = asyncio.sleep,
        outbox: Outbox | None = None,
    ) -> None:
        self.store = store
        self._outbox = outbox
        self._background = background
        self._on_failure = on_failure
        self._attempts = max(1, attempts)
        self._base_delay = base_delay
        self._sleep = sleep
        self._tail: asyncio.Future[None] | None = None

    def start_run(self, run: RunRecord) -> None:
        payload: dict[str, Any] = {
            "run_id": run.run_id,
            "agent_type": run.agent_type,
            "instance_id": run.instance_id,
            "input": run.input,
            "started_at": run.started_at,
        }
        self._submit("start_run", run.run_id, payload)

    def append_episode(self, episode: Episode) -> None:
        """Queue the episode; a proposal the write policy refuses raises `WriteDenied`
        here, to the caller, and nothing is queued."""
        self.store.gate.check(self.store.proposal(episode))
        self._submit("append_episode", episode.run_id, episode.model_dump())

    def complete_run(self, run: RunRecord) -> None:
        self._submit("complete_run", run.run_id, run.model_dump())

    def fail_run(self, run: RunRecord) -> None:
        self._submit("fail_run", run.run_id, run.model_dump())

    def replay(self, pending: list[PendingWrite]) -> None:
        """Queue again, in order, writes an outbox kept across a restart (already checked by
        the write policy when first queued; each keeps its outbox entry until it settles)."""
        for write in pending:
            self._submit(write.op, write.run_id, write.payload, seq=write.seq)

    async def write_now(self, op: WriteOp, payload: dict[str, Any]) -> None:
        """One attempt of a queued op's D1 write, rebuilt from its payload, in the caller's
        task (no retries, no failure sink): how the Durable Object's alarm retries a write
        from `failed_writes`. Raises what the store raises."""
        await self._write(op, payload)

    def _write(self, op: WriteOp, payload: dict[str, Any]) -> Coroutine[Any, Any, None]:
        """The D1 write of one queued op, rebuilt from its payload (so a replay is the same
        write as the original)."""
        if op == "start_run":
            return self.store.start_run(
                run_id=payload["run_id"],
                agent_type=payload["agent_type"],
                instance_id=payload["instance_id"],
                input=payload["input"],
                started_at=payload["started_at"],
            )
        if op == "append_episode":
            return self.store.append_episode(Episode.model_validate(payload))
        return self.store.finish_run(RunRecord.model_validate(payload))

    async def flush(self, wait_seconds: float | None = None) -> bool:
        """Wait until every write submitted so far has finished (or failed for good).

        Returns False if `wait_seconds` passed first. The turn calls this before reading episodes
        so an instance always sees its own previous turn.
        """
        tail = self._tail
        if tail is None or tail.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(tail), wait_seconds)
        except TimeoutError:
            return False
        return True

    @property
    def pending(self) -> bool:
        return self._tail is not None and not self._tail.done()

    def _submit(
        self, op: WriteOp, run_id: str, payload: dict[str, Any], *, seq: int | None = None
    ) -> None:
        if seq is None and self._outbox is not None:
            seq = self._outbox.add(op, run_id, payload)
        previous = self._tail
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail = done

        async def work() -> None:
            try:
                if previous is not None:
                    await asyncio.shield(previous)
                settled = await self._with_retries(
                    op, run_id, payload, lambda: self._write(op, payload)
                )
                if settled and seq is not None and self._outbox is not None:
                    # Landed in D1, or kept by the failure sink: otherwise the outbox
                    # keeps it for the next replay.
                    self._outbox.done(seq)
            finally:
                if not done.done():
                    done.set_result(None)

        self._background.wait_until(work())

    async def _with_retries(
        self,
        op: WriteOp,
        run_id: str,
        payload: dict[str, Any],
        write: Callable[[], Coroutine[Any, Any, None]],
    ) -> bool:
        error = ""
        for attempt in range(1, self._attempts + 1):
            try:
                await write()
                return True
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, EpisodeLimitReached):
                    break  # permanent: recorded below with its payload, not retried
                if attempt < self._attempts:
                    delay = self._base_delay * 2 ** (attempt - 1)
                    log.warning(
                        "episodic %s for run %s failed (attempt %d/%d, retrying in %.2fs): %s",
                        op,
                        run_id,
                        attempt,
                        self._attempts,
                        delay,
                        type(exc).__name__,  # the message may quote values; it is kept below
                    )
                    await self._sleep(delay)
        failed = FailedWrite(
            op=op, run_id=run_id, payload=payload, error=error, attempts=self._attempts
        )
        # Logs carry ids, sizes and hashes only (never content or subjects); the payload
        # itself is recoverable from the failed_writes record `on_failure` keeps.
        raw = to_json(payload).encode()
        log.error(
            "episodic %s for run %s LOST after %d attempts (%s); tenant=%s episode=%s "
            "payload_bytes=%d payload_sha256=%s (payload kept in failed_writes)",
            op,
            run_id,
            self._attempts,
            error.split(":", 1)[0],
            self.store.tenant,
            payload.get("episode_id", "-"),
            len(raw),
            hashlib.sha256(raw).hexdigest()[:16],
        )
        if self._on_failure is None:
            return False
        try:
            self._on_failure(failed)
        except Exception:
            log.exception("episodic: recording the failed %s for run %s failed", op, run_id)
            return False
        return True
