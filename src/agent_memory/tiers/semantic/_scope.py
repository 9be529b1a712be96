"""What every part of the semantic tier shares: one tenant's stores, named once.

`FactScope` is built by `SemanticMemory` at construction and handed to the write path,
the recall pipeline and the vector repair, so the tenant (and its namespace) is fixed in one
place and no part can name another tenant. Every D1 statement here starts its WHERE clause
with `tenant_id = ?`.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from agent_memory.governance.events import EventLog
from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.policy import WriteGate
from agent_memory.retrieval.scoring import RetrievalConfig, Tier
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from agent_memory.tiers.semantic.models import SemanticTierUnavailable, embedding_tag
from agent_memory.tiers.semantic.tenant_vectors import own_vector_ids
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.embedder import Embedder, EmbeddingConfig
from bindings.ports.kv import KVNamespace
from bindings.ports.sql import Row
from bindings.ports.vectorize import VectorIndex

log = logging.getLogger(__name__)

EMBED_BATCH = 100  # Workers AI takes ≤ 100 texts per call


def ms(seconds: float) -> int:
    """Epoch seconds to the epoch milliseconds D1 stores."""
    return round(seconds * 1000)


def check_matrix(matrix: Any, rows: int, config: EmbeddingConfig) -> None:
    """Raise unless the embedder returned `rows` vectors of the configured dimensions."""
    shape = getattr(matrix, "shape", None)
    if shape is None or tuple(shape) != (rows, config.dimensions):
        raise RuntimeError(
            f"embedder returned shape {shape}, expected ({rows}, {config.dimensions})"
        )


@dataclass(frozen=True, slots=True)
class FactScope:
    """One tenant's semantic stores and the settings every operation on them uses."""

    tenant_id: str
    namespace: str
    db: D1Database
    vectors: VectorIndex
    embedder: Embedder | None
    clock: Clock
    config: RetrievalConfig
    agent_type: str
    run_id: str | None
    tier: Tier
    events: EventLog
    gate: WriteGate
    # Seals and opens the personal fields of fact metadata (docs/personal-data.md).
    personal: PersonalData
    # `ctx.waitUntil`: work that may finish after the response. None: done before returning.
    background: BackgroundTasks | None = None
    # Where recall records that D1 refused every time wait to be written back
    # (`recall_record`). None: such a record is logged at ERROR with its payload.
    kv: KVNamespace | None = None

    async def after_response(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run `work` after the response when a background is bound, else now. A failure is
        logged, never raised: `work` must be something the caller's result does not need."""

        async def guarded() -> None:
            try:
                await work
            except Exception as exc:
                log.warning("%s failed for tenant %s: %s", what, self.tenant_id, exc)

        if self.background is not None:
            self.background.wait_until(guarded())
        else:
            await guarded()

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise SemanticTierUnavailable("no embedder is bound; learn and recall need one")
        return self.embedder

    def vector_filter(self, config: EmbeddingConfig, agent_type: str | None) -> dict[str, Any]:
        """The metadata filter of every vector query of this tenant."""
        # tenant_id on top of the namespace (ADR-0030 defence in depth) and the embedding
        # config, so a query never compares vectors of different models (DESIGN inv. 6).
        flt: dict[str, Any] = {"tenant_id": self.tenant_id, "embedding": embedding_tag(config)}
        if agent_type is not None:
            flt["agent_type"] = agent_type
        return flt

    async def load_rows(self, fact_ids: Sequence[str], columns: str = "*") -> dict[str, Row]:
        """This tenant's rows among `fact_ids` (any status), by fact id."""
        rows: dict[str, Row] = {}
        for chunk in chunks(fact_ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = (
                await self.db.prepare(
                    f"SELECT {columns} FROM semantic_facts "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks})"
                )
                .bind(self.tenant_id, *chunk)
                .all()
            )
            for row in result.results:
                rows[row["fact_id"]] = row
        return rows

    async def own_vector_ids(self, ids: Sequence[str]) -> list[str]:
        """The ids among `ids` whose vector belongs to this tenant (`tenant_vectors`)."""
        return await own_vector_ids(self.vectors, self.tenant_id, ids)
