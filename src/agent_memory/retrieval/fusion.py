"""Fusing the ranked lists of several retrieval channels into one relevance per item.

Each channel (vector similarity, keyword BM25, exact subject/predicate match) returns its
hits best first with a raw score whose scale is the channel's own: cosine in [-1, 1],
BM25 unbounded, match strength in [0, 1]. Two standard, data-independent fusions:

* `relative` (default; "relative score fusion", as in Weaviate's hybrid search): each
  channel's raw scores are min-max normalised over its own hits to [0, 1] (a channel with
  one hit, or all hits equal, gives 1.0), unless the channel declares its scores already
  calibrated (`normalize=False`, the exact-match channel); the relevance is the weighted
  mean over the channels that returned anything. It keeps *how much* better a hit is
  than the next, which rank-only fusion throws away, so a weak channel's arbitrary tail
  cannot outvote a strong channel's clear winner.
* `rrf` (reciprocal rank fusion, Cormack et al. 2009): `Σ w_c / (k + rank_c)`, divided by
  its maximum (`Σ w_c / (k + 1)`, first in every channel) so it also lies in [0, 1].

Both return, per item, the relevance and the per-channel detail (rank, raw score,
normalised score) that `recall` reports in each result's breakdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FusionMethod = Literal["relative", "rrf"]


# Plain dataclasses: a recall builds hundreds of these, and they need no validation.
@dataclass(frozen=True, slots=True)
class ChannelHit:
    id: str
    score: float


@dataclass(slots=True)
class ChannelResult:
    """One channel's hits, best first. `normalize=False`: the scores are already calibrated
    to [0, 1] and are used as they are. `floor`: the score every candidate the channel does
    not list has (BM25: 0), used as the low end of the min-max normalisation instead of the
    lowest listed hit — the channel is then normalised over all candidates, listed or not."""

    name: str
    hits: list[ChannelHit] = field(default_factory=list)
    normalize: bool = True
    floor: float | None = None


@dataclass(frozen=True, slots=True)
class ChannelDetail:
    """How one channel saw one item: 1-based rank (0: scored as a feature, not listed),
    raw score, normalised score."""

    rank: int
    raw: float
    normalized: float


@dataclass(slots=True)
class FusedItem:
    id: str
    relevance: float
    channels: dict[str, ChannelDetail] = field(default_factory=dict)


class FusionConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: FusionMethod = "relative"
    # Equal weights for the two full-text channels unless the embedding model has its own
    # (`model_weights`); exact matches on subject/predicate are a nudge, not a verdict (a
    # common subject matches half a tenant's facts). 0.4 was chosen on the LoCoMo dev split.
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"vector": 1.0, "keyword": 1.0, "exact": 0.4}
    )
    rrf_k: int = Field(default=60, ge=1)
    # Channel weights per embedding model, overriding `channel_weights` for the channels they
    # name: a weaker embedder earns the vector channel less trust. Keys are prefixes of
    # `EmbeddingConfig.model`; the longest matching prefix wins. MiniLM's were chosen on the
    # LoCoMo dev split (docs/semantic-memory.md); bge-small's are a prior (it scores higher
    # than MiniLM on public retrieval benchmarks; Workers AI cannot run offline to tune it).
    model_weights: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {
            "sentence-transformers/all-MiniLM-L6-v2": {"vector": 0.6, "keyword": 1.0},
            "@cf/baai/bge-": {"vector": 1.0, "keyword": 1.0},
        }
    )

    def weight(self, channel: str) -> float:
        return max(0.0, self.channel_weights.get(channel, 1.0))

    def for_model(self, model: str) -> FusionConfig:
        """This configuration with the channel weights of embedding model `model`."""
        matches = [prefix for prefix in self.model_weights if model.startswith(prefix)]
        if not matches:
            return self
        override = self.model_weights[max(matches, key=len)]
        return self.model_copy(update={"channel_weights": {**self.channel_weights, **override}})


def _normalized(hits: Sequence[ChannelHit], normalize: bool, floor: float | None) -> list[float]:
    if not normalize:
        return [min(1.0, max(0.0, hit.score)) for hit in hits]
    scores = [hit.score for hit in hits]
    low, high = (min(scores) if floor is None else floor), max(scores)
    if high <= low:
        return [1.0] * len(scores)
    return [(score - low) / (high - low) for score in scores]


def fuse(
    channels: Sequence[ChannelResult],
    config: FusionConfig,
    *,
    feature_scores: Mapping[str, Mapping[str, float]] | None = None,
) -> list[FusedItem]:
    """Fuse `channels` into items sorted by relevance (ties: channel order, then id).

    `feature_scores` maps a channel name to calibrated scores for items that channel did
    not list (used for a too-broad exact match: it scores the other channels' hits).
    """
    active = [c for c in channels if c.hits and config.weight(c.name) > 0]
    extra = {name: dict(scores) for name, scores in (feature_scores or {}).items() if scores}
    weights = {c.name: config.weight(c.name) for c in active}
    for name in extra:
        weights.setdefault(name, config.weight(name))
    total_weight = sum(weights.values())
    if total_weight <= 0:
        return []
    details: dict[str, dict[str, ChannelDetail]] = {}
    order: dict[str, int] = {}
    for channel in active:
        normalized = _normalized(channel.hits, channel.normalize, channel.floor)
        for position, (hit, norm) in enumerate(zip(channel.hits, normalized, strict=True)):
            if channel.name in details.get(hit.id, {}):
                continue  # a channel lists an id once; keep its best rank
            if config.method == "rrf":
                norm = 1.0 / (config.rrf_k + position + 1)
            details.setdefault(hit.id, {})[channel.name] = ChannelDetail(
                rank=position + 1, raw=hit.score, normalized=norm
            )
            order.setdefault(hit.id, len(order))
    for name, scores in extra.items():
        for item_id, score in scores.items():
            if item_id in details and name not in details[item_id]:
                value = min(1.0, max(0.0, score))
                if config.method == "rrf":
                    # A feature has no rank: count it as a tie for first, scaled by strength.
                    value = value / (config.rrf_k + 1)
                details[item_id][name] = ChannelDetail(rank=0, raw=score, normalized=value)
    ceiling = 1.0 if config.method == "relative" else 1.0 / (config.rrf_k + 1)
    fused = [
        FusedItem(
            id=item_id,
            relevance=sum(weights[name] * d.normalized for name, d in seen.items())
            / (total_weight * ceiling),
            channels=seen,
        )
        for item_id, seen in details.items()
    ]
    fused.sort(key=lambda item: (-item.relevance, order[item.id], item.id))
    return fused
