"""The recall pipeline: channels → live rows → fusion → scoring → top results.

`Recaller.run` asks the three channels concurrently, keeps only live rows (a vector whose
row is gone is dropped and deleted), fuses the channels (`retrieval.fusion`), scores each
candidate with its tier's weights (`retrieval.scoring`) and reads full rows for the returned
ones only. Candidates do not depend on the limit, so a longer ranking starts with what a
shorter one returns. When asked to record, the returned facts' recall statistics and one
`memory_retrieved` event commit together in one D1 batch, after the response
(`recall_record`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from agent_memory.governance.events import RetrievedItem, memory_retrieved
from agent_memory.retrieval.scoring import (
    ChannelHit,
    ChannelResult,
    breakdown,
    fuse,
    rank_candidates,
)
from agent_memory.retrieval.terms import exact_match_candidates
from agent_memory.tiers.semantic._channels import RecallChannels
from agent_memory.tiers.semantic._scope import FactScope
from agent_memory.tiers.semantic._vectors import VectorSync
from agent_memory.tiers.semantic.keys import FactKey, KeySource
from agent_memory.tiers.semantic.models import (
    RecalledFact,
    RecallFilters,
    RecallResult,
    open_facts,
)
from agent_memory.tiers.semantic.recall_record import RecallRecord, RecallRecorder
from agent_memory.tiers.semantic.update_rules import judge_update
from bindings.ports.sql import Row
from bindings.ports.vectorize import VECTORIZE_MAX_TOP_K

# How far below the newer statement a stale one is placed (scores are rounded to 6 places).
_STALE_GAP = 1e-6
STALE_GUARD_WINDOW = 30


def stale_statements(rows: Sequence[Row]) -> dict[str, str]:
    """Among candidate rows, the older statements a newer one about the same key updates
    (`update_rules.judge_update` says `update`): {older fact id: newest such fact id}. Rows without
    a key (written before keys existed) are never marked, nor are memories of a session
    (dialogue turns, a run's log): the rules misjudge consecutive utterances of one speaker
    as updates (on the LoCoMo dev split ~15 false "updates" per query among the candidates),
    so their updates are left to the reconciler, which sees the whole session."""
    by_entity: dict[str, list[Row]] = {}
    for row in rows:
        entity = row.get("key_entity") or ""
        if entity and row.get("session_key") is None:
            by_entity.setdefault(str(entity), []).append(row)
    stale: dict[str, str] = {}
    for group in by_entity.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda r: (int(r["valid_from"]), int(r["created_at"]), str(r["fact_id"])))
        keys = [_key(r) for r in group]
        for i in range(len(group) - 1):
            for j in range(len(group) - 1, i, -1):  # the newest updating statement wins
                verdict = judge_update(group[i]["content"], keys[i], group[j]["content"], keys[j])
                if verdict.decision == "update":
                    stale[str(group[i]["fact_id"])] = str(group[j]["fact_id"])
                    break
    return stale


@dataclass(frozen=True, slots=True)
class Candidates:
    """What the channels found: their hits, whether the exact channel listed all its
    matches, and every candidate's row (with its `keyword_score`) by fact id."""

    vector: list[ChannelHit]
    keyword: list[ChannelHit]
    exact: list[ChannelHit]
    exact_complete: bool
    rows: dict[str, Row]


def _key(row: Row) -> FactKey:
    return FactKey(
        entity=str(row.get("key_entity") or ""),
        attribute=str(row.get("key_attribute") or ""),
        source=cast(KeySource, row.get("key_source") or "none"),
    )


class Recaller:
    """Ranks one tenant's live facts for a query."""

    def __init__(self, scope: FactScope, vectors: VectorSync) -> None:
        self._s = scope
        self._vectors = vectors
        self._channels = RecallChannels(scope)
        self._recorder = RecallRecorder(scope)

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
        # An as-of recall scores recency as it was then.
        scored_at = min(now, filters.as_of) if filters.as_of is not None else now
        # Candidates do not depend on `limit`: `rank(q, 500)` starts with what
        # `recall(q, 5)` returns, in the same order.
        found = await self._candidates(query, query_vector, filters, now)
        vector_hits, rows = found.vector, found.rows
        keyword_hits, exact_hits, exact_complete = found.keyword, found.exact, found.exact_complete
        stray = [h.id for h in vector_hits if h.id not in rows]
        dropped = list(stray)
        if stray:
            await self._vectors.drop_stray(stray)
        live = {fid: row for fid, row in rows.items() if self._channels.is_live(row, filters, now)}
        dropped += [fid for fid in rows if fid not in live]
        # The keyword channel is normalised over every channel's candidates, not its own
        # top `pool` only: each live candidate has its exact BM25F score (0 if no term).
        keyword_live = sorted(
            (
                ChannelHit(id=fid, score=float(row["keyword_score"]))
                for fid, row in live.items()
                if float(row["keyword_score"]) > 0
            ),
            key=lambda h: (-h.score, h.id),
        )

        candidates_named = set(exact_match_candidates(query))
        strength = {
            fid: 0.5 * (row["subject"] in candidates_named)
            + 0.5 * (row["predicate"] in candidates_named)
            for fid, row in live.items()
        }
        channels = [
            ChannelResult(name="vector", hits=[h for h in vector_hits if h.id in live]),
            ChannelResult(name="keyword", hits=keyword_live, floor=0.0),
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
        embedder = self._s.embedder
        fusion = self._s.config.fusion
        if embedder is not None:
            fusion = fusion.for_model(embedder.config.model)
        fused = fuse(channels, fusion, feature_scores=feature)
        weights = self._s.config.weights_for(self._s.tier)
        need = max(STALE_GUARD_WINDOW, 2 * limit)
        ranked = rank_candidates(fused, live, weights, scored_at, need)
        # Until the reconciler supersedes it, a stale statement must not outrank the newer
        # one about the same key: it is placed just below it and marked possibly outdated.
        # Checked among the best `STALE_GUARD_WINDOW` (or 2 x limit) candidates only: the
        # rules cost ~50 µs a pair, and a pair further down cannot change the head.
        window = ranked[:need]
        stale = stale_statements([live[item.id] for _, item in window])
        total = {item.id: parts[0] for parts, item in ranked}
        for older in sorted(
            stale, key=lambda fid: (-int(live[fid]["valid_from"]), -int(live[fid]["created_at"]))
        ):
            total[older] = min(total[older], total[stale[older]] - _STALE_GAP)
        ranked.sort(key=lambda pair: (-total[pair[1].id], -pair[0][1], pair[1].id))
        top = ranked[:limit]
        # Full rows only for what is returned (content and metadata can be large).
        full = await self._s.load_rows([item.id for _, item in top])
        kept = [item.id for _, item in top if item.id in full]
        facts = await open_facts([full[i] for i in kept], self._s.personal)
        opened = dict(zip(kept, facts, strict=True))
        results = [
            RecalledFact(
                fact=opened[item.id],
                score=total[item.id],
                breakdown=breakdown(parts, weights),
                channels=item.channels,
                possibly_outdated=item.id in stale,
                newer_fact_id=stale.get(item.id),
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

    async def _candidates(
        self,
        query: str,
        query_vector: Sequence[float] | None,
        filters: RecallFilters,
        now: float,
    ) -> Candidates:
        """Every channel's candidates and their rows (`RecallChannels.rows`). The vector
        query is in flight while the keyword and exact channels run and their candidates'
        rows are read (on Cloudflare Vectorize answers remotely, overlapping the D1 calls),
        so only the vector-only candidates' rows wait for it."""
        pool = self._s.config.candidate_pool
        vector = asyncio.ensure_future(
            self._channels.vector(query, query_vector, filters, min(pool, VECTORIZE_MAX_TOP_K))
        )
        try:
            (keyword_hits, rows, prepared), (exact_hits, complete) = await asyncio.gather(
                self._channels.keyword(query, filters, pool, now),
                self._channels.exact(query, filters, pool, now),
            )
            exact_only = [h.id for h in exact_hits if complete and h.id not in rows]
            rows.update(await self._channels.rows(exact_only, prepared))
        except BaseException:
            vector.cancel()
            await asyncio.gather(vector, return_exceptions=True)
            raise
        vector_hits = await vector
        rest = list(dict.fromkeys(h.id for h in vector_hits if h.id not in rows))
        rows.update(await self._channels.rows(rest, prepared))
        return Candidates(vector_hits, keyword_hits, exact_hits, complete, rows)

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
        # Written after the response, retried, never lost (`recall_record`).
        await self._recorder.submit(
            RecallRecord(event=event, fact_ids=[r.fact.fact_id for r in results], now=now)
        )
        return event.event_id
