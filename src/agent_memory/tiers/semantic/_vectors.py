"""The vector half of a semantic write, and its repair.

A fact's row is written `pending_vector` first; `VectorSync.write_vectors` then upserts the
vectors and marks the rows `active`. When either step fails the rows stay pending (recall
never returns them) and `complete_pending` finishes them later. The other direction:
`reconcile_vectors` / `drop_stray` delete vectors whose row is gone, so the index never
keeps what D1 no longer has (DESIGN invariant 5).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_memory.statements import IDS_PER_STATEMENT, STATEMENTS_PER_BATCH, chunks
from agent_memory.tiers.semantic._scope import (
    EMBED_BATCH,
    FactScope,
    check_matrix,
    ms,
)
from agent_memory.tiers.semantic.models import embedding_tag
from bindings.ports.embedder import EmbeddingConfig
from bindings.ports.sql import Row
from bindings.ports.vectorize import VECTORIZE_MAX_BATCH, VectorRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class VectorJob:
    """A row that needs its vector written (new, or left pending)."""

    fact_id: str
    content: str
    agent_type: str
    subject: str
    predicate: str
    object: str
    confidence: float
    learned_from_run_id: str | None
    created_at_ms: int


class VectorSync:
    """Writes, completes and repairs one tenant's fact vectors."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope

    def job_from_row(self, row: Row, content: str) -> VectorJob:
        return VectorJob(
            fact_id=row["fact_id"],
            content=content,
            agent_type=row["agent_type"],
            subject=row["subject"],
            predicate=row["predicate"],
            object=row["object"],
            confidence=float(row["confidence"]),
            learned_from_run_id=row.get("learned_from_run_id"),
            created_at_ms=int(row["created_at"]),
        )

    def _vector_record(self, job: VectorJob, values: Any, config: EmbeddingConfig) -> VectorRecord:
        metadata: dict[str, Any] = {
            "tenant_id": self._s.tenant_id,
            "agent_type": job.agent_type,
            "fact_id": job.fact_id,
            "subject": job.subject,
            "predicate": job.predicate,
            "object": job.object,
            "confidence": job.confidence,
            "created_at": job.created_at_ms,
            "embedding": embedding_tag(config),
            "embedding_provider": config.provider,
            "embedding_model": config.model,
            "embedding_dimensions": config.dimensions,
        }
        if job.learned_from_run_id:
            metadata["learned_from_run_id"] = job.learned_from_run_id
        return VectorRecord(
            id=job.fact_id,
            values=np.asarray(values, dtype=np.float64).tolist(),
            namespace=self._s.namespace,
            metadata=metadata,
        )

    async def write_vectors(
        self,
        jobs: Sequence[VectorJob],
        vectors: Mapping[str, Any],
        config: EmbeddingConfig,
        now: float,
    ) -> str | None:
        """Upsert the jobs' vectors, then mark their rows active. Returns None on success,
        else the error text (the rows stay `pending_vector` for `complete_pending`)."""
        if not jobs:
            return None
        records = [self._vector_record(job, vectors[job.fact_id], config) for job in jobs]
        try:
            for chunk in chunks(records, VECTORIZE_MAX_BATCH):
                await self._s.vectors.upsert(chunk)
        except Exception as exc:  # any vector failure leaves a retryable pending row
            log.warning(
                "vector write failed for %d fact(s) of tenant %s; rows stay pending: %s",
                len(records),
                self._s.tenant_id,
                exc,
            )
            return f"vector write failed: {exc}"
        try:
            await self._activate([job.fact_id for job in jobs], config, now)
        except Exception as exc:
            log.warning(
                "activating %d fact(s) of tenant %s failed; rows stay pending: %s",
                len(jobs),
                self._s.tenant_id,
                exc,
            )
            return f"activation failed: {exc}"
        return None

    async def _activate(self, fact_ids: Sequence[str], config: EmbeddingConfig, now: float) -> None:
        statements = []
        for chunk in chunks(fact_ids, IDS_PER_STATEMENT - 5):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._s.db.prepare(
                    "UPDATE semantic_facts SET status = 'active', updated_at = ?, "
                    "embedding_provider = ?, embedding_model = ?, embedding_dimensions = ? "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks}) AND status = 'pending_vector'"
                ).bind(
                    ms(now),
                    config.provider,
                    config.model,
                    config.dimensions,
                    self._s.tenant_id,
                    *chunk,
                )
            )
        for group in chunks(statements, STATEMENTS_PER_BATCH):
            await self._s.db.batch(list(group))

    async def complete_pending(self, limit: int = 100) -> int:
        """Write the vectors of up to `limit` facts left `pending_vector` (oldest first) and
        activate them. Returns how many became active. Safe to run any time."""
        embedder = self._s.require_embedder()
        result = (
            await self._s.db.prepare(
                "SELECT fact_id, content, agent_type, subject, predicate, object, confidence, "
                "learned_from_run_id, created_at FROM semantic_facts "
                "WHERE tenant_id = ? AND status = 'pending_vector' ORDER BY created_at LIMIT ?"
            )
            .bind(self._s.tenant_id, max(1, min(limit, 1000)))
            .all()
        )
        rows = result.results
        done = 0
        for batch in chunks(rows, EMBED_BATCH):
            matrix = await embedder.embed([row["content"] for row in batch])
            check_matrix(matrix, len(batch), embedder.config)
            jobs = [self.job_from_row(row, row["content"]) for row in batch]
            vectors = {job.fact_id: matrix[pos] for pos, job in enumerate(jobs)}
            error = await self.write_vectors(jobs, vectors, embedder.config, self._s.clock.now())
            if error is None:
                done += len(jobs)
        return done

    async def drop_stray(self, fact_ids: Sequence[str]) -> None:
        """Delete vectors whose row is gone (a delete whose vector step failed). Best
        effort: recall already ignores them, so a failure here only delays the cleanup."""
        try:
            await self.reconcile_vectors(fact_ids)
        except Exception as exc:
            log.warning(
                "could not delete %d stray vector(s) of tenant %s: %s",
                len(fact_ids),
                self._s.tenant_id,
                exc,
            )

    async def reconcile_vectors(self, fact_ids: Sequence[str]) -> list[str]:
        """Delete this tenant's vectors among `fact_ids` that have no row. Returns them."""
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return []
        rows = await self._s.load_rows(ids)
        orphans = [fid for fid in ids if fid not in rows]
        if not orphans:
            return []
        mine = await self._s.own_vector_ids(orphans)
        if mine:
            await self._s.vectors.delete_by_ids(mine)
        return mine
