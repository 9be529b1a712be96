"""Retrieval scoring (ADR-0051): one score per recalled memory, with its breakdown.

    score = w_rel · relevance + w_rec · recency_decay + w_conf · confidence + w_den · density

* relevance: the fused relevance of the retrieval channels, in [0, 1] (`fusion.py`);
* recency_decay: `0.5 ** (age / half_life)` on the time the memory was last written or
  confirmed, in (0, 1];
* confidence: the memory's own confidence, in [0, 1];
* density: how much the memory says — distinct informative words over a saturation count
  (`information_density`), in [0, 1]. Greetings and acknowledgements score low, so among
  equally relevant memories the one with content wins.

Weights are per tier (`RetrievalConfig.tiers`) and normalised to sum to 1, so every score
lies in [0, 1]. The defaults below are priors chosen from what each tier is for, not
fitted to any data set; a deployment overrides them with the JSON of `RetrievalConfig`
(`RetrievalConfig.from_json`, e.g. from a wrangler var).
"""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_memory.retrieval.bm25 import Bm25Params
from agent_memory.retrieval.fusion import FusionConfig
from agent_memory.retrieval.terms import content_terms

Tier = Literal["working", "episodic", "semantic", "procedural"]
DAY_SECONDS = 86_400.0
# Informative words at which a memory counts as fully dense; a one-line fact has ~5-15.
DENSITY_SATURATION_TERMS = 8


class ScoringWeights(BaseModel):
    model_config = ConfigDict(frozen=True)

    relevance: float = Field(ge=0.0)
    recency: float = Field(ge=0.0)
    confidence: float = Field(ge=0.0)
    density: float = Field(ge=0.0)
    recency_half_life_days: float = Field(gt=0.0)

    @model_validator(mode="after")
    def _some_weight(self) -> ScoringWeights:
        if self.relevance + self.recency + self.confidence + self.density <= 0:
            raise ValueError("at least one scoring weight must be positive")
        return self

    def normalized(self) -> tuple[float, float, float, float]:
        """(w_rel, w_rec, w_conf, w_den) scaled to sum to 1."""
        total = self.relevance + self.recency + self.confidence + self.density
        return (
            self.relevance / total,
            self.recency / total,
            self.confidence / total,
            self.density / total,
        )


def _default_tiers() -> dict[str, ScoringWeights]:
    return {
        # In-run scratch: what was just written matters most.
        "working": ScoringWeights(
            relevance=0.6, recency=0.3, confidence=0.05, density=0.05, recency_half_life_days=1 / 24
        ),
        # Events: relevance first, but last week's episode beats last quarter's.
        "episodic": ScoringWeights(
            relevance=0.6, recency=0.25, confidence=0.05, density=0.1, recency_half_life_days=7
        ),
        # Stable facts: mostly what the query asks; confidence and content break ties.
        "semantic": ScoringWeights(
            relevance=0.75, recency=0.05, confidence=0.1, density=0.1, recency_half_life_days=90
        ),
        # Routines: a proven (high-confidence) procedure beats a merely similar one.
        "procedural": ScoringWeights(
            relevance=0.6, recency=0.05, confidence=0.3, density=0.05, recency_half_life_days=180
        ),
    }


class KeywordConfig(BaseModel):
    """BM25F constants of the keyword channel (`retrieval.bm25`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k1: float = Field(default=1.2, gt=0.0, le=10.0)
    b: float = Field(default=0.75, ge=0.0, le=1.0)
    # The weight of a memory's context (session neighbours, date words) against its own text.
    context_weight: float = Field(default=0.4, ge=0.0, le=1.0)

    def params(self) -> Bm25Params:
        return Bm25Params(k1=self.k1, b=self.b, context_weight=self.context_weight)


class ContextConfig(BaseModel):
    """Contextual indexing (`tiers.semantic._context`): how many neighbours in its session a
    memory is indexed (keyword context field) and embedded with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    before: int = Field(default=2, ge=0, le=5)
    after: int = Field(default=1, ge=0, le=5)
    embed_before: int = Field(default=1, ge=0, le=5)


