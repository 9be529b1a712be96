"""Local stand-in for a Cloudflare Vectorize index (cosine metric): numpy over SQLite.

Vectorize has no local simulator, so this adapter and tests/contracts/test_vectorize_contract.py
are the local specification, after the Cloudflare docs (client API, metadata filtering, limits):
it models the port (`bindings.ports.vectorize`), not `insert`, `returnValues` or
`returnMetadata: "indexed"`, which the system does not use. Where Cloudflare says nothing it is
strict rather than different: a filter on a property without a metadata index raises (Cloudflare
silently matches nothing), a vector without an indexed value of the index's type reads as null
($ne/$nin match it, $eq and ranges do not), zero and non-finite vectors and empty namespaces are
refused, and writes are visible at once.
A query is a matrix-vector product per namespace (`_Namespace`), a gather per filtered property
(`_compile`) and a partial sort; large namespaces scan a projection first (`projection`).
"""

from __future__ import annotations

import json
import math
import operator
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import (
    VECTORIZE_MAX_BATCH,
    VECTORIZE_MAX_FILTER_BYTES,
    VECTORIZE_MAX_ID_BYTES,
    VECTORIZE_MAX_METADATA_BYTES,
    VECTORIZE_MAX_NAMESPACE_BYTES,
    VECTORIZE_MAX_TOP_K,
    VECTORIZE_MAX_TOP_K_WITH_DATA,
    MetadataFilter,
    ReturnMetadata,
    VectorIndexInfo,
    VectorMatch,
    VectorQueryResult,
    VectorRecord,
)
from local_runtime.adapters.vectorize.projection import Projection, needs_fit

VECTORIZE_MAX_METADATA_INDEXES = 10
VECTORIZE_MAX_INDEXED_STRING_BYTES = 64
VECTORIZE_MAX_FILTER_KEY_CHARS = 512
MetadataIndexType = Literal["string", "number", "boolean"]
INDEX_TYPES = ("string", "number", "boolean")
Scalar = str | float | bool | None
F32Array = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]
_RANGES: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
_OPERATORS = ("$eq", "$ne", "$in", "$nin", *_RANGES)

