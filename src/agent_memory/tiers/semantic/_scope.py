"""What every part of the semantic tier shares: one tenant's stores, named once.

`FactScope` is built by `SemanticMemory` at construction and handed to the write path,
the recall pipeline and the vector repair, so the tenant (and its namespace) is fixed in one
place and no part can name another tenant. Every D1 statement here starts its WHERE clause
with `tenant_id = ?`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_memory.governance.events import EventLog
from agent_memory.governance.personal_data import PersonalData, public_view
from agent_memory.governance.policy import WriteGate
from agent_memory.retrieval.scoring import RetrievalConfig, Tier
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from agent_memory.tiers.semantic.keys import FactKey, derive_key, entity_candidates
from agent_memory.tiers.semantic.models import SemanticTierUnavailable, embedding_tag
from agent_memory.tiers.semantic.tenant_vectors import own_vector_ids
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.embedder import Embedder, EmbeddingConfig
from bindings.ports.sql import Row
from bindings.ports.vectorize import VectorIndex

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


class KeyedText(Protocol):
    """What a key is derived from: a new `FactInput`, or a stored row being backfilled."""

    @property
    def content(self) -> str: ...

    @property
    def subject(self) -> str: ...

    @property
    def predicate(self) -> str: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


async def derive_keys(scope: FactScope, inputs: Sequence[KeyedText]) -> list[FactKey]:
    """Each input's key (`keys.derive_key`), with the names the tenant already has facts
    about found in one indexed lookup (`known_subject`)."""
    names = [name for fact in inputs for name in entity_candidates(fact.content)]
    wanted = list(dict.fromkeys(names))[:IDS_PER_STATEMENT]
    known: set[str] = set()
    if wanted:
        marks = ", ".join("?" for _ in wanted)
        result = (
            await scope.db.prepare(
                "SELECT DISTINCT key_entity FROM semantic_facts WHERE tenant_id = ? "
                f"AND key_entity IN ({marks})"
            )
            .bind(scope.tenant_id, *wanted)
            .all()
        )
        known = {str(row["key_entity"]) for row in result.results}
    return [
        derive_key(
            fact.content,
            subject=fact.subject,
            predicate=fact.predicate,
            # Personal fields never feed a derived, indexed value (docs/personal-data.md).
            metadata=public_view(fact.metadata),
            known_entities=known,
        )
        for fact in inputs
    ]
