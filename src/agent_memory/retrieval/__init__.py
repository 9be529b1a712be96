"""How memories are ranked: pure functions, no storage (ADR-0051 retrieval scoring).

* `terms`: query text → FTS5 match expression and exact-match candidates;
* `fusion`: several channels' ranked hits → one relevance per candidate;
* `scoring`: relevance + recency + confidence + density with tier-aware weights
  (`RetrievalConfig`, overridable by `MEMORY_RETRIEVAL_CONFIG`), and the breakdown every
  result carries so a score can be explained;
* `ranking`: fused candidates ordered by their score parts (`rank_candidates`);
* `bm25`: index terms of a text and BM25F over two fields (the keyword index's formula).
The bottom of the core: imports nothing else from `agent_memory`.
"""

from agent_memory.retrieval.fusion import ChannelDetail, ChannelHit, ChannelResult, fuse
from agent_memory.retrieval.ranking import rank_candidates
from agent_memory.retrieval.scoring import (
    RetrievalConfig,
    ScoreBreakdown,
    ScoringWeights,
    Tier,
    breakdown,
    information_density,
    recency_decay,
    score_parts,
)
from agent_memory.retrieval.terms import exact_match_candidates, fts5_match_expression

__all__ = [
    "ChannelDetail",
    "ChannelHit",
    "ChannelResult",
    "RetrievalConfig",
    "ScoreBreakdown",
    "ScoringWeights",
    "Tier",
    "breakdown",
    "exact_match_candidates",
    "fts5_match_expression",
    "fuse",
    "information_density",
    "rank_candidates",
    "recency_decay",
    "score_parts",
]
