"""Ranking working, episodic and procedural memory for a query (the uniform memory API).

Relevance is the share of the query's informative terms (`content_terms`) found in the
item's key and value; the score is the ADR-0051 score with the tier's weights from
`MEMORY_RETRIEVAL_CONFIG`; a workflow's confidence is its posterior mean. Each ranked tier
records one `memory_retrieved` event. (Semantic memory ranks itself: hybrid recall.)
"""

from __future__ import annotations

from agent_memory.agent.retrieval_events import retrieval_config
from agent_memory.governance.events import EventLog, RetrievedItem, memory_retrieved
from agent_memory.retrieval.scoring import score
from agent_memory.retrieval.terms import content_terms
from bindings.environment import Bindings
from worker.memory_tiers import MemoryItem, breakdown_view, json_text


def rank_by_terms(
    bindings: Bindings,
    tenant: str,
    tier: str,
    query: str,
    items: list[MemoryItem],
) -> list[MemoryItem]:
    """Score `items` for `query` by term overlap with the tier's weights, best first;
    items sharing no term with the query are dropped."""
    weights = retrieval_config(bindings).weights_for(tier)
    wanted = set(content_terms(query))
    now = bindings.clock.now()
    scored: list[MemoryItem] = []
    for item in items:
        text = f"{item.key} {json_text(item.value)}"
        found = set(content_terms(text))
        overlap = len(wanted & found) / len(wanted) if wanted else 0.0
        if overlap <= 0:
            continue
        confidence = item.metadata.get("posterior_mean") if tier == "procedural" else None
        written = (item.created_at or now * 1000) / 1000
        b = score(
            relevance=overlap,
            written_at=written,
            confidence=float(confidence) if isinstance(confidence, int | float) else 0.5,
            content=text,
            now=now,
            weights=weights,
        )
        scored.append(
            item.model_copy(
                update={"score": round(b.total, 6), "score_breakdown": breakdown_view(b)}
            )
        )
    scored.sort(key=lambda i: (-(i.score or 0.0), i.key))
    return scored


async def record_retrieval(
    bindings: Bindings,
    tenant: str,
    tier: str,
    query: str,
    limit: int,
    items: list[MemoryItem],
    candidates: int,
) -> None:
    """One `memory_retrieved` event for a ranked working / episodic / procedural search."""
    if bindings.db is None:
        return
    results = [
        RetrievedItem(
            id=i.key,
            score=i.score or 0.0,
            relevance=(i.score_breakdown or {}).get("relevance", 0.0),
            recency=(i.score_breakdown or {}).get("recency", 0.0),
            confidence=(i.score_breakdown or {}).get("confidence", 0.0),
            density=(i.score_breakdown or {}).get("density", 0.0),
        )
        for i in items
    ]
    event = memory_retrieved(
        tenant_id=tenant,
        tier=tier,  # type: ignore[arg-type]
        now=bindings.clock.now(),
        query=query,
        top_k=limit,
        results=results,
        candidates={"terms": candidates},
    )
    await EventLog(tenant, bindings.db).record(event)