# Queries run on one BLAS thread: OpenBLAS's hand-offs across busy cores cost more than a
# product of a few MB (benchmarks/semantic_latency.py, 100K facts: recall p50 32 -> 13 ms).
# Limited per query, so the projection's fit, a large product, keeps every thread.
_BLAS = ThreadpoolController()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectorize_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectorize_metadata_indexes (
    property TEXT PRIMARY KEY, type TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vectorize_vectors (
    id TEXT PRIMARY KEY, namespace TEXT, vals BLOB NOT NULL, metadata TEXT NOT NULL,
    indexed TEXT NOT NULL
);
"""


def _error(op: str, message: str) -> BindingLimitError:
    return BindingLimitError(f"VECTOR_{op}_ERROR: {message}")


def _json(value: object) -> str:
    # JS JSON.stringify: no spaces, non-ASCII kept as is (Cloudflare measures sizes on it).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _is_number(value: object) -> bool:
    # JSON booleans are not numbers, although Python's bool subclasses int.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _valid_property(prop: object) -> bool:
    """Whether `prop` may name a metadata index or a filter key (dotted for nested keys)."""
    return (
        isinstance(prop, str)
        and '"' not in prop
        and not prop.startswith("$")
        and len(prop) <= VECTORIZE_MAX_FILTER_KEY_CHARS
        and all(prop.split("."))
    )


def _indexed(kind: str, value: object) -> Scalar:
    """What a metadata index of type `kind` keeps of `value` (None: nothing): a string's
    first 64 bytes (cut on a character boundary), a number as a float, a boolean."""
    if kind == "string":
        cut = (
            value.encode("utf-8")[:VECTORIZE_MAX_INDEXED_STRING_BYTES]
            if isinstance(value, str)
            else None
        )
        return None if cut is None else cut.decode("utf-8", errors="ignore")
    if kind == "number":
        return float(value) if _is_number(value) else None  # type: ignore[arg-type]
    return value if isinstance(value, bool) else None


def _lookup(metadata: dict[str, Any], dotted: str) -> object:
    node: object = metadata
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _check_keys(node: dict[str, Any], op: str, vector_id: str) -> None:
    for key, value in node.items():
        if not isinstance(key, str) or not key or "." in key or '"' in key or key.startswith("$"):
            raise _error(
                op,
                f"invalid metadata key {key!r} for vector id={vector_id!r}: keys cannot be "
                'empty, contain "." or \'"\', or start with "$"',
            )
        if isinstance(value, dict):
            _check_keys(value, op, vector_id)


def _unit(values: Sequence[float], op: str, what: str) -> tuple[F32Array, float]:
    """`values` as float32 and their inverse norm; refuses non-finite and zero vectors."""
    array = np.asarray(values, dtype=np.float32)
    if not np.all(np.isfinite(array)):
        raise _error(op, f"{what} has non-finite values")
    norm = float(np.linalg.norm(array.astype(np.float64)))
    if norm == 0.0:
        raise _error(op, f"{what} is all zeros; cosine similarity is undefined for a zero vector")
    return array, 1.0 / norm


def _check_name(value: object, what: str, limit: int, op: str) -> None:
    """A vector id or namespace: a non-empty string of at most `limit` UTF-8 bytes."""
    if not isinstance(value, str) or not value:
        raise _error(op, f"{what} must be a non-empty string")
    if (size := _utf8_len(value)) > limit:
        raise _error(op, f"{what} {value[:80]!r} is {size} bytes; the maximum is {limit} bytes")


def _check_namespace(namespace: str | None, op: str) -> None:
    if namespace is not None:
        _check_name(namespace, "namespace", VECTORIZE_MAX_NAMESPACE_BYTES, op)


def _scalar(value: object, prop: str, op: str) -> Scalar:
    if value is None or isinstance(value, str | bool):
        return value
    if _is_number(value):
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _error("QUERY", f"filter {prop!r} {op}: non-finite number")
        return value  # type: ignore[return-value]
    raise _error(
        "QUERY",
        f"filter {prop!r} {op}: value must be a string, number, boolean or null, "
        f"got {type(value).__name__}",
    )


@dataclass
class _Prepared:
    id: str
    namespace: str | None
    values: F32Array
    metadata: dict[str, Any]
    metadata_json: str


class _Namespace:
    """One namespace's vectors: rows [0, size) of a float32 matrix, their inverse norms and
    one code column per metadata index; a removal moves the last row into the gap."""

    def __init__(self, dimensions: int, properties: Iterable[str]) -> None:
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.values: F32Array = np.zeros((16, dimensions), dtype=np.float32)
        self.inv_norms: F32Array = np.zeros(16, dtype=np.float32)
        self.codes = {prop: np.full(16, -1, dtype=np.int32) for prop in properties}
        self.projection: Projection | None = None  # the first pass of a large namespace

    def put(self, vector_id: str, values: F32Array, inv_norm: float, codes: dict[str, int]) -> None:
        row = self.rows.get(vector_id)
        if row is None:
            row = len(self.ids)
            if row == len(self.inv_norms):
                self._grow(2 * row)
            self.ids.append(vector_id)
            self.rows[vector_id] = row
        self.values[row], self.inv_norms[row] = values, inv_norm
        for prop, column in self.codes.items():
            column[row] = codes.get(prop, -1)
        if self.projection is not None:
            self.projection.set(row, values * np.float32(inv_norm))
        if needs_fit(self.projection, len(self.ids), self.values.shape[1]):
            self.projection = Projection.fit(
                self.values, self.inv_norms, len(self.ids), len(self.inv_norms)
            )

    def _grow(self, capacity: int) -> None:
        def grown(array: npt.NDArray[Any], fill: float) -> npt.NDArray[Any]:
            out = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
            out[: len(array)] = array
            return out

        self.values, self.inv_norms = grown(self.values, 0), grown(self.inv_norms, 0)
        self.codes = {prop: grown(column, -1) for prop, column in self.codes.items()}
        if self.projection is not None:
            self.projection.grow(capacity, len(self.ids))

    def remove(self, vector_id: str) -> None:
        row, last = self.rows.pop(vector_id), len(self.ids) - 1
        if row != last:
            moved = self.ids[row] = self.ids[last]
            self.rows[moved] = row
            self.values[row], self.inv_norms[row] = self.values[last], self.inv_norms[last]
            for column in self.codes.values():
                column[row] = column[last]
            if self.projection is not None:
                self.projection.move(last, row)
        self.ids.pop()
        for column in self.codes.values():
            column[last] = -1

    def top(self, q: F32Array, top_k: int, mask: Mask | None) -> list[tuple[float, str, int]]:
        """(score, id, row) of the best `top_k` rows where `mask` holds (None: all), and any
        tied with the k-th (the caller breaks ties by id); `q` is the unit query vector."""
        n = len(self.ids)
        if mask is not None and bool(mask.all()):
            mask = None  # every row matches (one tenant, one model): no gather needed
        rows = None if mask is None else np.flatnonzero(mask)
        if self.projection is not None:
            # Large namespace: exact scores for a shortlist from the projected rows only.
            rows = self.projection.shortlist(q, n, rows, top_k)
        if rows is None:
            rows = np.arange(n)
            scores = (self.values[:n] @ q) * self.inv_norms[:n]
        else:
            scores = (self.values[rows] @ q) * self.inv_norms[rows]
        if len(rows) > top_k:
            kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            keep = np.flatnonzero(scores >= kth)
            rows, scores = rows[keep], scores[keep]
        clipped = np.clip(scores.astype(np.float64), -1.0, 1.0)
        return [(s, self.ids[r], r) for s, r in zip(clipped.tolist(), rows.tolist(), strict=True)]


class LocalVectorIndex:
    """A Vectorize index (cosine metric) over SQLite and numpy (`path=None`: in memory).

    The dimensions are fixed when the file is created (reopening with others raises).
    `metadata_indexes` (`{property: type}`) are created if missing; one already there with
    another type raises. One process per file: the in-memory matrices are not refreshed from
    other writers."""

    def __init__(
        self, path: Path | None, dimensions: int, metadata_indexes: Mapping[str, str] | None = None
    ) -> None:
        # `dimensions` is `Settings.embedding_dimensions`, validated there (1 to 1536).
        self.dimensions = dimensions
        self._lock = threading.RLock()
        self._namespaces: dict[str | None, _Namespace] = {}
        # Each vector's namespace and metadata JSON (decoded afresh for every reader).
        self._records: dict[str, tuple[str | None, str]] = {}
        # The metadata indexes in creation order, and each one's values by code.
        self._types: dict[str, str] = {}
        self._codes: dict[str, dict[Scalar, int]] = {}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA secure_delete = ON")  # deleted vectors are overwritten
        self._db.executescript(_SCHEMA)
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO vectorize_settings VALUES ('dimensions', ?)", (dimensions,)
            )
        [(stored,)] = self._db.execute("SELECT value FROM vectorize_settings")
        if int(stored) != dimensions:
            raise BindingLimitError(
                f"this index was created with {stored} dimensions, not {dimensions}; a "
                "Vectorize index's dimensions cannot change (create a new index)"
            )
        for prop, kind in self._db.execute(
            "SELECT property, type FROM vectorize_metadata_indexes ORDER BY rowid"
        ):
            self._types[prop], self._codes[prop] = kind, {}
        for vid, namespace, vals, metadata, indexed in self._db.execute(
            "SELECT id, namespace, vals, metadata, indexed FROM vectorize_vectors ORDER BY rowid"
        ):
            values = np.frombuffer(vals, dtype=np.float32)
            inv = 1.0 / float(np.linalg.norm(values.astype(np.float64)))
            self._put(vid, namespace, values, inv, metadata, json.loads(indexed))
        for prop, kind in (metadata_indexes or {}).items():
            if prop not in self._types:
                self.create_metadata_index(prop, kind)  # type: ignore[arg-type]
            elif self._types[prop] != kind:
                raise BindingLimitError(
                    f"metadata index {prop!r} already exists with type {self._types[prop]!r}, "
                    f"not {kind!r}; delete it first"
                )

    def checkpoint(self) -> None:
        """Local only: checkpoint and truncate the WAL (no deleted vector survives there)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _put(
        self,
        vector_id: str,
        namespace: str | None,
        values: F32Array,
        inv_norm: float,
        metadata_json: str,
        indexed: Mapping[str, Scalar],
    ) -> None:
        previous = self._records.get(vector_id)
        if previous is not None and previous[0] != namespace:
            self._remove(vector_id)
        self._records[vector_id] = (namespace, metadata_json)
        codes = {
            prop: self._codes[prop].setdefault(value, len(self._codes[prop]))
            for prop, value in indexed.items()
            if prop in self._codes
        }
        part = self._namespaces.get(namespace)
        if part is None:
            part = self._namespaces[namespace] = _Namespace(self.dimensions, self._types)
        part.put(vector_id, values, inv_norm, codes)

    def _remove(self, vector_id: str) -> None:
        namespace, _ = self._records.pop(vector_id)
        part = self._namespaces[namespace]
        part.remove(vector_id)
        if not part.ids:
            del self._namespaces[namespace]

    # ---------------------------------------------------------------- metadata indexes

    def create_metadata_index(self, property: str, type: MetadataIndexType) -> None:
        """Index `property` (dotted for nested metadata) for filters: only vectors written
        from now on are indexed, as on Cloudflare (re-upsert older ones). At most 10."""
        if type not in INDEX_TYPES:
            raise BindingLimitError(
                f"metadata index type must be one of {', '.join(INDEX_TYPES)}, got {type!r}"
            )
        if not _valid_property(property):
            raise BindingLimitError(f"invalid metadata index property name {property!r}")
        with self._lock:
            if property in self._types:
                raise BindingLimitError(f"metadata index {property!r} already exists")
            if len(self._types) >= VECTORIZE_MAX_METADATA_INDEXES:
                raise BindingLimitError(
                    f"an index can have at most {VECTORIZE_MAX_METADATA_INDEXES} metadata indexes"
                )
            with self._db:
                self._db.execute(
                    "INSERT INTO vectorize_metadata_indexes VALUES (?, ?)", (property, type)
                )
            self._types[property], self._codes[property] = type, {}
            for part in self._namespaces.values():
                part.codes[property] = np.full(len(part.inv_norms), -1, dtype=np.int32)

    # ---------------------------------------------------------------- writes

    def _prepare(self, record: VectorRecord, op: str) -> _Prepared:
        vid = record.id
        _check_name(vid, "vector id", VECTORIZE_MAX_ID_BYTES, op)
        _check_namespace(record.namespace, op)
        if len(record.values) != self.dimensions:
            raise _error(
                op,
                f"invalid vector for id={vid!r}, expected {self.dimensions} dimensions, and "
                f"got {len(record.values)} dimensions",
            )
        values, _ = _unit(record.values, op, f"vector id={vid!r}")
        metadata = record.metadata or {}
        _check_keys(metadata, op, vid)
        try:
            metadata_json = _json(metadata)
        except (TypeError, ValueError) as exc:
            raise _error(op, f"metadata for id={vid!r} is not JSON: {exc}") from exc
        if (size := _utf8_len(metadata_json)) > VECTORIZE_MAX_METADATA_BYTES:
            raise _error(
                op,
                f"metadata for id={vid!r} is {size} bytes; the maximum is "
                f"{VECTORIZE_MAX_METADATA_BYTES} bytes (10 KiB)",
            )
        return _Prepared(vid, record.namespace, values, json.loads(metadata_json), metadata_json)

    async def upsert(self, vectors: Sequence[VectorRecord]) -> None:
        op = "UPSERT"
        if len(vectors) > VECTORIZE_MAX_BATCH:
            raise _error(
                op,
                f"{len(vectors)} vectors in one call; the maximum from Workers is "
                f"{VECTORIZE_MAX_BATCH}",
            )
        prepared = [self._prepare(v, op) for v in vectors]  # one bad vector: nothing written
        with self._lock:
            chosen: dict[str, _Prepared] = {}
            for item in prepared:
                chosen.pop(item.id, None)  # the last one wins, replacing it whole
                chosen[item.id] = item
            rows = [
                (
                    item,
                    {
                        p: v
                        for p, k in self._types.items()
                        if (v := _indexed(k, _lookup(item.metadata, p))) is not None
                    },
                )
                for item in chosen.values()
            ]
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectorize_vectors VALUES (?, ?, ?, ?, ?)",
                    [
                        (i.id, i.namespace, i.values.tobytes(), i.metadata_json, _json(indexed))
                        for i, indexed in rows
                    ],
                )
            for i, indexed in rows:
                inv = 1.0 / float(np.linalg.norm(i.values.astype(np.float64)))
                self._put(i.id, i.namespace, i.values, inv, i.metadata_json, indexed)

    async def delete_by_ids(self, ids: Sequence[str]) -> None:
        """Delete vectors by id (in any namespace); unknown ids are ignored."""
        with self._lock:
            present = [vid for vid in dict.fromkeys(ids) if vid in self._records]
            with self._db:
                self._db.executemany(
                    "DELETE FROM vectorize_vectors WHERE id = ?", [(vid,) for vid in present]
                )
            for vid in present:
                self._remove(vid)

    # ---------------------------------------------------------------- reads

    async def get_by_ids(self, ids: Sequence[str]) -> list[VectorRecord]:
        """The stored vectors (float32 values, all metadata) in request order; unknown ids
        are left out."""
        found = []
        with self._lock:
            for vid in dict.fromkeys(ids):
                if vid in self._records:
                    namespace, metadata = self._records[vid]
                    part = self._namespaces[namespace]
                    values = part.values[part.rows[vid]].astype(np.float64).tolist()
                    found.append(VectorRecord(vid, values, namespace, json.loads(metadata)))
        return found

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
        return_metadata: ReturnMetadata = "none",
    ) -> VectorQueryResult:
        """The `top_k` vectors most cosine-similar to `vector` (scores in [-1, 1], ties by
        id), among `namespace`'s (None: all) and those `filter` admits."""
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise _error("QUERY", "topK must be an integer")
        if return_metadata not in ("none", "all"):
            raise _error(
                "QUERY", f"returnMetadata must be one of none, all, got {return_metadata!r}"
            )
        with_data = return_metadata == "all"
        limit = VECTORIZE_MAX_TOP_K_WITH_DATA if with_data else VECTORIZE_MAX_TOP_K
        if not 1 <= top_k <= limit:
            detail = " when returnMetadata is 'all'" if with_data else ""
            raise _error("QUERY", f"invalid topK {top_k}; it must be between 1 and {limit}{detail}")
        _check_namespace(namespace, "QUERY")
        if len(vector) != self.dimensions:
            raise _error(
                "QUERY",
                f"invalid query vector, expected {self.dimensions} dimensions, and got "
                f"{len(vector)} dimensions",
            )
        values, inv = _unit(vector, "QUERY", "query vector")
        q = values * np.float32(inv)
        with self._lock:
            tables = [] if filter is None else self._compile(filter)
            parts = (
                list(self._namespaces.values())
                if namespace is None
                else [p for p in (self._namespaces.get(namespace),) if p is not None]
            )
            found: list[tuple[float, str, int]] = []
            with _BLAS.limit(limits=1, user_api="blas"):
                for part in parts:
                    mask: Mask | None = None
                    for prop, table in tables:
                        hit = table[part.codes[prop][: len(part.ids)]]
                        mask = hit if mask is None else mask & hit
                    found.extend(part.top(q, top_k, mask))
            found.sort(key=lambda c: (-c[0], c[1]))
            matches = []
            for score, vid, _ in found[:top_k]:
                namespace, metadata_json = self._records[vid]
                metadata = json.loads(metadata_json) if with_data else None
                matches.append(VectorMatch(vid, score, namespace, metadata))
        return VectorQueryResult(count=len(matches), matches=matches)

    # ---------------------------------------------------------------- filters

    def _compile(self, filter_: MetadataFilter) -> list[tuple[str, Mask]]:
        """Per filtered property, which of its codes pass (the table's last slot, read by
        code -1: no value); every property's table must pass."""
        if not isinstance(filter_, dict) or not filter_:
            raise _error("QUERY", "filter must be a non-empty object")
        try:
            size = _utf8_len(_json(filter_))
        except (TypeError, ValueError) as exc:
            raise _error("QUERY", f"filter is not valid JSON: {exc}") from exc
        if size >= VECTORIZE_MAX_FILTER_BYTES:
            raise _error(
                "QUERY",
                f"filter JSON is {size} bytes; it must be less than "
                f"{VECTORIZE_MAX_FILTER_BYTES} bytes",
            )
        tables = []
        for prop, spec in filter_.items():
            if not _valid_property(prop):
                raise _error(
                    "QUERY",
                    f"invalid filter key {prop!r}: keys cannot be empty, contain '\"', start "
                    f'with "$", have empty dotted segments or exceed '
                    f"{VECTORIZE_MAX_FILTER_KEY_CHARS} characters",
                )
            if prop not in self._types:
                raise _error(
                    "QUERY",
                    f"filter property {prop!r} has no metadata index, so Vectorize cannot "
                    "filter on it (it would silently match nothing). Create one first: "
                    "`wrangler vectorize create-metadata-index INDEX "
                    f"--property-name={prop} --type=string|number|boolean` (locally: "
                    "create_metadata_index), then re-upsert the vectors.",
                )
            tables.append(
                (prop, self._table(prop, spec if isinstance(spec, dict) else {"$eq": spec}))
            )
        return tables

    def _table(self, prop: str, spec: dict[str, Any]) -> Mask:
        kind, codes = self._types[prop], self._codes[prop]
        ops = list(spec)
        if not ops:
            raise _error("QUERY", f"filter {prop!r}: empty operator object")
        if unknown := [op for op in ops if op not in _OPERATORS]:
            raise _error(
                "QUERY",
                f"filter {prop!r}: unsupported operator {unknown[0]!r}; supported: "
                f"{', '.join(_OPERATORS)}",
            )
        ranges = [op for op in ops if op in _RANGES]
        if ranges:
            lower = [op for op in ranges if op in ("$gt", "$gte")]
            if len(lower) > 1 or len(ranges) - len(lower) > 1 or len(ranges) != len(ops):
                raise _error(
                    "QUERY",
                    f"filter {prop!r}: a range combines at most one lower bound ($gt/$gte) "
                    "with at most one upper bound ($lt/$lte); other combinations are not "
                    "allowed",
                )
            bounds = []
            for op in ops:
                if not isinstance(spec[op], str) and not _is_number(spec[op]):
                    raise _error(
                        "QUERY",
                        f"filter {prop!r} {op}: range operands must be strings or numbers, "
                        f"got {type(spec[op]).__name__}",
                    )
                bounds.append((_RANGES[op], _indexed(kind, _scalar(spec[op], prop, op))))
            # A bound of another type than the index's (or a boolean index) admits nothing.
            admitted = [
                kind != "boolean"
                and all(b is not None and compare(value, b) for compare, b in bounds)
                for value in codes
            ]
            return np.array([*admitted, False], dtype=np.bool_)
        if len(ops) != 1:
            raise _error(
                "QUERY", f"filter {prop!r}: combine at most one of $eq/$ne/$in/$nin per property"
            )
        op, operand = ops[0], spec[ops[0]]
        if op in ("$in", "$nin") and not isinstance(operand, list):
            raise _error("QUERY", f"filter {prop!r} {op}: operand must be an array")
        table = np.zeros(len(codes) + 1, dtype=np.bool_)
        for value in operand if op in ("$in", "$nin") else [operand]:
            value = _scalar(value, prop, op)
            if value is None:
                table[-1] = True
            elif (code := codes.get(_indexed(kind, value))) is not None:
                table[code] = True
        return ~table if op in ("$ne", "$nin") else table
