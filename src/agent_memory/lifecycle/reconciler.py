"""The reconciler (ADR-0051's homeostatic lifecycle): dedup, conflicts, promotion, decay,
linking — each step a pure function over rows, applied to one tenant by `Reconciler`.

Where the parts live (this module re-exports their public names):

* `_reconcile_models`: the config, the rows the steps read and the decisions they return;
* `_reconcile_steps`: the pure steps (`find_duplicates`, `resolve_conflicts`,
  `find_promotions`, `find_decay`, `find_links`) and what each decides;
* `_reconcile_store`: the tenant's D1 rows and vectors, read and written;
* here: `Reconciler`, which applies the steps, and its `ReconcileReport`.

`Reconciler.run(tenant)` loads the tenant's live facts (≤ `max_facts`), the episodes it
needs, and the vectors, applies the steps in that order, and reports what it did. Writes go
through the semantic tier (`SemanticMemory.learn`, so they are checked by the write policy)
or, for supersessions, through a `WriteGate` proposal and a guarded UPDATE (`status =
'active'` still), so a concurrent run cannot supersede a fact twice. Every statement is
`tenant_id = ?` first. It also finishes facts left `pending_vector` (invariant 5).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from agent_memory.governance.events import EventLog, memory_written
from agent_memory.governance.policy import WriteGate, WriteProposal
from agent_memory.ids import normalize_content, sha256_hex
from agent_memory.lifecycle._reconcile_models import (
    EpisodeRow,
    FactRow,
    Link,
    Merge,
    Promotion,
    ReconcileConfig,
    Summary,
    Supersede,
)
from agent_memory.lifecycle._reconcile_steps import (
    DAY_MS,
    SUMMARY_MAX_CHARS,
    conflict_score,
    cosine,
    find_decay,
    find_duplicates,
    find_links,
    find_promotions,
    resolve_conflicts,
)
from agent_memory.lifecycle._reconcile_store import (
    ReconcileStore,
)
from agent_memory.lifecycle._updates import find_update_candidates, updates_to_apply
from agent_memory.lifecycle.adjudicator import Adjudication, Adjudicator, RulesAdjudicator
from agent_memory.statements import IDS_PER_STATEMENT
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import FactInput
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.vectorize import VectorIndex

__all__ = [
    "DAY_MS",
    "IDS_PER_STATEMENT",
    "RECONCILER_SOURCE",
    "SUMMARY_MAX_CHARS",
    "EpisodeRow",
    "FactRow",
    "Link",
    "Merge",
    "Promotion",
    "ReconcileConfig",
    "ReconcileReport",
    "Reconciler",
    "Summary",
    "Supersede",
    "conflict_score",
    "cosine",
    "find_decay",
    "find_duplicates",
    "find_links",
    "find_promotions",
    "find_update_candidates",
    "resolve_conflicts",
]

log = logging.getLogger(__name__)

RECONCILER_SOURCE = "reconciler"


class ReconcileReport(BaseModel):
    tenant_id: str
    facts_examined: int = 0
    episodes_examined: int = 0
    merged_exact: int = 0
    merged_similar: int = 0
    superseded_conflicts: int = 0
    promoted: int = 0
    summarised: int = 0
    links_added: int = 0
    pending_completed: int = 0
    keys_backfilled: int = 0
    update_pairs: int = 0
    superseded_updates: int = 0
    adjudicator: str = ""
    merges: list[Merge] = Field(default_factory=list)
    conflicts: list[Supersede] = Field(default_factory=list)
    # Every adjudicated pair's decision; `unsure` ones are listed in the daily brief.
    decisions: list[Adjudication] = Field(default_factory=list)
    new_fact_ids: list[str] = Field(default_factory=list)


class Reconciler:
    """Applies the steps to one tenant's memory."""

    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        vectors: VectorIndex,
        memory: SemanticMemory,
        embedding_key: str,
        clock: Clock,
        gate: WriteGate | None = None,
        config: ReconcileConfig | None = None,
        adjudicator: Adjudicator | None = None,
    ) -> None:
        if memory.tenant_id != tenant_id:
            raise ValueError("the semantic memory belongs to another tenant")
        self.tenant_id = tenant_id
        self.adjudicator: Adjudicator = adjudicator or RulesAdjudicator()
        self._events = EventLog(tenant_id, db)
        self._memory = memory
        self._clock = clock
        self._gate = gate or WriteGate(tenant_id, clock=clock, events=EventLog(tenant_id, db))
        self.config = config or ReconcileConfig()
        self._store = ReconcileStore(
            tenant_id,
            db=db,
            vectors=vectors,
            namespace=memory.namespace,
            embedding_key=embedding_key,
            clock=clock,
        )

    async def run(self) -> ReconcileReport:
        report = ReconcileReport(tenant_id=self.tenant_id)
        now_ms = int(self._clock.now() * 1000)
        report.pending_completed = await self._memory.complete_pending()
        # Facts from before keys existed get theirs, a batch per run, so a newer statement
        # about the same entity can supersede them (migration 0005/0006).
        report.keys_backfilled = await self._memory.backfill_keys()
        # 1-2. Dedup, then conflicts, over the live facts.
        facts = await self._store.live_facts(self.config.max_facts)
        report.facts_examined = len(facts)
        vectors = await self._store.fact_vectors([f.fact_id for f in facts])
        merges = find_duplicates(facts, vectors, self.config)
        for merge in merges:
            if await self._supersede(merge.drop, merge.keep, now_ms, relation="merged_from"):
                report.merges.append(merge)
                if merge.reason == "exact":
                    report.merged_exact += 1
                else:
                    report.merged_similar += 1
        dropped = {m.drop for m in report.merges}
        remaining = [f for f in facts if f.fact_id not in dropped]
        for conflict in resolve_conflicts(remaining, now_ms, self.config):
            if await self._supersede(conflict.loser, conflict.winner, now_ms, relation=None):
                report.conflicts.append(conflict)
                report.superseded_conflicts += 1
        # 2b. Updates in free text: candidate pairs about the same key entity, decided by
        # the adjudicator; pairs whose facts were all examined by an earlier run are not
        # asked again (the link watermark below moves at the end of every run).
        lost = {c.loser for c in report.conflicts}
        await self._updates(
            [f for f in remaining if f.fact_id not in lost],
            vectors,
            await self._store.linked_through(),
            now_ms,
            report,
        )
        # 3-4. Promotion and decay, over the episodes.
        episodes = await self._store.episodes(self.config.max_episodes)
        report.episodes_examined = len(episodes)
        known = {
            (f.subject, f.predicate, normalize_content(f.object)) for f in remaining if f.object
        }
        for promotion in find_promotions(episodes, self.config, known):
            fact_id = await self._learn(
                FactInput(
                    content=promotion.content,
                    subject=promotion.subject,
                    predicate=promotion.predicate,
                    object=promotion.object,
                    confidence=promotion.confidence,
                    source=RECONCILER_SOURCE,
                    metadata={"promoted_from_episodes": len(promotion.episode_ids)},
                ),
                promotion.episode_ids,
                "promoted_from",
                now_ms,
            )
            if fact_id is not None:
                report.promoted += 1
                report.new_fact_ids.append(fact_id)
        summarised = await self._store.summarised_episode_ids()
        for summary in find_decay(episodes, now_ms, self.config, summarised):
            fact_id = await self._learn(
                FactInput(
                    content=summary.content,
                    subject=summary.subject,
                    predicate="summary_of_episodes",
                    confidence=max(summary.confidence, self._floor()),
                    source=RECONCILER_SOURCE,
                    metadata={"summarised_episodes": len(summary.episode_ids)},
                ),
                summary.episode_ids,
                "summarised_from",
                now_ms,
            )
            if fact_id is not None:
                report.summarised += 1
                report.new_fact_ids.append(fact_id)
        # 5. Linking: facts that have not been linked yet.
        report.links_added = await self._link(now_ms)
        log.info(
            "reconcile %s: %s",
            self.tenant_id,
            report.model_dump(exclude={"merges", "conflicts", "new_fact_ids", "decisions"}),
        )
        return report

    async def _updates(
        self,
        facts: Sequence[FactRow],
        vectors: dict[str, list[float]],
        since_ms: int,
        now_ms: int,
        report: ReconcileReport,
    ) -> None:
        report.adjudicator = self.adjudicator.name
        pairs = find_update_candidates(facts, vectors, self.config, since_ms)
        report.update_pairs = len(pairs)
        if not pairs:
            return
        decisions = await self.adjudicator.decide(pairs)
        report.decisions = list(decisions)
        applied: set[tuple[str, str]] = set()
        for pair, decision in updates_to_apply(decisions, pairs):
            done = await self._supersede(
                pair.older.fact_id,
                pair.newer.fact_id,
                now_ms,
                relation="merged_from" if decision.decision == "duplicate" else None,
                valid_to_ms=pair.newer.valid_from,
                link_score=min(1.0, max(0.0, pair.similarity)),
                decision=decision,
            )
            if done:
                applied.add((decision.older, decision.newer))
                report.superseded_updates += 1
        # The applied ones are recorded by the write gate (`memory_written` with the
        # supersession); every other decision gets its own event, so the brief can list
        # the `unsure` ones and an audit can see why a pair was left alone.
        others = [d for d in decisions if (d.older, d.newer) not in applied]
        events = [
            memory_written(
                tenant_id=self.tenant_id,
                tier="semantic",
                now=now_ms / 1000.0,
                content_hash=sha256_hex(f"{d.older}|{d.newer}|{d.decision}|{d.adjudicator}"),
                payload={
                    "op": "adjudicated",
                    "decision": d.decision,
                    "older": d.older,
                    "newer": d.newer,
                    "reason": d.reason,
                    "adjudicator": d.adjudicator,
                    "applied": False,
                },
                agent_type=RECONCILER_SOURCE,
            )
            for d in others
        ]
        if events:
            await self._events.record_many(events)

    def _floor(self) -> float:
        return self._gate.policy.confidence_floor.get("semantic", 0.0)

    # ------------------------------------------------------------------ writing

    async def _supersede(
        self,
        loser: str,
        winner: str,
        now_ms: int,
        *,
        relation: str | None,
        valid_to_ms: int | None = None,
        link_score: float | None = None,
        decision: Adjudication | None = None,
    ) -> bool:
        """Mark `loser` superseded by `winner` (kept, never deleted), move its provenance
        (and, for a merge, record it as merged into the winner), drop its vector. An
        update (`decision`) also links the two and puts its decision, reason and
        adjudicator into the `memory_written` event."""
        proposal = WriteProposal(
            tier="semantic",
            key=winner,
            value={
                "superseded": loser,
                "superseded_by": winner,
                "valid_to": now_ms if valid_to_ms is None else valid_to_ms,
            },
            source=RECONCILER_SOURCE,
            supersedes=loser,
            decision=None
            if decision is None
            else {
                "op": "superseded",
                "decision": decision.decision,
                "reason": decision.reason,
                "adjudicator": decision.adjudicator,
            },
        )
        self._gate.check(proposal)
        if not await self._store.supersede(
            loser,
            winner,
            now_ms,
            relation=relation,
            valid_to_ms=valid_to_ms,
            link_score=link_score,
        ):
            return False  # no longer active: another run got there first
        await self._gate.committed([proposal])
        try:
            await self._store.drop_vectors([loser])
        except Exception as exc:  # recall ignores superseded rows; a later run retries
            log.warning("reconcile %s: vector of %s not deleted: %s", self.tenant_id, loser, exc)
        return True

    async def _learn(
        self,
        fact: FactInput,
        episode_ids: Sequence[str],
        relation: Literal["promoted_from", "summarised_from"],
        now_ms: int,
    ) -> str | None:
        result = await self._memory.learn(fact)
        if not result.created:
            return None
        await self._store.add_episode_provenance(result.fact_id, episode_ids, relation, now_ms)
        return result.fact_id

    async def _link(self, now_ms: int) -> int:
        """Link the facts created since the last run to their live nearest neighbours."""
        since = await self._store.linked_through()
        new = await self._store.facts_created_after(since, self.config.max_facts)
        new_ids = [fact_id for fact_id, _ in new]
        through = max([since, *(created_at for _, created_at in new)])
        added = 0
        if new_ids:
            vectors = await self._store.fact_vectors(new_ids)
            neighbours: dict[str, list[tuple[str, float]]] = {}
            candidates: set[str] = set()
            for fact_id, values in vectors.items():
                matches = await self._store.neighbours(values, self.config.link_top_k + 1)
                neighbours[fact_id] = matches
                candidates.update(other for other, _ in matches)
            live = await self._store.active_ids(sorted(candidates | set(new_ids)))
            links = find_links(new_ids, neighbours, live, self.config)
            added = await self._store.insert_links(links, now_ms)
        await self._store.mark_linked(through, now_ms)
        return added
