"""`LocalVectorIndex`: the Vectorize binding, composed from the package's parts.

It owns the lock and the in-memory mirror of the store (records by id, one partition per
namespace) and keeps the two in step: each mutation is validated in full, written to
SQLite in one transaction, then applied in memory. The behaviour it promises is the
package docstring's; the checks, the file, the columns and the filters live beside it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from threadpoolctl import ThreadpoolController

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import (
    MetadataFilter,
    ReturnMetadata,
    VectorIndexInfo,
    VectorMatch,
    VectorMutation,
    VectorQueryResult,
    VectorRecord,
)
from local_runtime.adapters.vectorize._columns import MetadataIndexes
from local_runtime.adapters.vectorize._filters import compile_filter, evaluate
from local_runtime.adapters.vectorize._metadata import (
    MetadataIndex,
    MetadataIndexType,
    Scalar,
    nest,
)
from local_runtime.adapters.vectorize._partition import Partition
from local_runtime.adapters.vectorize._store import StoredVector, VectorStore
from local_runtime.adapters.vectorize._validation import PreparedVector, VectorValidator

# A query's products are one matrix-vector product each (at most a few MB): OpenBLAS
# splits each across every core, and in a process serving requests (with other work on the
# other cores) its threads' hand-offs cost more than the product. Measured with
# benchmarks/semantic_latency.py over 100K facts with a test suite busy on both cores:
# recall p50 32 -> 13 ms, p99 65 -> 25 ms with queries on one BLAS thread. Limited per
# query (~25 µs), so the projection's fit, a large product, keeps every thread.
_BLAS = ThreadpoolController()


class LocalVectorIndex:
    """A Vectorize index (cosine metric) backed by SQLite and numpy.

    `path=None` keeps everything in memory. The dimensions are fixed when the file is first
    created; reopening with different dimensions raises. `metadata_indexes` (a
    `{property: type}` mapping or `MetadataIndex` items) are created if missing (a property
    already indexed with another type raises). Implements
    `bindings.ports.vectorize.VectorIndex`; see the package docstring for the contract.
    One process per file: the in-memory matrices are not refreshed from other writers.
    """

    def __init__(
        self,
        path: Path | None,
        dimensions: int,
        metadata_indexes: (
            Mapping[str, str] | Iterable[MetadataIndex | tuple[str, MetadataIndexType]]
        ) = (),
        *,
        name: str = "local-index",
    ) -> None:
        self._validator = VectorValidator(dimensions)
        self.dimensions = dimensions
        self.name = name
        self._lock = threading.RLock()
        self._store = VectorStore(path, dimensions)
        self._metadata = MetadataIndexes()
        self._partitions: dict[str | None, Partition] = {}
        # Each vector's (namespace, metadata JSON), and apart its indexed metadata values: a
        # tuple holding only strings drops out of the garbage collector's tracking, one
        # holding a dict never does, and 100K tracked records made each full collection
        # 50-100 ms at 100K vectors, in a recall's p99 (benchmarks/semantic_latency.py).
        self._records: dict[str, tuple[str | None, str]] = {}
        self._indexed: dict[str, dict[str, Scalar]] = {}
        self._load()
        declared: Iterable[MetadataIndex | tuple[str, str]] = (
            metadata_indexes.items() if isinstance(metadata_indexes, Mapping) else metadata_indexes
        )
        for spec in declared:
            index = MetadataIndexes.resolve(spec)
            existing = self._metadata.types.get(index.property)
            if existing is None:
                self.create_metadata_index(index.property, index.type)
            elif existing != index.type:
                raise BindingLimitError(
                    f"metadata index {index.property!r} already exists with type {existing!r}, "
                    f"not {index.type!r}; delete it first"
                )

    # ---------------------------------------------------------------- lifecycle

    def _load(self) -> None:
        for prop, kind in self._store.metadata_indexes():
            self._metadata.add(prop, kind)
        records, matrix = self._store.vectors()
        if not records:
            return
        inv = (1.0 / np.sqrt(np.einsum("ij,ij->i", matrix, matrix))).astype(np.float32)
        by_namespace: dict[str | None, list[int]] = {}
        for i, (vector_id, (namespace, metadata_json, indexed)) in enumerate(records):
            self._records[vector_id] = (namespace, metadata_json)
            self._indexed[vector_id] = indexed
            by_namespace.setdefault(namespace, []).append(i)
        for namespace, positions in by_namespace.items():
            ids = [records[i][0] for i in positions]
            values = [self._indexed[v] for v in ids]
            self._partition(namespace).bulk_load(ids, matrix[positions], inv[positions], values)

    def checkpoint(self) -> None:
        """Local only: checkpoint and truncate the file's WAL."""
        with self._lock:
            self._store.checkpoint()

    def close(self) -> None:
        """Close the SQLite connection (the object is unusable afterwards)."""
        with self._lock:
            self._store.close()

    def _partition(self, namespace: str | None) -> Partition:
        part = self._partitions.get(namespace)
        if part is None:
            part = Partition(self.dimensions, self._metadata.column_specs())
            self._partitions[namespace] = part
        return part

    def _drop_from_partition(self, vector_id: str, namespace: str | None) -> None:
        part = self._partitions[namespace]
        part.remove(vector_id)
        if part.size == 0:
            del self._partitions[namespace]

    # ---------------------------------------------------------------- metadata indexes

    def create_metadata_index(self, property: str, type: MetadataIndexType) -> None:
        """Index `property` (dotted for nested metadata) so queries can filter on it.

        Like Cloudflare, only vectors written after this call are indexed; re-upsert older
        ones. At most 10 metadata indexes; creating an existing one raises.
        """
        MetadataIndexes.check_declaration(property, type)
        with self._lock:
            self._metadata.check_room_for(property)
            self._store.add_metadata_index(property, type)
            dictionary = self._metadata.add(property, type)
            for part in self._partitions.values():
                part.add_column(property, type, dictionary)

    def delete_metadata_index(self, property: str) -> None:
        """Drop a metadata index; filters on `property` raise afterwards."""
        with self._lock:
            if property not in self._metadata.types:
                raise BindingLimitError(f"metadata index {property!r} does not exist")
            stripped: list[tuple[str, StoredVector]] = []
            for vector_id, indexed in self._indexed.items():
                if property in indexed:
                    del indexed[property]
                    stripped.append((vector_id, (*self._records[vector_id], indexed)))
            self._store.drop_metadata_index(property, stripped)
            self._metadata.drop(property)
            for part in self._partitions.values():
                part.drop_column(property)

    def list_metadata_indexes(self) -> list[MetadataIndex]:
        """The metadata indexes, in creation order."""
        with self._lock:
            return self._metadata.declared()

    # ---------------------------------------------------------------- writes

    def _write(
        self, vectors: Sequence[VectorRecord], op: Literal["INSERT", "UPSERT"]
    ) -> VectorMutation:
        # Validate the whole batch first: a bad vector rejects the call, nothing is written.
        prepared = self._validator.batch(vectors, op)
        with self._lock:
            chosen: dict[str, PreparedVector] = {}
            for item in prepared:
                if op == "INSERT":
                    # insert: the first vector with an id wins, existing ids are skipped
                    if item.id in self._records or item.id in chosen:
                        continue
                    chosen[item.id] = item
                else:
                    # upsert: the last vector with an id wins, replacing it in full
                    chosen.pop(item.id, None)
                    chosen[item.id] = item
            records = {
                vid: (item.namespace, item.metadata_json, self._metadata.values_of(item.metadata))
                for vid, item in chosen.items()
            }
            self._store.write((vid, records[vid], item.values) for vid, item in chosen.items())
            for vid, item in chosen.items():
                previous = self._records.get(vid)
                if previous is not None and previous[0] != item.namespace:
                    self._drop_from_partition(vid, previous[0])
                namespace, metadata_json, indexed = records[vid]
                self._records[vid] = (namespace, metadata_json)
                self._indexed[vid] = indexed
                self._partition(namespace).put(vid, item.values, item.inv_norm, indexed)
        return VectorMutation(mutation_id=str(uuid.uuid4()), count=len(chosen))

    async def insert(self, vectors: Sequence[VectorRecord]) -> VectorMutation:
        """Insert vectors; ids that already exist anywhere in the index are skipped."""
        return self._write(vectors, "INSERT")

    async def upsert(self, vectors: Sequence[VectorRecord]) -> VectorMutation:
        """Insert or replace vectors in full (values, metadata and namespace)."""
        return self._write(vectors, "UPSERT")

    async def delete_by_ids(self, ids: Sequence[str]) -> VectorMutation:
        """Delete vectors by id (in any namespace); unknown ids are ignored."""
        with self._lock:
            present = [vid for vid in dict.fromkeys(ids) if vid in self._records]
            self._store.delete(present)
            for vid in present:
                namespace, _ = self._records.pop(vid)
                del self._indexed[vid]
                self._drop_from_partition(vid, namespace)
        return VectorMutation(mutation_id=str(uuid.uuid4()), count=len(present))

    # ---------------------------------------------------------------- reads

    async def get_by_ids(self, ids: Sequence[str]) -> list[VectorRecord]:
        """The stored vectors (float32 values, all metadata) in request order; unknown ids
        are left out."""
        with self._lock:
            out: list[VectorRecord] = []
            for vid in dict.fromkeys(ids):
                stored = self._records.get(vid)
                if stored is None:
                    continue
                namespace, metadata_json = stored
                part = self._partitions[namespace]
                row = part.rows[vid]
                out.append(
                    VectorRecord(
                        id=vid,
                        values=part.values[row].astype(np.float64).tolist(),
                        namespace=namespace,
                        metadata=json.loads(metadata_json),
                    )
                )
            return out

    async def describe(self) -> VectorIndexInfo:
        with self._lock:
            return VectorIndexInfo(dimensions=self.dimensions, vector_count=len(self._records))

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: MetadataFilter | None = None,
        return_values: bool = False,
        return_metadata: ReturnMetadata = "none",
    ) -> VectorQueryResult:
        """The `top_k` vectors most cosine-similar to `vector`, best first.

        Scores are cosine similarities in [-1, 1]; ties are broken by id. The namespace
        restricts the search to that namespace (None: the whole index); the filter is
        applied before the top-k is taken.
        """
        q = self._validator.query(vector, top_k, namespace, return_values, return_metadata)
        with self._lock:
            clauses = (
                compile_filter(filter, self._metadata.types, self.name)
                if filter is not None
                else []
            )
            if namespace is not None:
                part = self._partitions.get(namespace)
                parts = [part] if part is not None else []
            else:
                parts = list(self._partitions.values())
            candidates: list[tuple[float, str, Partition, int]] = []
            with _BLAS.limit(limits=1, user_api="blas"):
                for part in parts:
                    mask = evaluate(clauses, part) if clauses else None
                    candidates.extend(part.top(q, top_k, mask))
            candidates.sort(key=lambda c: (-c[0], c[1]))
            matches = [
                self._match(score, vid, part, row, return_values, return_metadata)
                for score, vid, part, row in candidates[:top_k]
            ]
        return VectorQueryResult(count=len(matches), matches=matches)

    def _match(
        self,
        score: float,
        vector_id: str,
        part: Partition,
        row: int,
        return_values: bool,
        return_metadata: str,
    ) -> VectorMatch:
        namespace, metadata_json = self._records[vector_id]
        indexed = self._indexed[vector_id]
        metadata: dict[str, Any] | None = None
        if return_metadata == "all":
            metadata = json.loads(metadata_json)
        elif return_metadata == "indexed":
            metadata = nest({p: v for p, v in indexed.items() if p in self._metadata.types})
        return VectorMatch(
            id=vector_id,
            score=score,
            namespace=namespace,
            values=part.values[row].astype(np.float64).tolist() if return_values else None,
            metadata=metadata,
        )
