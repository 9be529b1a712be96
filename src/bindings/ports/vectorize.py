"""Vectorize port (vectorize/reference/client-api, metadata-filtering, limits). Scores are
cosine similarity; `upsert` replaces whole vectors; value types load in bare Pyodide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

VECTORIZE_MAX_ID_BYTES = 64
VECTORIZE_MAX_NAMESPACE_BYTES = 64
VECTORIZE_MAX_METADATA_BYTES = 10 * 1024
VECTORIZE_MAX_TOP_K = 100
VECTORIZE_MAX_TOP_K_WITH_DATA = 20
VECTORIZE_MAX_BATCH = 1000
VECTORIZE_MAX_FILTER_BYTES = 2048
VECTORIZE_MAX_DIMENSIONS = 1536
VECTORIZE_MAX_VECTORS = 10_000_000  # per index (limits page); an account may have 50,000

ReturnMetadata = Literal["none", "all"]
# {"field": value} (implicit $eq) or {"field": {"$in": [...], "$gte": 3, ...}}
MetadataFilter = dict[str, Any]


@dataclass(frozen=True, slots=True)
class VectorRecord:
    id: str
    values: list[float]
    namespace: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VectorMatch:
    id: str
    score: float
    namespace: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class VectorQueryResult:
    count: int
    matches: list[VectorMatch]


@dataclass(frozen=True, slots=True)
class VectorIndexInfo:
    dimensions: int
    vector_count: int
    metric: Literal["cosine"] = "cosine"


class VectorIndex(Protocol):
    async def upsert(self, vectors: Sequence[VectorRecord]) -> None: ...

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: MetadataFilter | None = None,
        return_metadata: ReturnMetadata = "none",
    ) -> VectorQueryResult: ...

    async def get_by_ids(self, ids: Sequence[str]) -> list[VectorRecord]: ...

    async def delete_by_ids(self, ids: Sequence[str]) -> None: ...

    async def describe(self) -> VectorIndexInfo: ...
