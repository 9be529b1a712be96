"""Scoring for tiers without search channels (working memory, the episodic context): the
same ADR-0051 score as semantic recall, with the tier's weights, over a handful of items.

Relevance is lexical: the share of the query's content words (`terms.content_terms`) that
the item's text contains, in [0, 1] (0 for every item when the query has none, so recency,
confidence and density decide). `rank` returns every item with its score parts, best
first; ties go to the newer item, then the id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_memory.retrieval.scoring import ScoringWeights, information_density, score_parts
from agent_memory.retrieval.terms import content_terms


@dataclass(frozen=True)
class RankItem:
    """One item to score: `written_at` in epoch seconds, `confidence` in [0, 1]."""

    id: str
    text: str
    written_at: float
    confidence: float


@dataclass(frozen=True)
class RankedItem:
    item: RankItem
    # (total, relevance, recency, confidence, density), as `scoring.score_parts` returns.
    parts: tuple[float, float, float, float, float]

    @property
    def score(self) -> float:
        return self.parts[0]


def lexical_relevance(query_terms: set[str], text: str) -> float:
    if not query_terms:
        return 0.0
    return len(query_terms & set(content_terms(text))) / len(query_terms)


def rank(
    query: str, items: Sequence[RankItem], weights: ScoringWeights, now: float
) -> list[RankedItem]:
    """Every item scored with `weights`, best first (ties: newer, then id)."""
    terms = set(content_terms(query))
    ranked = [
        RankedItem(
            item=item,
            parts=score_parts(
                relevance=lexical_relevance(terms, item.text),
                written_at=item.written_at,
                confidence=item.confidence,
                density=information_density(item.text),
                now=now,
                weights=weights,
            ),
        )
        for item in items
    ]
    ranked.sort(key=lambda r: (-r.parts[0], -r.item.written_at, r.item.id))
    return ranked
