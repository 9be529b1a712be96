"""Recall statistics and the `memory_retrieved` event, written after the response.

A recall answers first; the returned facts' `last_recalled_at` / `recall_count` and its
`memory_retrieved` event are written afterwards (`ctx.waitUntil` when the caller has one,
else before `recall` returns). They are never lost silently:

* the write is one D1 batch (one transaction) and idempotent: the statistics update only
  applies while the event id is absent, and the event insert does nothing when it is
  present, so writing a record again — a retry whose outcome was unknown, or two isolates
  writing back the same carried-over record — never counts a recall twice;
* a failed write is retried `RECORD_ATTEMPTS` times with exponential back-off (well inside
  `waitUntil`'s 30 s);
* if D1 still refuses it, the record is carried over in KV (D1 is what failed), under
  `recall-pending:<tenant>:<event id>` with no expiry, so it outlives the isolate. It is
  written back after the tenant's next recall (a KV list at most every
  `WRITE_BACK_CHECK_SECONDS` per isolate and tenant, at once when this isolate carried one
  over) and by the daily cron, `MAX_WRITE_BACK` at a time, and deleted from KV only once D1
  accepted it;
* a record committed after a subject erase began (its mark in `erasure_marks`) stores its
  event without the query text: the erase may not have seen it;
* at most `MAX_CARRIED` records per tenant wait in KV (KV's list is eventually consistent,
  so the bound is approximate by the records of the last minute); beyond it, with no KV
  bound, or when KV fails too, the record is logged at ERROR with its whole payload — the
  last way left to surface it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from agent_memory.governance.events import MemoryEvent
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from agent_memory.tiers.semantic._scope import FactScope, ms
from bindings.ports.d1 import D1Statement
from bindings.ports.kv import KV_MAX_LIST_LIMIT, KVNamespace

log = logging.getLogger(__name__)

RECORD_ATTEMPTS = 4
RECORD_BASE_DELAY = 0.2  # seconds: 0.2, 0.4, 0.8 between attempts
CARRY_PREFIX = "recall-pending"
MAX_CARRIED = 1_000  # per tenant, in KV
# Written back after one recall: two D1 statements each, inside the free plan's 50 queries
# per invocation together with the recall's own ~7.
WRITE_BACK_AFTER_RECALL = 10
MAX_WRITE_BACK = 100  # per call of `write_back` (the daily cron's share per tenant)
WRITE_BACK_CHECK_SECONDS = 300.0
# An erase whose mark is up to this much older than the recall counts as concurrent with it:
# the two may run in isolates whose clocks differ slightly.
ERASE_CLOCK_MARGIN_MS = 60_000


@dataclass(frozen=True, slots=True)
class RecallRecord:
    """What one recall leaves behind: its event and the facts whose statistics it bumps."""

    event: MemoryEvent
    fact_ids: list[str]
    now: float

    def to_json(self) -> str:
        return json.dumps(
            {"event": self.event.model_dump(), "fact_ids": self.fact_ids, "now": self.now},
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> RecallRecord:
        """Raises `ValueError` when `text` is not a record."""
        try:
            data: dict[str, Any] = json.loads(text)
            return cls(
                event=MemoryEvent.model_validate(data["event"]),
                fact_ids=[str(fact_id) for fact_id in data["fact_ids"]],
                now=float(data["now"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a recall record: {exc}") from None


def carry_prefix(tenant_id: str) -> str:
    """The KV prefix of the tenant's carried-over records."""
    return f"{CARRY_PREFIX}:{tenant_id}:"


async def carried_tenants(kv: KVNamespace, *, max_pages: int = 10) -> list[str]:
    """Tenants with records waiting in KV (from at most `max_pages` list pages), sorted."""
    tenants: set[str] = set()
    cursor: str | None = None
    for _ in range(max_pages):
        page = await kv.list(prefix=f"{CARRY_PREFIX}:", cursor=cursor)
        tenants.update(key.name.split(":")[1] for key in page.keys)
        if page.list_complete or not page.cursor:
            break
        cursor = page.cursor
    return sorted(tenants)


