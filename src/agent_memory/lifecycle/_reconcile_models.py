"""The values the reconciler's steps exchange: their parameters (`ReconcileConfig`), the
rows they read (`FactRow`, `EpisodeRow`, what they need of `semantic_facts` and
`memory_episodes`) and the decisions they return (`Merge`, `Supersede`, `Promotion`,
`Summary`, `Link`). Frozen pydantic models, no I/O.

Private to `agent_memory.lifecycle`: other packages import these names from
`agent_memory.lifecycle.reconciler`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bindings.ports.sql import Row


class ReconcileConfig(BaseModel):
    """The steps' thresholds and weights, and how much one run loads."""

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
    # Update detection: two facts about the same key entity are a candidate pair when
    # they state the same attribute or their content is this close (cosine, or the share
    # of content words they have in common).
    update_similarity: float = Field(default=0.6, gt=0.0, le=1.0)
    update_word_overlap: float = Field(default=0.3, gt=0.0, le=1.0)
    max_update_pairs: int = Field(default=2_000, ge=1)
    max_entity_facts: int = Field(default=200, ge=2)
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
    key_entity: str = ""
    key_attribute: str = ""
    key_source: str = ""

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
