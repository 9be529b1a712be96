"""Keys for facts written before keys existed (migration 0005), a batch at a time.

Facts stored before 0005 have `key_source = ''`: the update step and recall's
stale-statement guard skip them, so a newer statement about the same entity could never
supersede them. `backfill_keys` derives their keys exactly as the write path does
(`_scope.derive_keys`) and stores them, oldest first; a fact whose text names nothing gets
`key_source = 'none'`, so it is not looked at again. Idempotent and safe to interrupt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_memory.statements import STATEMENTS_PER_BATCH, chunks
from agent_memory.tiers.semantic._keying import derive_keys
from agent_memory.tiers.semantic._scope import FactScope

MAX_BACKFILL = 1_000


@dataclass(frozen=True, slots=True)
class _StoredText:
    fact_id: str
    content: str
    subject: str
    predicate: str
    metadata: dict[str, Any]


async def backfill_keys(scope: FactScope, limit: int) -> int:
    """Derive and store the keys of up to `limit` (≤ 1000) unkeyed facts of the tenant.
    Returns how many were keyed."""
    result = (
        await scope.db.prepare(
            "SELECT fact_id, content, subject, predicate, metadata FROM semantic_facts "
            "WHERE tenant_id = ? AND key_source = '' ORDER BY created_at LIMIT ?"
        )
        .bind(scope.tenant_id, max(1, min(limit, MAX_BACKFILL)))
        .all()
    )
    rows = [
        _StoredText(
            fact_id=str(row["fact_id"]),
            content=str(row["content"]),
            subject=str(row["subject"]),
            predicate=str(row["predicate"]),
            metadata=json.loads(row["metadata"] or "{}"),
        )
        for row in result.results
    ]
    if not rows:
        return 0
    keys = await derive_keys(scope, rows)
    statements = [
        scope.db.prepare(
            "UPDATE semantic_facts SET key_entity = ?, key_attribute = ?, key_source = ? "
            "WHERE tenant_id = ? AND fact_id = ? AND key_source = ''"
        ).bind(key.entity, key.attribute, key.source, scope.tenant_id, row.fact_id)
        for row, key in zip(rows, keys, strict=True)
    ]
    for batch in chunks(statements, STATEMENTS_PER_BATCH):
        await scope.db.batch(list(batch))
    return len(rows)
