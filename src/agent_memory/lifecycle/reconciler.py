"""The reconciler (ADR-0051's homeostatic lifecycle): dedup, conflicts, promotion, decay,
linking — each step a pure function over rows, applied to one tenant by `Reconciler`.

Pure steps (no I/O; each has its own tests):

* `find_duplicates`: exact duplicates first (same content hash, compatible subjects),
  then near duplicates (embedding cosine ≥ `similarity_threshold`, same subject). The
  entry with the higher confidence is kept (ties: the more specific subject, then the
  older entry); the others merge into it — their provenance is moved to it and they are
  superseded by it.
* `resolve_conflicts`: live facts with the same subject and predicate but different
  objects. The winner has the highest recency * confidence * source weight; every other
  one is superseded by it (`superseded_by`, `valid_to` = now) and kept, never deleted.
  Predicates in `multi_valued_predicates` (by default the free-text `states`) hold many
  objects and are left alone.
* `find_promotions`: an observation — `(subject, predicate, object)` from an episode's
  `data.observations` (or an `observation` episode's own text) — recurring in at least
  `promotion_min_episodes` distinct episodes, always with the same object, and with mean
  confidence ≥ `promotion_min_confidence`, becomes a semantic fact with provenance to
  those episodes (`fact_provenance`, `promoted_from`). Observations whose subject and
  predicate were seen with different objects are not promoted.
* `find_decay`: episodes older than `decay_ttl_days` that are salient (importance ≥
  `decay_min_importance`) are summarised per subject into one semantic fact
  (`summarised_from` provenance); the rest are left for the weekly prune.
* `find_links`: pairs of facts whose vectors are nearest neighbours with cosine ≥
  `link_threshold` become links (one row per direction); recall can follow them one hop
  (`agent_memory.tiers.semantic.links`).

`Reconciler.run(tenant)` loads the tenant's live facts (≤ `max_facts`), the episodes it
needs, and the vectors, applies the steps in that order, and reports what it did. Writes go
through the semantic tier (`SemanticMemory.learn`, so they are checked by the write policy)
or, for supersessions, through a `WriteGate` proposal and a guarded UPDATE (`status =
'active'` still), so a concurrent run cannot supersede a fact twice. Every statement is
`tenant_id = ?` first. It also finishes facts left `pending_vector` (invariant 5).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.events import EventLog
from agent_memory.governance.policy import WriteGate, WriteProposal
from agent_memory.ids import content_hash, normalize_content
from agent_memory.retrieval.scoring import recency_decay
from agent_memory.tiers.semantic import DEFAULT_SUBJECT, FactInput, SemanticMemory
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import Row
from bindings.ports.vectorize import VectorIndex

log = logging.getLogger(__name__)

RECONCILER_SOURCE = "reconciler"
IDS_PER_STATEMENT = 90
SUMMARY_MAX_CHARS = 2_000
DAY_MS = 86_400_000


class ReconcileConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    similarity_threshold: float = Field(default=0.95, gt=0.0, le=1.0)
    link_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    link_top_k: int = Field(default=5, ge=1, le=20)
    promotion_min_episodes: int = Field(default=3, ge=2)
    promotion_min_confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    decay_ttl_days: int = Field(default=30, ge=1)
    decay_min_importance: float = Field(default=0.7, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(default=30.0, gt=0.0)
    source_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "admin": 1.0,
            "learn": 0.9,
            "store_memory": 0.8,
            "mcp": 0.8,
            "reconciler": 0.7,
        }
    )
    default_source_weight: float = Field(default=0.6, ge=0.0)
    multi_valued_predicates: frozenset[str] = frozenset({"states"})
    max_facts: int = Field(default=5_000, ge=1)
    max_episodes: int = Field(default=5_000, ge=1)

    def source_weight(self, source: str) -> float:
        return self.source_weights.get(source, self.default_source_weight)


# --------------------------------------------------------------------------- rows


class FactRow(BaseModel):
    """What the pure steps need of a `semantic_facts` row (times in epoch ms)."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    subject: str
    predicate: str
    object: str = ""
    content: str
    content_hash: str
    confidence: float
    source: str = "learn"
    created_at: int
    updated_at: int
    valid_from: int = 0

    @classmethod
    def from_row(cls, row: Row) -> FactRow:
        return cls.model_validate({name: row.get(name) for name in cls.model_fields})


class EpisodeRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode_id: str
    subject: str | None = None
    kind: str
    content: str
    data: dict[str, Any] = Field(default_factory=dict)
    importance: float = 0.5
    created_at: int

    @classmethod
    def from_row(cls, row: Row) -> EpisodeRow:
        data = row.get("data")
        return cls(
            episode_id=row["episode_id"],
            subject=row.get("subject"),
            kind=row["kind"],
            content=row["content"],
            data=json.loads(data) if isinstance(data, str) else (data or {}),
            importance=float(row.get("importance") or 0.5),
            created_at=int(row["created_at"]),
        )


class Merge(BaseModel):
    model_config = ConfigDict(frozen=True)

    keep: str
    drop: str
    reason: Literal["exact", "similar"]
    similarity: float


class Supersede(BaseModel):
    model_config = ConfigDict(frozen=True)

    winner: str
    loser: str
    subject: str
    predicate: str


class Promotion(BaseModel):
    model_config = ConfigDict(frozen=True)

    subject: str
    predicate: str
    object: str
    content: str
    confidence: float
    episode_ids: tuple[str, ...]


class Summary(BaseModel):
    model_config = ConfigDict(frozen=True)

    subject: str
    content: str
    confidence: float
    episode_ids: tuple[str, ...]


class Link(BaseModel):
    model_config = ConfigDict(frozen=True)

    from_fact_id: str
    to_fact_id: str
    score: float


# --------------------------------------------------------------------------- pure steps


def _rank_key(fact: FactRow) -> tuple[float, int, int, str]:
    # Higher confidence first, then a specific subject over the catch-all, then older.
    return (-fact.confidence, fact.subject == DEFAULT_SUBJECT, fact.created_at, fact.fact_id)


def _compatible_subjects(a: FactRow, b: FactRow) -> bool:
    return a.subject == b.subject or DEFAULT_SUBJECT in (a.subject, b.subject)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(va, vb) / (na * nb))


