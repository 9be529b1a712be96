"""Recall statistics and the `memory_retrieved` event, written after the response.

A recall answers first; the returned facts' `last_recalled_at` / `recall_count` and its
`memory_retrieved` event are written afterwards (`ctx.waitUntil` when the caller has one,
else before `recall` returns). They are never lost silently:

* the write is one D1 batch (one transaction) and idempotent: the statistics update only
  applies while the event id is absent, and the event insert does nothing when it is
  present, so retrying a write whose outcome was unknown never counts a recall twice;
* a failed write is retried `RECORD_ATTEMPTS` times with exponential back-off (well inside
  `waitUntil`'s 30 s);
* if it still fails, the record is kept (at most `MAX_UNRECORDED` per tenant in this
  isolate) and written with the tenant's next recall; beyond that bound, or if the isolate
  ends first, it is logged at ERROR with its whole payload, which is the one way left to
  surface it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from agent_memory.governance.events import MemoryEvent
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from agent_memory.tiers.semantic._scope import FactScope, ms
from bindings.ports.d1 import D1Statement

log = logging.getLogger(__name__)

RECORD_ATTEMPTS = 4
RECORD_BASE_DELAY = 0.2  # seconds: 0.2, 0.4, 0.8 between attempts
MAX_UNRECORDED = 1_000


@dataclass(frozen=True, slots=True)
class RecallRecord:
    """What one recall leaves behind: its event and the facts whose statistics it bumps."""

    event: MemoryEvent
    fact_ids: list[str]
    now: float


# Records whose writes failed every attempt, per tenant, written with the tenant's next
# recall in this isolate (module state: it must outlive the request that made them).
_UNRECORDED: dict[str, list[RecallRecord]] = {}


def unrecorded(tenant_id: str) -> list[RecallRecord]:
    """The tenant's records still waiting to be written (for tests and operators)."""
    return list(_UNRECORDED.get(tenant_id, []))


class RecallRecorder:
    """Writes one tenant's recall records after the response."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope

    def _statements(self, record: RecallRecord) -> list[D1Statement]:
        statements: list[D1Statement] = []
        for chunk in chunks(record.fact_ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._s.db.prepare(
                    "UPDATE semantic_facts SET last_recalled_at = ?, "
                    "recall_count = recall_count + 1 "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks}) AND NOT EXISTS "
                    "(SELECT 1 FROM memory_events AS e WHERE e.tenant_id = ? AND e.event_id = ?)"
                ).bind(
                    ms(record.now),
                    self._s.tenant_id,
                    *chunk,
                    self._s.tenant_id,
                    record.event.event_id,
                )
            )
        statements.append(self._s.events.statement(record.event, if_absent=True))
        return statements

    async def _write(self, record: RecallRecord) -> bool:
        for attempt in range(RECORD_ATTEMPTS):
            try:
                # Stats and event commit together (one D1 batch is one transaction).
                await self._s.db.batch(self._statements(record))
                return True
            except Exception as exc:
                log.warning(
                    "recording recall %s (tenant %s), attempt %d failed: %s",
                    record.event.event_id,
                    self._s.tenant_id,
                    attempt + 1,
                    exc,
                )
                if attempt + 1 < RECORD_ATTEMPTS and RECORD_BASE_DELAY > 0:
                    await asyncio.sleep(RECORD_BASE_DELAY * 2**attempt)
        return False

    async def write(self, record: RecallRecord) -> None:
        """Write `record` and any the tenant left unwritten earlier; keep what still fails."""
        tenant = self._s.tenant_id
        waiting = [*_UNRECORDED.pop(tenant, []), record]
        kept: list[RecallRecord] = []
        for item in waiting:
            if not await self._write(item):
                kept.append(item)
        if not kept:
            return
        overflow = len(kept) - MAX_UNRECORDED
        for item in kept[: max(0, overflow)]:
            log.error(
                "recall record dropped after %d attempts (tenant %s): %s",
                RECORD_ATTEMPTS,
                tenant,
                json.dumps({"event": item.event.payload, "fact_ids": item.fact_ids}),
            )
        _UNRECORDED.setdefault(tenant, []).extend(kept[max(0, overflow) :])

    async def submit(self, record: RecallRecord) -> None:
        """Write `record` after the response (now, without a background)."""
        if self._s.background is not None:
            self._s.background.wait_until(self.write(record))
        else:
            await self.write(record)
