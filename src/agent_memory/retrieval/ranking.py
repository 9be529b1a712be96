"""Ranking fused candidates by their score parts, the costly part only where it can matter.

`rank_candidates` gives every fused candidate its `scoring.score_parts` and orders them best
first (total, then relevance, then id). The information density is a scan of the text, and
most of scoring's cost over a few hundred candidates; it can add at most its weight to a
total, so it is computed best-first by the other parts only while it can still lift a
candidate into the best `need`. The best `need` are therefore exactly what computing every
density would give; below them a candidate keeps density 0.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from agent_memory.retrieval.fusion import FusedItem
from agent_memory.retrieval.scoring import ScoringWeights, information_density, score_parts
from bindings.ports.sql import Row

Parts = tuple[float, float, float, float, float]


def rank_candidates(
    fused: Sequence[FusedItem],
    rows: Mapping[str, Row],
    weights: ScoringWeights,
    now: float,
    need: int,
) -> list[tuple[Parts, FusedItem]]:
    """`score_parts` of every fused candidate, best first (total, relevance, id), exact for
    at least the best `need`. The information density (a text scan, most of scoring's cost)
    is computed best-first by the other parts only while it can still lift a candidate
    into the best `need`: below that, a candidate keeps density 0, a lower bound that
    cannot reach them."""
    density_weight = weights.normalized()[3]

    def parts(item: FusedItem, density: float) -> Parts:
        row = rows[item.id]
        return score_parts(
            relevance=item.relevance,
            written_at=int(row["updated_at"]) / 1000.0,
            confidence=float(row["confidence"]),
            density=density,
            now=now,
            weights=weights,
        )

    def order(pair: tuple[Parts, FusedItem]) -> tuple[float, float, str]:
        return (-pair[0][0], -pair[0][1], pair[1].id)

    bounds = sorted(((parts(item, 0.0), item) for item in fused), key=order)
    best: list[float] = []  # min-heap of the best `need` exact totals so far
    ranked: list[tuple[Parts, FusedItem]] = []
    for position, (bound, item) in enumerate(bounds):
        # (1e-12: the two sums round differently; a tie must be computed, not skipped)
        if len(best) >= need and bound[0] + density_weight < best[0] - 1e-12:
            ranked.extend(bounds[position:])
            break
        exact = parts(item, information_density(rows[item.id]["content"]))
        heapq.heappush(best, exact[0])
        if len(best) > need:
            heapq.heappop(best)
        ranked.append((exact, item))
    return sorted(ranked, key=order)
