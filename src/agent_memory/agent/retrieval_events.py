"""`memory_retrieved` events for the reads an agent turn makes outside semantic recall.

Working memory and the episodic context are scored with their tier's weights
(`retrieval.rank`); `record_retrieval` writes one event per read with each item's score
parts, in the background: a turn never waits for, or fails over, its audit trail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agent_memory.governance.events import EventLog, EventTier, RetrievedItem, memory_retrieved
from agent_memory.retrieval.scoring import RankedItem, RetrievalConfig
from bindings.environment import Bindings

log = logging.getLogger(__name__)


def retrieval_config(bindings: Bindings | None) -> RetrievalConfig:
    """The deployment's retrieval config: the defaults overridden by `MEMORY_RETRIEVAL_CONFIG`
    (validated at startup by `Settings`), or the defaults without bindings. The one place
    every reader of the var goes through."""
    if bindings is None:
        return RetrievalConfig()
    try:
        return RetrievalConfig.from_json(bindings.settings.memory_retrieval_config)
    except ValueError as exc:  # validated at startup; never fail a turn over it here
        log.warning("MEMORY_RETRIEVAL_CONFIG unusable, using the defaults: %s", exc)
        return RetrievalConfig()


def record_retrieval(
    bindings: Bindings | None,
    tenant: str,
    tier: EventTier,
    query: str,
    ranked: Sequence[RankedItem],
    agent_type: str,
    now: float,
    pool: int,
) -> None:
    """One `memory_retrieved` event for a tier read, written in the background (best
    effort: a turn never fails over its audit trail)."""
    if bindings is None or bindings.db is None or not tenant or not ranked:
        return
    try:
        events = EventLog(tenant, bindings.db)
    except ValueError:
        return
    event = memory_retrieved(
        tenant_id=tenant,
        tier=tier,
        now=now if now > 0 else bindings.clock.now(),
        query=query,
        top_k=len(ranked),
        results=[
            RetrievedItem(
                id=r.item.id,
                score=round(r.parts[0], 6),
                relevance=round(r.parts[1], 6),
                recency=round(r.parts[2], 6),
                confidence=round(r.parts[3], 6),
                density=round(r.parts[4], 6),
            )
            for r in ranked
        ],
        candidates={"pool": pool},
        agent_type=agent_type,
    )

    async def write() -> None:
        try:
            await events.record(event)
        except Exception as exc:
            log.warning("memory_retrieved (%s) not recorded for %s: %s", tier, tenant, exc)

    bindings.background.wait_until(write())