def find_duplicates(
    facts: Sequence[FactRow],
    vectors: Mapping[str, Sequence[float]],
    config: ReconcileConfig,
) -> list[Merge]:
    """Which facts merge into which (see the module docstring). Each fact is dropped at
    most once and never into a fact that is itself dropped."""
    ordered = sorted(facts, key=_rank_key)
    dropped: set[str] = set()
    merges: list[Merge] = []
    # 1. Exact: same normalised content hash.
    by_hash: dict[str, list[FactRow]] = defaultdict(list)
    for fact in ordered:
        by_hash[content_hash(fact.content)].append(fact)
    for group in by_hash.values():
        for i, keep in enumerate(group):
            if keep.fact_id in dropped:
                continue
            for other in group[i + 1 :]:
                if other.fact_id not in dropped and _compatible_subjects(keep, other):
                    dropped.add(other.fact_id)
                    merges.append(
                        Merge(keep=keep.fact_id, drop=other.fact_id, reason="exact", similarity=1.0)
                    )
    # 2. Similar: cosine over the embeddings, within one subject.
    by_subject: dict[str, list[FactRow]] = defaultdict(list)
    for fact in ordered:
        if fact.fact_id not in dropped and fact.fact_id in vectors:
            by_subject[fact.subject].append(fact)
    for group in by_subject.values():
        if len(group) < 2:
            continue
        matrix = np.asarray([vectors[f.fact_id] for f in group], dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        unit = matrix / norms[:, None]
        sims = unit @ unit.T
        for i, keep in enumerate(group):
            if keep.fact_id in dropped:
                continue
            for j in range(i + 1, len(group)):
                other = group[j]
                if other.fact_id in dropped:
                    continue
                if sims[i, j] >= config.similarity_threshold:
                    dropped.add(other.fact_id)
                    merges.append(
                        Merge(
                            keep=keep.fact_id,
                            drop=other.fact_id,
                            reason="similar",
                            similarity=round(float(sims[i, j]), 6),
                        )
                    )
    return merges


def conflict_score(fact: FactRow, now_ms: int, config: ReconcileConfig) -> float:
    """recency * confidence * source weight (recency halves every `recency_half_life_days`)."""
    written = max(fact.updated_at, fact.valid_from, fact.created_at)
    age = max(0.0, (now_ms - written) / 1000.0)
    return (
        recency_decay(age, config.recency_half_life_days)
        * fact.confidence
        * config.source_weight(fact.source)
    )


def resolve_conflicts(
    facts: Sequence[FactRow], now_ms: int, config: ReconcileConfig
) -> list[Supersede]:
    """For each (subject, predicate) with more than one object: the losers."""
    groups: dict[tuple[str, str], list[FactRow]] = defaultdict(list)
    for fact in facts:
        if fact.predicate in config.multi_valued_predicates:
            continue
        groups[(fact.subject, fact.predicate)].append(fact)
    out: list[Supersede] = []
    for (subject, predicate), group in sorted(groups.items()):
        objects = {normalize_content(f.object) for f in group}
        if len(objects) < 2:
            continue
        ranked = sorted(
            group,
            key=lambda f: (-conflict_score(f, now_ms, config), -f.updated_at, f.fact_id),
        )
        winner = ranked[0]
        winner_object = normalize_content(winner.object)
        for loser in ranked[1:]:
            # The same object stated twice is a duplicate, not a conflict (dedup's job).
            if normalize_content(loser.object) != winner_object:
                out.append(
                    Supersede(
                        winner=winner.fact_id,
                        loser=loser.fact_id,
                        subject=subject,
                        predicate=predicate,
                    )
                )
    return out


def _observations(episode: EpisodeRow) -> list[tuple[str, str, str, float]]:
    """(subject, predicate, object, confidence) stated by one episode."""
    found: list[tuple[str, str, str, float]] = []
    subject = episode.subject
    raw = episode.data.get("observations")
    items = raw if isinstance(raw, list) else []
    single = episode.data.get("observation")
    if isinstance(single, dict):
        items = [*items, single]
    for item in items:
        if not isinstance(item, dict):
            continue
        about = item.get("subject", subject)
        predicate, obj = item.get("predicate"), item.get("object")
        if not (isinstance(about, str) and isinstance(predicate, str) and isinstance(obj, str)):
            continue
        if not (about and predicate and obj):
            continue
        confidence = item.get("confidence", episode.importance)
        value = float(confidence) if isinstance(confidence, int | float) else episode.importance
        found.append((about, predicate, obj, max(0.0, min(1.0, value))))
    if not found and episode.kind == "observation" and subject:
        found.append((subject, "observed", episode.content.strip(), episode.importance))
    return found


def find_promotions(
    episodes: Sequence[EpisodeRow],
    config: ReconcileConfig,
    known: set[tuple[str, str, str]] | None = None,
) -> list[Promotion]:
    """Observations recurring consistently and confidently enough to become facts.
    `known`: (subject, predicate, normalised object) already in semantic memory."""
    seen: dict[tuple[str, str], dict[str, list[tuple[str, float, str]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for episode in episodes:
        for subject, predicate, obj, confidence in _observations(episode):
            seen[(subject, predicate)][normalize_content(obj)].append(
                (episode.episode_id, confidence, obj)
            )
    out: list[Promotion] = []
    for (subject, predicate), by_object in sorted(seen.items()):
        if len(by_object) != 1:  # inconsistent: the same question got different answers
            continue
        [(normalised, sightings)] = by_object.items()
        episode_ids = sorted({episode_id for episode_id, _, _ in sightings})
        if len(episode_ids) < config.promotion_min_episodes:
            continue
        confidence = sum(c for _, c, _ in sightings) / len(sightings)
        if confidence < config.promotion_min_confidence:
            continue
        if known is not None and (subject, predicate, normalised) in known:
            continue
        obj = sightings[0][2]
        content = (
            obj if predicate == "observed" else f"{subject} {predicate.replace('_', ' ')} {obj}"
        )
        out.append(
            Promotion(
                subject=subject,
                predicate=predicate,
                object=obj if predicate != "observed" else "",
                content=content[:8_000],
                confidence=round(confidence, 6),
                episode_ids=tuple(episode_ids),
            )
        )
    return out


def find_decay(
    episodes: Sequence[EpisodeRow],
    now_ms: int,
    config: ReconcileConfig,
    summarised: set[str] | None = None,
) -> list[Summary]:
    """Salient episodes past their TTL, summarised per subject (skipping `summarised`)."""
    cutoff = now_ms - config.decay_ttl_days * DAY_MS
    groups: dict[str, list[EpisodeRow]] = defaultdict(list)
    for episode in episodes:
        if episode.created_at >= cutoff or episode.importance < config.decay_min_importance:
            continue
        if summarised is not None and episode.episode_id in summarised:
            continue
        groups[episode.subject or DEFAULT_SUBJECT].append(episode)
    out: list[Summary] = []
    for subject, group in sorted(groups.items()):
        group.sort(key=lambda e: (e.created_at, e.episode_id))
        lines = [" ".join(e.content.split())[:300] for e in group]
        text = f"Summary of {len(group)} past episode(s) about {subject}: " + " | ".join(lines)
        out.append(
            Summary(
                subject=subject,
                content=text[:SUMMARY_MAX_CHARS],
                confidence=round(sum(e.importance for e in group) / len(group), 6),
                episode_ids=tuple(e.episode_id for e in group),
            )
        )
    return out


def find_links(
    new_fact_ids: Sequence[str],
    neighbours: Mapping[str, Sequence[tuple[str, float]]],
    live: set[str],
    config: ReconcileConfig,
) -> list[Link]:
    """Both directions of every (new fact, live neighbour) pair scoring ≥ the threshold."""
    pairs: dict[tuple[str, str], float] = {}
    for fact_id in new_fact_ids:
        for other, score in neighbours.get(fact_id, ()):
            if other == fact_id or other not in live or score < config.link_threshold:
                continue
            value = round(min(1.0, max(-1.0, score)), 6)
            for pair in ((fact_id, other), (other, fact_id)):
                pairs[pair] = max(pairs.get(pair, -1.0), value)
    return [Link(from_fact_id=a, to_fact_id=b, score=s) for (a, b), s in sorted(pairs.items())]


# --------------------------------------------------------------------------- applying


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
    merges: list[Merge] = Field(default_factory=list)
    conflicts: list[Supersede] = Field(default_factory=list)
    new_fact_ids: list[str] = Field(default_factory=list)


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


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
    ) -> None:
        if memory.tenant_id != tenant_id:
            raise ValueError("the semantic memory belongs to another tenant")
        self.tenant_id = tenant_id
        self._db = db
        self._vectors = vectors
        self._memory = memory
        self._embedding_key = embedding_key
        self._clock = clock
        self._gate = gate or WriteGate(tenant_id, clock=clock, events=EventLog(tenant_id, db))
        self.config = config or ReconcileConfig()

    async def run(self) -> ReconcileReport:
        report = ReconcileReport(tenant_id=self.tenant_id)
        now_ms = int(self._clock.now() * 1000)
        report.pending_completed = await self._memory.complete_pending()
        # 1-2. Dedup, then conflicts, over the live facts.
        facts = await self._live_facts()
        report.facts_examined = len(facts)
        vectors = await self._fact_vectors([f.fact_id for f in facts])
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
        # 3-4. Promotion and decay, over the episodes.
        episodes = await self._episodes()
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
        summarised = await self._summarised_episode_ids()
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
            report.model_dump(exclude={"merges", "conflicts", "new_fact_ids"}),
        )
        return report

    def _floor(self) -> float:
        return self._gate.policy.confidence_floor.get("semantic", 0.0)

    # ------------------------------------------------------------------ loading

    async def _live_facts(self) -> list[FactRow]:
        result = await (
            self._db.prepare(
                "SELECT fact_id, subject, predicate, object, content, content_hash, confidence, "
                "source, created_at, updated_at, valid_from FROM semantic_facts "
                "WHERE tenant_id = ? AND status = 'active' AND (valid_to IS NULL OR valid_to > ?) "
                "ORDER BY created_at DESC, fact_id LIMIT ?"
            )
            .bind(self.tenant_id, int(self._clock.now() * 1000), self.config.max_facts)
            .all()
        )
        return [FactRow.from_row(row) for row in result.results]

    async def _fact_vectors(self, fact_ids: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        namespace = self._memory.namespace
        for chunk in _chunks(list(fact_ids), 100):
            for record in await self._vectors.get_by_ids(list(chunk)):
                if (
                    record.namespace == namespace
                    and record.metadata.get("tenant_id") == self.tenant_id
                    and record.values
                ):
                    found[record.id] = list(record.values)
        return found

    async def _episodes(self) -> list[EpisodeRow]:
        result = await (
            self._db.prepare(
                "SELECT episode_id, subject, kind, content, data, importance, created_at "
                "FROM memory_episodes WHERE tenant_id = ? ORDER BY created_at DESC LIMIT ?"
            )
            .bind(self.tenant_id, self.config.max_episodes)
            .all()
        )
        return [EpisodeRow.from_row(row) for row in result.results]

    async def _summarised_episode_ids(self) -> set[str]:
        result = await (
            self._db.prepare(
                "SELECT source_id FROM fact_provenance WHERE tenant_id = ? "
                "AND source_kind = 'episode' AND relation = 'summarised_from'"
            )
            .bind(self.tenant_id)
            .all()
        )
        return {str(row["source_id"]) for row in result.results}

    # ------------------------------------------------------------------ writing

    async def _supersede(
        self, loser: str, winner: str, now_ms: int, *, relation: str | None
    ) -> bool:
        """Mark `loser` superseded by `winner` (kept, never deleted), move its provenance
        (and, for a merge, record it as merged into the winner), drop its vector."""
        proposal = WriteProposal(
            tier="semantic",
            key=winner,
            value={"superseded": loser, "superseded_by": winner, "valid_to": now_ms},
            source=RECONCILER_SOURCE,
            supersedes=loser,
        )
        self._gate.check(proposal)
        statements: list[D1Statement] = [
            self._db.prepare(
                "UPDATE semantic_facts SET status = 'superseded', superseded_by = ?, "
                "valid_to = MAX(valid_from, ?), updated_at = ? "
                "WHERE tenant_id = ? AND fact_id = ? AND status = 'active'"
            ).bind(winner, now_ms, now_ms, self.tenant_id, loser),
            # The winner inherits where the loser came from.
            self._db.prepare(
                "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                "relation, created_at) SELECT tenant_id, ?, source_kind, source_id, relation, ? "
                "FROM fact_provenance WHERE tenant_id = ? AND fact_id = ? "
                "ON CONFLICT DO NOTHING"
            ).bind(winner, now_ms, self.tenant_id, loser),
        ]
        if relation is not None:
            statements.append(
                self._db.prepare(
                    "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                    "relation, created_at) VALUES (?, ?, 'fact', ?, ?, ?) "
                    "ON CONFLICT DO NOTHING"
                ).bind(self.tenant_id, winner, loser, relation, now_ms)
            )
        results = await self._db.batch(statements)
        if results[0].meta.changes == 0:
            return False  # no longer active: another run got there first
        await self._gate.committed([proposal])
        try:
            await self._drop_vectors([loser])
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
        statements = [
            self._db.prepare(
                "INSERT INTO fact_provenance (tenant_id, fact_id, source_kind, source_id, "
                "relation, created_at) VALUES (?, ?, 'episode', ?, ?, ?) ON CONFLICT DO NOTHING"
            ).bind(self.tenant_id, result.fact_id, episode_id, relation, now_ms)
            for episode_id in episode_ids
        ]
        for start in range(0, len(statements), 50):
            await self._db.batch(statements[start : start + 50])
        return result.fact_id

    async def _link(self, now_ms: int) -> int:
        state = await (
            self._db.prepare("SELECT linked_through_ms FROM reconcile_state WHERE tenant_id = ?")
            .bind(self.tenant_id)
            .first_value("linked_through_ms")
        )
        since = int(state or 0)
        result = await (
            self._db.prepare(
                "SELECT fact_id, created_at FROM semantic_facts WHERE tenant_id = ? "
                "AND status = 'active' AND created_at > ? ORDER BY created_at LIMIT ?"
            )
            .bind(self.tenant_id, since, self.config.max_facts)
            .all()
        )
        new_ids = [str(row["fact_id"]) for row in result.results]
        through = max([since, *(int(row["created_at"]) for row in result.results)])
        added = 0
        if new_ids:
            vectors = await self._fact_vectors(new_ids)
            neighbours: dict[str, list[tuple[str, float]]] = {}
            candidates: set[str] = set()
            for fact_id, values in vectors.items():
                matches = await self._neighbours(values)
                neighbours[fact_id] = matches
                candidates.update(other for other, _ in matches)
            live = await self._active_ids(sorted(candidates | set(new_ids)))
            links = find_links(new_ids, neighbours, live, self.config)
            statements = [
                self._db.prepare(
                    "INSERT INTO memory_links (tenant_id, from_fact_id, to_fact_id, score, "
                    "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                ).bind(self.tenant_id, link.from_fact_id, link.to_fact_id, link.score, now_ms)
                for link in links
            ]
            for start in range(0, len(statements), 50):
                results = await self._db.batch(statements[start : start + 50])
                added += sum(r.meta.changes > 0 for r in results)
        await (
            self._db.prepare(
                "INSERT INTO reconcile_state (tenant_id, linked_through_ms, last_run_ms) "
                "VALUES (?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET "
                "linked_through_ms = excluded.linked_through_ms, last_run_ms = excluded.last_run_ms"
            )
            .bind(self.tenant_id, through, now_ms)
            .run()
        )
        return added

    def _vector_filter(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "embedding": self._embedding_key}

    async def _neighbours(self, values: Sequence[float]) -> list[tuple[str, float]]:
        """The tenant's nearest vectors to `values` (same namespace and embedding config)."""
        result = await self._vectors.query(
            list(values),
            top_k=self.config.link_top_k + 1,
            namespace=self._memory.namespace,
            filter=self._vector_filter(),
            return_metadata="none",
        )
        return [(m.id, float(m.score)) for m in result.matches]

    async def _drop_vectors(self, fact_ids: Sequence[str]) -> None:
        """Delete the vectors of superseded facts (only this tenant's: ids are unique per
        index, not per namespace, so an id alone is never trusted)."""
        records = await self._vectors.get_by_ids(list(fact_ids))
        mine = [
            r.id
            for r in records
            if r.namespace == self._memory.namespace
            and r.metadata.get("tenant_id") == self.tenant_id
        ]
        if mine:
            await self._vectors.delete_by_ids(mine)

    async def _active_ids(self, fact_ids: Sequence[str]) -> set[str]:
        live: set[str] = set()
        for chunk in _chunks(list(fact_ids), IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = await (
                self._db.prepare(
                    f"SELECT fact_id FROM semantic_facts WHERE tenant_id = ? "
                    f"AND fact_id IN ({marks}) AND status = 'active'"
                )
                .bind(self.tenant_id, *chunk)
                .all()
            )
            live.update(str(row["fact_id"]) for row in result.results)
        return live
