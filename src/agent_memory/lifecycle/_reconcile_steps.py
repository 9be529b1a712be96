"""The reconciler's steps (ADR-0051), each a pure function over rows: no I/O, each with
its own tests. `Reconciler.run` applies them in this order:

* `find_duplicates`: exact duplicates first (same content hash, compatible subjects),
  then near duplicates (embedding cosine ≥ `similarity_threshold`, same subject). The
  entry with the higher confidence is kept (ties: the more specific subject, then the
  older entry); the others merge into it — their provenance is moved to it and they are
  superseded by it. Two sentences the update rules read as a change ("now prefers light
  mode" after "prefers dark mode") are never merged: they are the update step's.
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

Private to `agent_memory.lifecycle`: other packages import these names from
`agent_memory.lifecycle.reconciler`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from agent_memory.ids import content_hash, normalize_content
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
from agent_memory.retrieval.scoring import recency_decay
from agent_memory.tiers.semantic.keys import FactKey, judge_update
from agent_memory.tiers.semantic.models import DEFAULT_SUBJECT

SUMMARY_MAX_CHARS = 2_000
DAY_MS = 86_400_000


def _rank_key(fact: FactRow) -> tuple[float, int, int, str]:
    # Higher confidence first, then a specific subject over the catch-all, then older.
    return (-fact.confidence, fact.subject == DEFAULT_SUBJECT, fact.created_at, fact.fact_id)


def _compatible_subjects(a: FactRow, b: FactRow) -> bool:
    return a.subject == b.subject or DEFAULT_SUBJECT in (a.subject, b.subject)


def _states_a_change(a: FactRow, b: FactRow) -> bool:
    """Whether two near-identical sentences are an update ("Alice now prefers light mode"
    after "Alice prefers dark mode"): those are the update step's, never merged as
    duplicates (a merge keeps the older one)."""
    if not (a.key_entity and b.key_entity):
        return False
    older, newer = sorted((a, b), key=lambda f: (f.valid_from, f.created_at, f.fact_id))
    verdict = judge_update(
        older.content,
        FactKey(older.key_entity, older.key_attribute, "none"),
        newer.content,
        FactKey(newer.key_entity, newer.key_attribute, "none"),
    )
    return verdict.decision in ("update", "unsure")


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
                if sims[i, j] >= config.similarity_threshold and not _states_a_change(keep, other):
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