class RetrievalConfig(BaseModel):
    """Scoring weights per tier and the channel fusion. Immutable; build once per request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tiers: dict[str, ScoringWeights] = Field(default_factory=_default_tiers)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    keyword: KeywordConfig = Field(default_factory=KeywordConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    # Candidates taken from each channel before fusion (Vectorize allows topK ≤ 100). 50:
    # on the LoCoMo dev split recall@10 is 0.811 / 0.806 / 0.803 with 100 / 70 / 50, while
    # every candidate is read, scored and fused, so 50 takes about a third off a 100K-fact
    # recall's p99 (docs/semantic-memory.md, "How the constants were chosen").
    candidate_pool: int = Field(default=50, ge=1, le=1000)

    def weights_for(self, tier: str) -> ScoringWeights:
        weights = self.tiers.get(tier)
        if weights is None:
            raise KeyError(f"no scoring weights configured for tier {tier!r}")
        return weights

    @classmethod
    def from_json(cls, text: str) -> RetrievalConfig:
        """Defaults overridden by a JSON object; tiers not named keep their defaults."""
        if not text.strip():
            return cls()
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("retrieval config must be a JSON object")
        tiers = {
            **_default_tiers(),
            **{k: ScoringWeights.model_validate(v) for k, v in data.pop("tiers", {}).items()},
        }
        return cls.model_validate({**data, "tiers": tiers})


class ScoreBreakdown(BaseModel):
    """Each component (in [0, 1]), the normalised weight it got, and the total."""

    relevance: float
    recency: float
    confidence: float
    density: float
    weights: dict[str, float]
    total: float


def recency_decay(age_seconds: float, half_life_days: float) -> float:
    """`0.5 ** (age / half_life)`; 1.0 for age ≤ 0 (clock skew never boosts above 1)."""
    if age_seconds <= 0:
        return 1.0
    return math.pow(0.5, age_seconds / (half_life_days * DAY_SECONDS))


def information_density(text: str) -> float:
    """Distinct informative words / `DENSITY_SATURATION_TERMS`, capped at 1."""
    return min(1.0, len(content_terms(text)) / DENSITY_SATURATION_TERMS)


def score_parts(
    *,
    relevance: float,
    written_at: float,
    confidence: float,
    density: float,
    now: float,
    weights: ScoringWeights,
) -> tuple[float, float, float, float, float]:
    """(total, relevance, recency, confidence, density), components clamped to [0, 1].
    The allocation-free core of `score`, for ranking many candidates."""
    w_rel, w_rec, w_conf, w_den = weights.normalized()
    rel = min(1.0, max(0.0, relevance))
    rec = recency_decay(now - written_at, weights.recency_half_life_days)
    conf = min(1.0, max(0.0, confidence))
    den = min(1.0, max(0.0, density))
    return w_rel * rel + w_rec * rec + w_conf * conf + w_den * den, rel, rec, conf, den


def breakdown(
    parts: tuple[float, float, float, float, float], weights: ScoringWeights
) -> ScoreBreakdown:
    """The `ScoreBreakdown` of `score_parts`' result."""
    w_rel, w_rec, w_conf, w_den = weights.normalized()
    total, rel, rec, conf, den = parts
    return ScoreBreakdown(
        relevance=rel,
        recency=rec,
        confidence=conf,
        density=den,
        weights={"relevance": w_rel, "recency": w_rec, "confidence": w_conf, "density": w_den},
        total=total,
    )


def score(
    *,
    relevance: float,
    written_at: float,
    confidence: float,
    content: str,
    now: float,
    weights: ScoringWeights,
) -> ScoreBreakdown:
    """The ADR-0051 score of one memory. Times are epoch seconds."""
    parts = score_parts(
        relevance=relevance,
        written_at=written_at,
        confidence=confidence,
        density=information_density(content),
        now=now,
        weights=weights,
    )
    return breakdown(parts, weights)
