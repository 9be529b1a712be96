"""The episodic outbox: writes a turn queued, kept in the object's SQLite until they settle.

A turn answers before its episodic writes reach D1 (they run through `ctx.waitUntil`). If the
isolate dies first — an eviction on Cloudflare, a killed process locally — the in-memory
queue is gone, and a run the client saw `completed` would stay `running` in D1. So each write
is also recorded here, synchronously, before the turn answers (Durable Object storage is
durable before the response leaves), removed when it lands in D1 or moves to
`failed_writes`, and replayed in order when the object starts again. Every episodic write
is idempotent, so replaying one that had landed changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from agent_memory.tiers.episodic import PendingWrite, WriteOp
from agent_runtime_do.wipe import wipe_and_delete
from bindings.ports.clock import Clock
from bindings.ports.do_sql import SqlStorage


class DurableOutbox:
    """`agent_memory.tiers.episodic.Outbox` over the object's `pending_writes` table."""

    def __init__(self, sql: SqlStorage, tenant: str, clock: Clock) -> None:
        self._sql = sql
        self._tenant = tenant
        self._clock = clock

    def add(self, op: WriteOp, run_id: str, payload: dict[str, Any]) -> int:
        row = self._sql.exec(
            "INSERT INTO pending_writes (tenant_id, run_id, op, payload_json, created_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING seq",
            self._tenant,
            run_id,
            op,
            json.dumps(payload, separators=(",", ":"), default=str),
            self._clock.now(),
        ).one()
        return int(row["seq"])

    def done(self, seq: int) -> None:
        # Overwritten, then deleted: the payload's bytes must not stay in free space.
        wipe_and_delete(self._sql, "pending_writes", ("payload_json",), "seq = ?", seq)


def pending_by_tenant(sql: SqlStorage) -> dict[str, list[PendingWrite]]:
    """What the outbox still holds, per tenant, oldest first."""
    found: dict[str, list[PendingWrite]] = {}
    for row in sql.exec(
        "SELECT seq, tenant_id, run_id, op, payload_json FROM pending_writes ORDER BY seq"
    ).to_array():
        found.setdefault(str(row["tenant_id"]), []).append(
            PendingWrite(
                seq=int(row["seq"]),
                op=row["op"],
                run_id=str(row["run_id"]),
                payload=json.loads(row["payload_json"]),
            )
        )
    return found
