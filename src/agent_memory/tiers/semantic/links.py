"""Links between semantic facts (migration 0004 `memory_links`), written by the reconciler's
linking step and followed one hop by recall (`SemanticMemory.recall(..., follow_links=True)`).

`linked_rows` returns, for a set of fact ids, their live neighbours (status `active`, inside
their validity window), strongest link first, at most `per_fact` each, never one of the
given ids. Every statement is `tenant_id = ?` first; ids are sent in chunks under D1's 100
bound parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from agent_memory.statements import chunks
from bindings.ports.d1 import D1Database
from bindings.ports.sql import Row

DEFAULT_PER_FACT = 3


class LinkedRow(BaseModel):
    """A neighbour reached over a link: the fact row, who it was reached from, the link."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    via: str
    score: float
    row: Row


async def linked_rows(
    db: D1Database,
    tenant_id: str,
    fact_ids: Sequence[str],
    *,
    now_ms: int,
    per_fact: int = DEFAULT_PER_FACT,
) -> list[LinkedRow]:
    """Live facts one hop from `fact_ids`; each neighbour once (via its strongest link)."""
    ids = list(dict.fromkeys(fact_ids))
    if not ids or per_fact < 1:
        return []
    found: dict[str, LinkedRow] = {}
    for chunk in chunks(ids):
        marks = ", ".join("?" for _ in chunk)
        result = await (
            db.prepare(
                "SELECT l.from_fact_id AS via, l.score AS link_score, f.* "
                "FROM memory_links AS l JOIN semantic_facts AS f "
                "ON f.tenant_id = l.tenant_id AND f.fact_id = l.to_fact_id "
                f"WHERE l.tenant_id = ? AND l.from_fact_id IN ({marks}) "
                "AND f.status = 'active' AND (f.valid_to IS NULL OR f.valid_to > ?) "
                "ORDER BY l.from_fact_id, l.score DESC, l.to_fact_id"
            )
            .bind(tenant_id, *chunk, now_ms)
            .all()
        )
        taken: dict[str, int] = {}
        for row in result.results:
            via = str(row["via"])
            target = str(row["fact_id"])
            if target in ids or taken.get(via, 0) >= per_fact:
                continue
            taken[via] = taken.get(via, 0) + 1
            score = float(row["link_score"])
            current = found.get(target)
            if current is None or score > current.score:
                clean = {k: v for k, v in row.items() if k not in ("via", "link_score")}
                found[target] = LinkedRow(via=via, score=score, row=clean)
    return sorted(found.values(), key=lambda r: (-r.score, str(r.row["fact_id"])))
