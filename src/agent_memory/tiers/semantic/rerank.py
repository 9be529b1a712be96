"""Recall's stages after fusion: a memory's session neighbours, and the reranking of the
fused head (`RetrievalConfig.rerank`).

Reranking scores each of the best `depth` candidates as question-passage pairs, where the
passage is the memory with `neighbours` memories either side of it in its session (an
answer is often spread over adjacent turns). The reranker is the bound `Reranker` port
(Workers AI's `@cf/baai/bge-reranker-base` on Cloudflare) or, without one, the local
fallback `EmbedderReranker`: the cosine of question and passage under the tenant's embedder
(no cross-encoder ships its weights in a PyPI wheel; docs/semantic-memory.md). The new order
blends the fused score and the reranker's, each min-max normalised over the head:
`fused + weight · reranker`; the head keeps the fused scores' range, so it still ranks above
the rest. A failing reranker leaves the fused order (logged): the stage only reorders.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

import numpy as np

from agent_memory.retrieval import RerankConfig
from agent_memory.tiers.semantic.models import (
    ContextMemory,
    FactScope,
    RecalledFact,
    check_matrix,
)
from bindings.ports.embedder import Embedder
from bindings.ports.reranker import Reranker
from bindings.ports.sql import Row

log = logging.getLogger(__name__)


class EmbedderReranker:
    """The cosine of question and passage under an embedder: the reranker when none is bound."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def model(self) -> str:
        return f"embedder:{self._embedder.config.model}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        matrix = await self._embedder.embed([query, *texts])
        check_matrix(matrix, len(texts) + 1, self._embedder.config)
        vectors = np.asarray(matrix, dtype=np.float64)
        return [float(v) for v in vectors[1:] @ vectors[0]]


_SIDE = (
    "SELECT j.key AS hit, n.fact_id, n.content, n.valid_from, n.fts_rowid "
    "FROM json_each(?1) AS j, semantic_facts AS n WHERE n.tenant_id = ?2 AND n.fts_rowid IN "
    "(SELECT p.fts_rowid FROM semantic_facts AS p WHERE p.tenant_id = ?2 "
    "AND p.session_key = json_extract(j.value, '$[0]') AND p.status = 'active' "
    "AND p.fts_rowid {op} json_extract(j.value, '$[1]') ORDER BY p.fts_rowid {order} LIMIT ?{n})"
)


async def session_neighbours(
    scope: FactScope, rows: Sequence[Row], before: int, after: int
) -> dict[str, list[Row]]:
    """For each row with a session: up to `before` / `after` active memories of its session
    written just before / after it, in session order (by fact id; rows without a session
    have none). One statement however many rows."""
    keyed = [r for r in rows if r.get("session_key") is not None and r.get("fts_rowid")]
    if not keyed or before + after <= 0:
        return {}
    sides = (_SIDE.format(op="<", order="DESC", n=3), _SIDE.format(op=">", order="ASC", n=4))
    hits = [[r["session_key"], int(r["fts_rowid"])] for r in keyed]
    result = (
        await scope.db.prepare(" UNION ALL ".join(sides))
        .bind(json.dumps(hits), scope.tenant_id, before, after)
        .all()
    )
    found: dict[str, list[Row]] = {}
    for row in result.results:
        found.setdefault(str(keyed[int(row["hit"])]["fact_id"]), []).append(row)
    return {fid: sorted(near, key=lambda r: int(r["fts_rowid"])) for fid, near in found.items()}


def passage(row: Row, near: Sequence[Row]) -> str:
    """The memory with its neighbours around it, in session order."""
    own = int(row.get("fts_rowid") or 0)
    texts = [str(r["content"]) for r in near if int(r["fts_rowid"]) < own]
    texts.append(str(row["content"]))
    texts += [str(r["content"]) for r in near if int(r["fts_rowid"]) > own]
    return "\n".join(texts)


def _unit(values: Sequence[float]) -> list[float]:
    low, high = min(values), max(values)
    return [(v - low) / (high - low) if high > low else 0.0 for v in values]


async def rerank_head(
    scope: FactScope,
    reranker: Reranker,
    config: RerankConfig,
    query: str,
    head: Sequence[tuple[str, float, Row]],
) -> dict[str, float] | None:
    """New scores for `head` (fact id, fused total, row; best first), in the head's score
    range, or None when the reranker failed (the fused order stands)."""
    if len(head) < 2:
        return None
    rows = [row for _, _, row in head]
    near = await session_neighbours(scope, rows, config.neighbours, config.neighbours)
    texts = [passage(row, near.get(fid, [])) for fid, _, row in head]
    try:
        scores = await reranker.rerank(query, texts)
    except Exception as exc:  # an optional stage: recall answers without it
        log.warning(
            "reranking with %s failed for tenant %s: %s", reranker.model, scope.tenant_id, exc
        )
        return None
    fused = [total for _, total, _ in head]
    blend = [f + config.weight * r for f, r in zip(_unit(fused), _unit(scores), strict=True)]
    low, high = min(fused), max(fused)
    return {fid: low + (high - low) * b for (fid, _, _), b in zip(head, _unit(blend), strict=True)}


async def attach_context(
    scope: FactScope,
    results: Sequence[RecalledFact],
    rows: Mapping[str, Row],
    per_side: int,
    budget: int,
) -> None:
    """Give each result the memories next to it in its session (`per_side` either side, at
    most `budget` in all, best results first; none already among the results)."""
    returned = {r.fact.fact_id for r in results}
    near = await session_neighbours(
        scope, [rows[fid] for fid in returned if fid in rows], per_side, per_side
    )
    for result in results:
        own = int(rows[result.fact.fact_id].get("fts_rowid") or 0)
        around = [n for n in near.get(result.fact.fact_id, []) if n["fact_id"] not in returned]
        # nearest first, so a tight budget keeps the closest turns
        around.sort(key=lambda n: abs(int(n["fts_rowid"]) - own))
        for n in around[: max(0, budget)]:
            before = [m for m in near[result.fact.fact_id] if int(m["fts_rowid"]) < own]
            after = [m for m in near[result.fact.fact_id] if int(m["fts_rowid"]) > own]
            offset = -1 - before[::-1].index(n) if n in before else 1 + after.index(n)
            result.context.append(
                ContextMemory(
                    fact_id=str(n["fact_id"]),
                    content=str(n["content"]),
                    valid_from=int(n["valid_from"]),
                    offset=offset,
                )
            )
        result.context.sort(key=lambda c: c.offset)
        budget -= len(result.context)
