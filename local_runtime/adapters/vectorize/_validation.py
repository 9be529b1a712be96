"""Checks on what callers hand a Vectorize index, with Cloudflare's limits and error texts.

`VectorValidator` knows only the index's dimensions: it rejects (with `BindingLimitError`)
bad batches, ids, namespaces, values and metadata before anything is written, and bad
query arguments before anything is read, and hands back the normalised forms the index
works with (`PreparedVector`, the unit query vector). It never sees the index's state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import (
    VECTORIZE_MAX_BATCH,
    VECTORIZE_MAX_DIMENSIONS,
    VECTORIZE_MAX_ID_BYTES,
    VECTORIZE_MAX_METADATA_BYTES,
    VECTORIZE_MAX_NAMESPACE_BYTES,
    VECTORIZE_MAX_TOP_K,
    VECTORIZE_MAX_TOP_K_WITH_DATA,
    ReturnMetadata,
    VectorRecord,
)
from local_runtime.adapters.vectorize._metadata import (
    check_metadata_keys,
    compact_json,
    utf8_len,
)

F32Array = npt.NDArray[np.float32]

RETURN_METADATA: tuple[str, ...] = ("none", "indexed", "all")


@dataclass
class PreparedVector:
    """A validated record: float32 values, their inverse norm, canonical metadata."""

    id: str
    namespace: str | None
    values: F32Array
    inv_norm: float
    metadata: dict[str, Any]
    metadata_json: str


class VectorValidator:
    """Validation for an index of `dimensions` dimensions (checked here: 1 to 1536)."""

    def __init__(self, dimensions: int) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise BindingLimitError("dimensions must be an integer")
        if not 1 <= dimensions <= VECTORIZE_MAX_DIMENSIONS:
            raise BindingLimitError(
                f"dimensions must be between 1 and {VECTORIZE_MAX_DIMENSIONS}, got {dimensions}"
            )
        self.dimensions = dimensions

    def batch(self, vectors: Sequence[VectorRecord], op: str) -> list[PreparedVector]:
        """Every record of one insert/upsert call, prepared; one bad record rejects all."""
        if len(vectors) > VECTORIZE_MAX_BATCH:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: {len(vectors)} vectors in one call; the maximum from "
                f"Workers is {VECTORIZE_MAX_BATCH}"
            )
        return [self.record(v, op) for v in vectors]

    def record(self, record: VectorRecord, op: str) -> PreparedVector:
        vid = record.id
        if not isinstance(vid, str) or not vid:
            raise BindingLimitError(f"VECTOR_{op}_ERROR: vector id must be a non-empty string")
        if utf8_len(vid) > VECTORIZE_MAX_ID_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: vector id {vid[:80]!r} is {utf8_len(vid)} bytes; the "
                f"maximum is {VECTORIZE_MAX_ID_BYTES} bytes"
            )
        self.namespace(record.namespace, op)
        if len(record.values) != self.dimensions:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: invalid vector for id={vid!r}, expected {self.dimensions} "
                f"dimensions, and got {len(record.values)} dimensions"
            )
        values = np.asarray(record.values, dtype=np.float32)
        if not np.all(np.isfinite(values)):
            raise BindingLimitError(f"VECTOR_{op}_ERROR: vector id={vid!r} has non-finite values")
        norm = float(np.linalg.norm(values.astype(np.float64)))
        if norm == 0.0:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: vector id={vid!r} is all zeros; cosine similarity is "
                "undefined for a zero vector"
            )
        metadata = record.metadata or {}
        check_metadata_keys(metadata, op, vid)
        try:
            metadata_json = compact_json(metadata)
        except (TypeError, ValueError) as exc:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: metadata for id={vid!r} is not JSON: {exc}"
            ) from exc
        size = utf8_len(metadata_json)
        if size > VECTORIZE_MAX_METADATA_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: metadata for id={vid!r} is {size} bytes; the maximum is "
                f"{VECTORIZE_MAX_METADATA_BYTES} bytes (10 KiB)"
            )
        return PreparedVector(
            vid, record.namespace, values, 1.0 / norm, json.loads(metadata_json), metadata_json
        )

    @staticmethod
    def namespace(namespace: str | None, op: str) -> None:
        if namespace is None:
            return
        if not isinstance(namespace, str) or not namespace:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: namespace must be a non-empty string or omitted"
            )
        if utf8_len(namespace) > VECTORIZE_MAX_NAMESPACE_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: namespace {namespace[:80]!r} is {utf8_len(namespace)} "
                f"bytes; the maximum is {VECTORIZE_MAX_NAMESPACE_BYTES} bytes"
            )

    def query(
        self,
        vector: Sequence[float],
        top_k: int,
        namespace: str | None,
        return_values: bool,
        return_metadata: ReturnMetadata,
    ) -> F32Array:
        """Check a query's arguments; returns the query vector scaled to unit length."""
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise BindingLimitError("VECTOR_QUERY_ERROR: topK must be an integer")
        if return_metadata not in RETURN_METADATA:
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: returnMetadata must be one of "
                f"{', '.join(RETURN_METADATA)}, got {return_metadata!r}"
            )
        with_data = return_values or return_metadata == "all"
        limit = VECTORIZE_MAX_TOP_K_WITH_DATA if with_data else VECTORIZE_MAX_TOP_K
        if not 1 <= top_k <= limit:
            detail = " when returnValues is true or returnMetadata is 'all'" if with_data else ""
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: invalid topK {top_k}; it must be between 1 and "
                f"{limit}{detail}"
            )
        self.namespace(namespace, "QUERY")
        if len(vector) != self.dimensions:
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: invalid query vector, expected {self.dimensions} "
                f"dimensions, and got {len(vector)} dimensions"
            )
        q = np.asarray(vector, dtype=np.float32)
        if not np.all(np.isfinite(q)):
            raise BindingLimitError("VECTOR_QUERY_ERROR: query vector has non-finite values")
        q_norm = float(np.linalg.norm(q.astype(np.float64)))
        if q_norm == 0.0:
            raise BindingLimitError(
                "VECTOR_QUERY_ERROR: query vector is all zeros; cosine similarity is undefined"
            )
        return q / np.float32(q_norm)
