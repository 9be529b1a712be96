"""The recall pipeline: channels → live rows → fusion → scoring → top results.

`Recaller.run` asks the three channels concurrently, keeps only live rows (a vector whose
row is gone is dropped and deleted), fuses the channels (`retrieval.fusion`), scores each
candidate with its tier's weights (`retrieval.scoring`) and reads full rows for the returned
ones only. Candidates do not depend on the limit, so a longer ranking starts with what a
shorter one returns. When asked to record, the returned facts' recall statistics and one
`memory_retrieved` event commit together in one D1 batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent_memory.governance.events import RetrievedItem, memory_retrieved
from agent_memory.retrieval.fusion import ChannelHit, ChannelResult, fuse
from agent_memory.retrieval.scoring import breakdown, information_density, score_parts
from agent_memory.retrieval.terms import exact_match_candidates
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from agent_memory.tiers.semantic._channels import RecallChannels
from agent_memory.tiers.semantic._scope import (
    FactScope,
    ms,
)
from agent_memory.tiers.semantic._vectors import VectorSync
from agent_memory.tiers.semantic.models import (
    Fact,
    RecalledFact,
    RecallFilters,
    RecallResult,
)
from bindings.ports.d1 import D1Statement
from bindings.ports.vectorize import VECTORIZE_MAX_TOP_K

# What ranking needs of a candidate row; full rows are read for the returned ones only.
_SCORING_COLUMNS = (
    "fact_id, status, valid_to, agent_type, subject, predicate, confidence, content, updated_at"
)


class Recaller:
    """Ranks one tenant's live facts for a query."""

    def __init__(self, scope: FactScope, vectors: VectorSync) -> None:
        self._s = scope
        self._vectors = vectors
        self._channels = RecallChannels(scope)

    async def run(
        self,
        query: str,
        limit: int,
        filters: RecallFilters | None,
        query_vector: Sequence[float] | None,
        *,
        record: bool,
    ) -> RecallResult:
        filters = filters or RecallFilters()
        now = self._s.clock.now()
        # Candidates do not depend on `limit`: `rank(q, 500)` starts with what
        # `recall(q, 5)` returns, in the same order.
        pool = self._s.config.candidate_pool
        vector_hits, keyword_hits, (exact_hits, exact_complete) = await asyncio.gather(
            self._channels.vector(query, query_vector, filters, min(pool, VECTORIZE_MAX_TOP_K)),
            self._channels.keyword(query, filters, pool, now),
            self._channels.exact(query, filters, pool, now),
        )
        candidate_ids = list(
            dict.fromkeys(
                [h.id for h in vector_hits]
                + [h.id for h in keyword_hits]
                + ([h.id for h in exact_hits] if exact_complete else [])
            )
        )
        rows = await self._s.load_rows(candidate_ids, _SCORING_COLUMNS)
        stray = [h.id for h in vector_hits if h.id not in rows]
        dropped = list(stray)
        if stray:
            await self._vectors.drop_stray(stray)
        live = {fid: row for fid, row in rows.items() if self._channels.is_live(row, filters, now)}
        dropped += [fid for fid in rows if fid not in live]

        candidates_named = set(exact_match_candidates(query))
        strength = {
            fid: 0.5 * (row["subject"] in candidates_named)
            + 0.5 * (row["predicate"] in candidates_named)
            for fid, row in live.items()
        }
        channels = [
            ChannelResult(name="vector", hits=[h for h in vector_hits if h.id in live]),
            ChannelResult(name="keyword", hits=[h for h in keyword_hits if h.id in live]),
        ]
        feature: dict[str, dict[str, float]] = {}
        if exact_complete:
            exact_live = [
                ChannelHit(id=h.id, score=strength.get(h.id, 0.0))
                for h in exact_hits
                if h.id in live and strength.get(h.id, 0.0) > 0
            ]
            exact_live.sort(key=lambda h: (-h.score, h.id))
            channels.append(ChannelResult(name="exact", hits=exact_live, normalize=False))
        else:
            # Too many facts share the named subject/predicate to list them all: the match
            # only scores the other channels' candidates.
            feature["exact"] = {fid: s for fid, s in strength.items() if s > 0}
        fused = fuse(channels, self._s.config.fusion, feature_scores=feature)
        weights = self._s.config.weights_for(self._s.tier)
        ranked = []
        for item in fused:
            row = live[item.id]
            parts = score_parts(
                relevance=item.relevance,
                written_at=int(row["updated_at"]) / 1000.0,
                confidence=float(row["confidence"]),
                density=information_density(row["content"]),
                now=now,
                weights=weights,
            )
            ranked.append((parts, item))
        ranked.sort(key=lambda pair: (-pair[0][0], -pair[0][1], pair[1].id))
        top = ranked[:limit]
        # Full rows only for what is returned (content and metadata can be large).
        full = await self._s.load_rows([item.id for _, item in top])
        results = [
            RecalledFact(
                fact=Fact.from_row(full[item.id]),
                score=parts[0],
                breakdown=breakdown(parts, weights),
                channels=item.channels,
            )
            for parts, item in top
            if item.id in full  # deleted between the two reads: never return it
        ]
        counts = {
            "vector": len(vector_hits),
            "keyword": len(keyword_hits),
            "exact": len(exact_hits) if exact_complete else -1,
        }
        event_id = None
        if record:
            event_id = await self._record_recall(query, limit, results, counts, dropped, now)
        return RecallResult(results=results, event_id=event_id, candidates=counts, dropped=dropped)

    async def _record_recall(
        self,
        query: str,
        top_k: int,
        results: Sequence[RecalledFact],
        counts: dict[str, int],
        dropped: list[str],
        now: float,
    ) -> str:
        event = memory_retrieved(
            tenant_id=self._s.tenant_id,
            tier=self._s.tier,
            now=now,
            query=query,
            top_k=top_k,
            results=[
                RetrievedItem(
                    id=r.fact.fact_id,
                    score=round(r.score, 6),
                    relevance=round(r.breakdown.relevance, 6),
                    recency=round(r.breakdown.recency, 6),
                    confidence=round(r.breakdown.confidence, 6),
                    density=round(r.breakdown.density, 6),
                )
                for r in results
            ],
            candidates=counts,
            dropped=dropped,
            agent_type=self._s.agent_type,
            run_id=self._s.run_id,
        )
        statements: list[D1Statement] = []
        ids = [r.fact.fact_id for r in results]
        for chunk in chunks(ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._s.db.prepare(
                    "UPDATE semantic_facts SET last_recalled_at = ?, "
                    "recall_count = recall_count + 1 "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks})"
                ).bind(ms(now), self._s.tenant_id, *chunk)
            )
        statements.append(self._s.events.statement(event))
        # The stats and the event commit together (one D1 batch is one transaction).
        await self._s.db.batch(statements)
        return event.event_id