# Per isolate, per tenant: when its KV carry-over was last looked at (clock seconds). Only
# saves KV list calls; the records themselves are in KV. Absent: look at the next recall.
_CHECKED: dict[str, float] = {}


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
        # A subject erase that began since the recall (its mark, migration 0013) may have
        # looked for the subject before this event existed: the event then keeps no query
        # text. Same transaction, so the erase either sees the event or this sees the mark.
        statements.append(
            self._s.db.prepare(
                "UPDATE memory_events SET payload = json_set(json_remove(payload, '$.query'), "
                "'$.query_redacted', json('true')) "
                "WHERE tenant_id = ? AND event_id = ? AND EXISTS (SELECT 1 FROM erasure_marks "
                "WHERE tenant_id = ? AND started_at >= ?)"
            ).bind(
                self._s.tenant_id,
                record.event.event_id,
                self._s.tenant_id,
                ms(record.now) - ERASE_CLOCK_MARGIN_MS,
            )
        )
        return statements

    async def _write(self, record: RecallRecord, attempts: int = RECORD_ATTEMPTS) -> bool:
        for attempt in range(attempts):
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
                if attempt + 1 < attempts and RECORD_BASE_DELAY > 0:
                    await asyncio.sleep(RECORD_BASE_DELAY * 2**attempt)
        return False

    async def write(self, record: RecallRecord) -> None:
        """Write `record`; carry it over in KV if D1 refuses it every time. After a write
        D1 accepted, write back records carried over earlier (when due)."""
        if await self._write(record):
            await self._write_back_if_due()
            return
        await self._carry_over(record)

    def _lost(self, record: RecallRecord, why: str) -> None:
        log.error(
            "recall record %s of tenant %s not written (%s): %s",
            record.event.event_id,
            self._s.tenant_id,
            why,
            record.to_json(),
        )

    async def _carry_over(self, record: RecallRecord) -> None:
        kv = self._s.kv
        if kv is None:
            self._lost(record, f"D1 failed {RECORD_ATTEMPTS} times and no KV is bound")
            return
        prefix = carry_prefix(self._s.tenant_id)
        try:
            waiting = await kv.list(prefix=prefix, limit=min(MAX_CARRIED, KV_MAX_LIST_LIMIT))
            if len(waiting.keys) >= MAX_CARRIED:
                self._lost(record, f"{MAX_CARRIED} records already wait in KV")
                return
            await kv.put(prefix + record.event.event_id, record.to_json())
        except Exception as exc:
            self._lost(record, f"D1 failed {RECORD_ATTEMPTS} times, then KV: {exc}")
            return
        # This isolate knows one waits: look at the tenant's next recall.
        _CHECKED.pop(self._s.tenant_id, None)
        log.warning(
            "recall record %s of tenant %s kept in KV until D1 accepts it",
            record.event.event_id,
            self._s.tenant_id,
        )

    async def _write_back_if_due(self) -> None:
        tenant = self._s.tenant_id
        now = self._s.clock.now()
        last = _CHECKED.get(tenant)
        if self._s.kv is None or (last is not None and now - last < WRITE_BACK_CHECK_SECONDS):
            return
        _CHECKED[tenant] = now
        try:
            if await self.write_back(WRITE_BACK_AFTER_RECALL) == WRITE_BACK_AFTER_RECALL:
                _CHECKED.pop(tenant, None)  # maybe more: continue at the next recall
        except Exception as exc:  # they stay in KV for the next recall or the cron
            log.warning("writing back recall records of tenant %s failed: %s", tenant, exc)

    async def write_back(self, limit: int = MAX_WRITE_BACK) -> int:
        """Write up to `limit` of the tenant's carried-over records to D1 (one attempt
        each, oldest event first), deleting each from KV once D1 accepted it. Stops at the
        first D1 failure. Returns how many were written."""
        kv = self._s.kv
        if kv is None:
            return 0
        page = await kv.list(
            prefix=carry_prefix(self._s.tenant_id), limit=min(limit, KV_MAX_LIST_LIMIT)
        )
        written = 0
        for key in page.keys:
            text = await kv.get(key.name)
            if text is None:  # written back by another isolate meanwhile
                continue
            try:
                record = RecallRecord.from_json(text)
                if record.event.tenant_id != self._s.tenant_id:
                    raise ValueError("the record names another tenant")
            except ValueError as exc:
                log.error("unreadable recall record %s dropped (%s): %s", key.name, exc, text)
                await kv.delete(key.name)
                continue
            if not await self._write(record, attempts=1):
                break  # D1 still refuses: the rest wait too
            await kv.delete(key.name)
            written += 1
        return written

    async def submit(self, record: RecallRecord) -> None:
        """Write `record` after the response (now, without a background)."""
        await self._s.after_response(self.write(record), "recording a recall")
