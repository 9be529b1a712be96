"""The reconciler's update step, pure: which live facts form candidate pairs for the
adjudicator (`adjudicator.py`), and which decisions to apply.

A candidate pair is two live facts with the same non-empty key entity, written at
different times (`older` first by `valid_from`, then `created_at`), not the same words,
that state the same key attribute or whose content is close: embedding cosine ≥
`update_similarity` or a share of content words ≥ `update_word_overlap`. Only pairs with a
fact newer than `since_ms` are returned (older pairs were decided by an earlier run), at
most `max_update_pairs`, newest first; per entity only its newest `max_entity_facts`
statements are compared.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from agent_memory.lifecycle._reconcile_models import FactRow, ReconcileConfig
from agent_memory.lifecycle.adjudicator import Adjudication, Statement, UpdatePair
from agent_memory.tiers.semantic.keys import content_words


def statement(fact: FactRow) -> Statement:
    return Statement(
        fact_id=fact.fact_id,
        content=fact.content,
        entity=fact.key_entity,
        attribute=fact.key_attribute,
        source=fact.key_source,
        valid_from=fact.valid_from,
        created_at=fact.created_at,
    )


def _order(fact: FactRow) -> tuple[int, int, str]:
    return (fact.valid_from, fact.created_at, fact.fact_id)


def _cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float:
    if a is None or b is None:
        return 0.0
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    return float(np.dot(va, vb) / (na * nb)) if na and nb else 0.0


def find_update_candidates(
    facts: Sequence[FactRow],
    vectors: Mapping[str, Sequence[float]],
    config: ReconcileConfig,
    since_ms: int = 0,
) -> list[UpdatePair]:
    """The candidate pairs among `facts` (see the module docstring)."""
    by_entity: dict[str, list[FactRow]] = defaultdict(list)
    for fact in facts:
        if fact.key_entity:
            by_entity[fact.key_entity].append(fact)
    pairs: list[UpdatePair] = []
    for group in by_entity.values():
        if len(group) < 2:
            continue
        group.sort(key=_order)
        # The newest statements about an entity are the ones an update can concern; a cap
        # keeps one busy entity ("user") from costing n^2 comparisons.
        group = group[-config.max_entity_facts :]
        words = [content_words(f.content, f.key_entity) for f in group]
        for j in range(1, len(group)):
            newer = group[j]
            for i in range(j):
                older = group[i]
                if max(older.created_at, newer.created_at) <= since_ms:
                    continue
                if older.content_hash == newer.content_hash:
                    continue  # the same words: dedup's job
                union = words[i] | words[j]
                overlap = len(words[i] & words[j]) / len(union) if union else 1.0
                similarity = _cosine(vectors.get(older.fact_id), vectors.get(newer.fact_id))
                same_attribute = bool(older.key_attribute) and (
                    older.key_attribute == newer.key_attribute
                )
                if not (
                    same_attribute
                    or similarity >= config.update_similarity
                    or overlap >= config.update_word_overlap
                ):
                    continue
                pairs.append(
                    UpdatePair(
                        older=statement(older),
                        newer=statement(newer),
                        similarity=round(max(-1.0, min(1.0, similarity)), 6),
                    )
                )
    pairs.sort(key=lambda p: (-p.newer.created_at, -p.older.created_at, p.older.fact_id))
    return pairs[: config.max_update_pairs]


def updates_to_apply(
    decisions: Sequence[Adjudication], pairs: Sequence[UpdatePair]
) -> list[tuple[UpdatePair, Adjudication]]:
    """The `update` (and `duplicate`) decisions to apply, each older fact once: superseded
    by the first later statement that updates it, its direct successor (so a chain
    s1 → s2 → s3 links each to the next one, the newest stays live, history is a chain)."""
    chosen: dict[str, tuple[UpdatePair, Adjudication]] = {}
    for pair, decision in zip(pairs, decisions, strict=True):
        if decision.decision not in ("update", "duplicate"):
            continue
        current = chosen.get(pair.older.fact_id)
        if current is None or _newer_key(pair) < _newer_key(current[0]):
            chosen[pair.older.fact_id] = (pair, decision)
    return sorted(chosen.values(), key=lambda item: _order_pair(item[0]))


def _newer_key(pair: UpdatePair) -> tuple[int, int, str]:
    # The first later statement that updates a fact is its direct successor in the chain.
    return (pair.newer.valid_from, pair.newer.created_at, pair.newer.fact_id)


def _order_pair(pair: UpdatePair) -> tuple[int, int, str]:
    return (pair.older.valid_from, pair.older.created_at, pair.older.fact_id)
