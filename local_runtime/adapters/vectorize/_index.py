"""Local stand-in for a Cloudflare Vectorize index: numpy cosine search over SQLite.

Vectorize has no local simulator (`wrangler dev` only binds it remotely), so this adapter
and `tests/contracts/test_vectorize_contract.py` are the local specification. Behaviour
follows the Cloudflare docs (cloudflare-docs `src/content/docs/vectorize/`:
`reference/client-api.mdx`, `reference/metadata-filtering.mdx`, `platform/limits.mdx`,
`best-practices/insert-vectors.mdx`):

* Ids are unique per *index*, not per namespace: `getByIds`/`deleteByIds` take no
  namespace, and insert-vectors.mdx says "if the same vector id is inserted twice in a
  Vectorize index, the index would reflect the vector that was added first". So `insert`
  skips an id that exists in any namespace, and `upsert` replaces the whole vector
  (values, metadata *and* namespace).
* Values are stored and returned as float32 ("Vectorize stores and restitutes vector
  dimensions as Float32").
* A query with a namespace searches only that namespace; a query without one searches the
  whole index (namespaces are a pre-filter, insert-vectors.mdx "Namespaces").
* Filters: implicit `$eq`, `$eq $ne $in $nin $lt $lte $gt $gte`; dotted keys address nested
  metadata; the compact JSON must be < 2048 bytes; a range may combine one lower bound
  (`$gt`/`$gte`) with one upper bound (`$lt`/`$lte`) and nothing else; range operands are
  strings (ordered lexicographically) or numbers.
* Metadata indexes (`create_metadata_index`, like `wrangler vectorize
  create-metadata-index`): at most 10; types string/number/boolean. A vector is indexed on
  the properties whose index existed when it was written; vectors written earlier must be
  re-upserted. Only the first 64 bytes of a string are indexed (cut on a UTF-8 boundary);
  filter operands are cut the same way. `return_metadata="indexed"` returns only indexed
  properties, with strings cut to 64 bytes.

Deliberate, documented choices where Cloudflare's behaviour is undocumented:

* A filter naming a property **without a metadata index raises** `BindingLimitError`. The
  docs only say a metadata index is needed to filter on a property; Cloudflare does not
  reject such a query (it simply cannot use the property), so the real service would give
  silently empty or wrong results. Failing loudly here catches the missing
  `wrangler vectorize create-metadata-index` before deployment.
* A vector without an indexed value for a property (absent, null, a value of another type
  than the index, or written before the index existed) is treated as **null**:
  `{"p": None}` / `{"p": {"$in": [None]}}` match it, `$ne` / `$nin` with a non-null operand
  match it, `$eq` and ranges do not. (Unverified against Cloudflare: callers that filter
  with `$ne`/`$nin` should write an explicit value on every vector to be safe either way.)
* Zero vectors (cosine undefined) and non-finite values are rejected on write and on query.
* Empty namespace names (`""`) are rejected; `None` means "no namespace".
* `VectorMutation.count` is the number of vectors actually written (insert: new ids only)
  or actually deleted. Writes are visible immediately (Cloudflare: after a few seconds).

Storage: one SQLite file (or in-memory database) holds the vectors as float32 blobs with
their metadata JSON; in memory each namespace keeps a float32 matrix, inverse norms and one
column per metadata index (dictionary-encoded strings, float64 numbers, booleans) so a query
is one matrix-vector product, vectorised masks and an `argpartition`.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import (
    VECTORIZE_MAX_BATCH,
    VECTORIZE_MAX_DIMENSIONS,
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
    VectorMutation,
    VectorQueryResult,
    VectorRecord,
)

# metadata-filtering.mdx / limits.mdx
VECTORIZE_MAX_METADATA_INDEXES = 10
VECTORIZE_MAX_INDEXED_STRING_BYTES = 64
VECTORIZE_MAX_FILTER_KEY_CHARS = 512

MetadataIndexType = Literal["string", "number", "boolean"]
_INDEX_TYPES: tuple[str, ...] = ("string", "number", "boolean")
_RETURN_METADATA: tuple[str, ...] = ("none", "indexed", "all")
_LOWER_OPS = ("$gt", "$gte")
_UPPER_OPS = ("$lt", "$lte")
_ALL_OPS = ("$eq", "$ne", "$in", "$nin", *_LOWER_OPS, *_UPPER_OPS)

F32Array = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]
Scalar = str | int | float | bool | None


class MetadataIndex(BaseModel):
    """A metadata index: `wrangler vectorize create-metadata-index --property-name --type`."""

    model_config = ConfigDict(frozen=True)

    property: str
    type: MetadataIndexType


# --------------------------------------------------------------------------- helpers


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _truncate_indexed(text: str) -> str:
    """The first 64 bytes of `text`, cut to the longest well-formed UTF-8 prefix."""
    raw = text.encode("utf-8")
    if len(raw) <= VECTORIZE_MAX_INDEXED_STRING_BYTES:
        return text
    # errors="ignore" drops only the partial character at the cut; the prefix is valid.
    return raw[:VECTORIZE_MAX_INDEXED_STRING_BYTES].decode("utf-8", errors="ignore")


def _is_number(value: object) -> bool:
    # JSON booleans are not numbers, although Python's bool subclasses int.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compact_json(value: object) -> str:
    # JS JSON.stringify: no spaces, non-ASCII kept as is.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _lookup_path(metadata: dict[str, Any], dotted: str) -> object:
    node: object = metadata
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1, "c": 2} -> {"a": {"b": 1}, "c": 2}."""
    out: dict[str, Any] = {}
    for dotted, value in flat.items():
        parts = dotted.split(".")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return out


def _indexed_value(index_type: str, value: object) -> Scalar:
    """What a metadata index of `index_type` stores for `value` (None: not indexed)."""
    if index_type == "string":
        return _truncate_indexed(value) if isinstance(value, str) else None
    if index_type == "number":
        return float(cast(float, value)) if _is_number(value) else None
    return value if isinstance(value, bool) else None


def _check_metadata_keys(node: dict[str, Any], op: str, vector_id: str) -> None:
    for key, value in node.items():
        if not isinstance(key, str) or not key or "." in key or '"' in key or key.startswith("$"):
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: invalid metadata key {key!r} for vector id={vector_id!r}: "
                'keys cannot be empty, contain "." or \'"\', or start with "$"'
            )
        if isinstance(value, dict):
            _check_metadata_keys(value, op, vector_id)


# --------------------------------------------------------------------------- columns


class _StringDictionary:
    """Index-wide dictionary encoding of the (truncated) values of one string property."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.values: list[str] = []
        self._array: npt.NDArray[np.object_] | None = None

    def encode(self, value: str) -> int:
        code = self.codes.get(value)
        if code is None:
            code = len(self.values)
            self.codes[value] = code
            self.values.append(value)
            self._array = None
        return code

    def as_array(self) -> npt.NDArray[np.object_]:
        if self._array is None or len(self._array) != len(self.values):
            self._array = np.array(self.values, dtype=object)
        return self._array

    def table(self, selected: BoolArray, null_matches: bool) -> BoolArray:
        """A lookup table indexed by code; the extra last slot is code -1 (no value)."""
        return np.append(selected, np.bool_(null_matches))


class _Column:
    """One metadata index inside one namespace partition, aligned with the matrix rows."""

    def __init__(
        self, index_type: str, capacity: int, dictionary: _StringDictionary | None
    ) -> None:
        self.type = index_type
        self.dictionary = dictionary
        self.present: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.data: npt.NDArray[Any]
        if index_type == "string":
            self.data = np.full(capacity, -1, dtype=np.int32)
        elif index_type == "number":
            self.data = np.full(capacity, np.nan, dtype=np.float64)
        else:
            self.data = np.zeros(capacity, dtype=np.bool_)

    def grow(self, capacity: int) -> None:
        extra = capacity - len(self.present)
        self.present = np.concatenate([self.present, np.zeros(extra, dtype=np.bool_)])
        fill: npt.NDArray[Any]
        if self.type == "string":
            fill = np.full(extra, -1, dtype=np.int32)
        elif self.type == "number":
            fill = np.full(extra, np.nan, dtype=np.float64)
        else:
            fill = np.zeros(extra, dtype=np.bool_)
        self.data = np.concatenate([self.data, fill])

    def set(self, row: int, value: Scalar) -> None:
        if value is None:
            self.present[row] = False
            self.data[row] = (
                -1 if self.type == "string" else (np.nan if self.type == "number" else False)
            )
            return
        self.present[row] = True
        if self.type == "string":
            assert self.dictionary is not None
            self.data[row] = self.dictionary.encode(cast(str, value))
        else:
            self.data[row] = value

    def move(self, src: int, dst: int) -> None:
        self.present[dst] = self.present[src]
        self.data[dst] = self.data[src]

    # ---- vectorised clause evaluation over rows [0, n)

    def eq(self, n: int, operand: Scalar) -> BoolArray:
        if operand is None:
            return ~self.present[:n]
        if self.type == "string":
            if not isinstance(operand, str) or self.dictionary is None:
                return np.zeros(n, dtype=np.bool_)
            code = self.dictionary.codes.get(_truncate_indexed(operand))
            if code is None:
                return np.zeros(n, dtype=np.bool_)
            return cast(BoolArray, self.data[:n] == code)
        if self.type == "number":
            if not _is_number(operand):
                return np.zeros(n, dtype=np.bool_)
            return cast(
                BoolArray, self.present[:n] & (self.data[:n] == float(cast(float, operand)))
            )
        if not isinstance(operand, bool):
            return np.zeros(n, dtype=np.bool_)
        return cast(BoolArray, self.present[:n] & (self.data[:n] == operand))

    def isin(self, n: int, operands: Sequence[Scalar]) -> BoolArray:
        null_matches = any(o is None for o in operands)
        if self.type == "string" and self.dictionary is not None:
            selected = np.zeros(len(self.dictionary.values), dtype=np.bool_)
            for operand in operands:
                if isinstance(operand, str):
                    code = self.dictionary.codes.get(_truncate_indexed(operand))
                    if code is not None:
                        selected[code] = True
            # code -1 (no value) reads the extra last slot of the table
            return cast(BoolArray, self.dictionary.table(selected, null_matches)[self.data[:n]])
        mask = ~self.present[:n] if null_matches else np.zeros(n, dtype=np.bool_)
        for operand in operands:
            if operand is not None:
                mask |= self.eq(n, operand)
        return mask

    def range(self, n: int, bounds: Sequence[tuple[str, str | float]]) -> BoolArray:
        if self.type == "string":
            if self.dictionary is None or not all(isinstance(b, str) for _, b in bounds):
                return np.zeros(n, dtype=np.bool_)
            values = self.dictionary.as_array()
            selected = np.ones(len(values), dtype=np.bool_)
            for op, bound in bounds:
                selected &= _compare(values, op, _truncate_indexed(cast(str, bound)))
            return cast(BoolArray, self.dictionary.table(selected, False)[self.data[:n]])
        if self.type == "number":
            if not all(_is_number(b) for _, b in bounds):
                return np.zeros(n, dtype=np.bool_)
            mask = self.present[:n].copy()
            for op, bound in bounds:
                mask &= _compare(self.data[:n], op, float(bound))
            return mask
        # A boolean index has no order; range operands are strings or numbers only.
        return np.zeros(n, dtype=np.bool_)


def _compare(values: npt.NDArray[Any], op: str, bound: object) -> BoolArray:
    with np.errstate(invalid="ignore"):
        if op == "$gt":
            return cast(BoolArray, np.asarray(values > bound, dtype=np.bool_))
        if op == "$gte":
            return cast(BoolArray, np.asarray(values >= bound, dtype=np.bool_))
        if op == "$lt":
            return cast(BoolArray, np.asarray(values < bound, dtype=np.bool_))
        return cast(BoolArray, np.asarray(values <= bound, dtype=np.bool_))


# --------------------------------------------------------------------------- partitions


class _Partition:
    """All vectors of one namespace: rows of a float32 matrix plus metadata columns."""

    def __init__(self, dimensions: int, columns: dict[str, tuple[str, _StringDictionary | None]]):
        self.dimensions = dimensions
        self.capacity = 16
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.values: F32Array = np.zeros((self.capacity, dimensions), dtype=np.float32)
        self.inv_norms: F32Array = np.zeros(self.capacity, dtype=np.float32)
        self.columns: dict[str, _Column] = {
            prop: _Column(kind, self.capacity, dictionary)
            for prop, (kind, dictionary) in columns.items()
        }

    @property
    def size(self) -> int:
        return len(self.ids)

    def _ensure_capacity(self, needed: int) -> None:
        if needed <= self.capacity:
            return
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        values = np.zeros((capacity, self.dimensions), dtype=np.float32)
        values[: self.size] = self.values[: self.size]
        self.values = values
        inv = np.zeros(capacity, dtype=np.float32)
        inv[: self.size] = self.inv_norms[: self.size]
        self.inv_norms = inv
        for column in self.columns.values():
            column.grow(capacity)
        self.capacity = capacity

    def put(
        self, vector_id: str, values: F32Array, inv_norm: float, indexed: dict[str, Scalar]
    ) -> None:
        row = self.rows.get(vector_id)
        if row is None:
            self._ensure_capacity(self.size + 1)
            row = self.size
            self.ids.append(vector_id)
            self.rows[vector_id] = row
        self.values[row] = values
        self.inv_norms[row] = inv_norm
        for prop, column in self.columns.items():
            column.set(row, indexed.get(prop))

    def bulk_load(
        self,
        ids: Sequence[str],
        values: F32Array,
        inv_norms: F32Array,
        indexed: Sequence[dict[str, Scalar]],
    ) -> None:
        """Fill an empty partition in one go (reopening a persisted index)."""
        assert self.size == 0
        self._ensure_capacity(len(ids))
        self.ids = list(ids)
        self.rows = {vid: row for row, vid in enumerate(self.ids)}
        self.values[: len(ids)] = values
        self.inv_norms[: len(ids)] = inv_norms
        for prop, column in self.columns.items():
            for row, entry in enumerate(indexed):
                value = entry.get(prop)
                if value is not None:
                    column.set(row, value)

    def remove(self, vector_id: str) -> None:
        row = self.rows.pop(vector_id)
        last = self.size - 1
        if row != last:
            # swap-remove keeps the live rows contiguous
            moved = self.ids[last]
            self.ids[row] = moved
            self.rows[moved] = row
            self.values[row] = self.values[last]
            self.inv_norms[row] = self.inv_norms[last]
            for column in self.columns.values():
                column.move(last, row)
        self.ids.pop()
        for column in self.columns.values():
            column.set(last, None)

    def add_column(self, prop: str, kind: str, dictionary: _StringDictionary | None) -> None:
        self.columns[prop] = _Column(kind, self.capacity, dictionary)

    def drop_column(self, prop: str) -> None:
        self.columns.pop(prop, None)


# --------------------------------------------------------------------------- filters


@dataclass(frozen=True)
class _Clause:
    prop: str
    kind: Literal["eq", "ne", "in", "nin", "range"]
    operand: Any


def _check_scalar(value: object, prop: str, op: str) -> Scalar:
    if value is None or isinstance(value, str | bool):
        return value
    if _is_number(value):
        if not math.isfinite(cast(float, value)):
            raise BindingLimitError(f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: non-finite number")
        return cast(float, value)
    raise BindingLimitError(
        f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: value must be a string, number, boolean "
        f"or null, got {type(value).__name__}"
    )


def _compile_filter(
    filter_: MetadataFilter, indexes: dict[str, str], index_hint: str
) -> list[_Clause]:
    if not isinstance(filter_, dict) or not filter_:
        raise BindingLimitError("VECTOR_QUERY_ERROR: filter must be a non-empty object")
    try:
        size = len(_compact_json(filter_).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise BindingLimitError(f"VECTOR_QUERY_ERROR: filter is not valid JSON: {exc}") from exc
    if size >= VECTORIZE_MAX_FILTER_BYTES:
        raise BindingLimitError(
            f"VECTOR_QUERY_ERROR: filter JSON is {size} bytes; it must be less than "
            f"{VECTORIZE_MAX_FILTER_BYTES} bytes"
        )
    clauses: list[_Clause] = []
    for prop, spec in filter_.items():
        if (
            not isinstance(prop, str)
            or not prop
            or '"' in prop
            or prop.startswith("$")
            or len(prop) > VECTORIZE_MAX_FILTER_KEY_CHARS
            or any(not part for part in prop.split("."))
        ):
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: invalid filter key {prop!r}: keys cannot be empty, contain "
                f'\'"\', start with "$", have empty dotted segments or exceed '
                f"{VECTORIZE_MAX_FILTER_KEY_CHARS} characters"
            )
        if prop not in indexes:
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: filter property {prop!r} has no metadata index, so "
                "Vectorize cannot filter on it (it would silently match nothing). Create one "
                f"first: `wrangler vectorize create-metadata-index {index_hint} "
                f"--property-name={prop} --type=string|number|boolean` (locally: "
                "create_metadata_index), then re-upsert the vectors."
            )
        clauses.extend(_compile_property(prop, spec))
    return clauses


def _compile_property(prop: str, spec: object) -> list[_Clause]:
    if not isinstance(spec, dict):
        return [_Clause(prop, "eq", _check_scalar(spec, prop, "$eq"))]
    if not spec:
        raise BindingLimitError(f"VECTOR_QUERY_ERROR: filter {prop!r}: empty operator object")
    unknown = [op for op in spec if op not in _ALL_OPS]
    if unknown:
        raise BindingLimitError(
            f"VECTOR_QUERY_ERROR: filter {prop!r}: unsupported operator {unknown[0]!r}; "
            f"supported: {', '.join(_ALL_OPS)}"
        )
    ops = list(spec)
    lower = [op for op in ops if op in _LOWER_OPS]
    upper = [op for op in ops if op in _UPPER_OPS]
    if lower or upper:
        if len(lower) > 1 or len(upper) > 1 or len(lower) + len(upper) != len(ops):
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: filter {prop!r}: a range combines at most one lower bound "
                "($gt/$gte) with at most one upper bound ($lt/$lte); other combinations are "
                "not allowed"
            )
        bounds: list[tuple[str, str | float]] = []
        for op in ops:
            bound = spec[op]
            if not isinstance(bound, str) and not _is_number(bound):
                raise BindingLimitError(
                    f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: range operands must be strings "
                    f"or numbers, got {type(bound).__name__}"
                )
            bounds.append((op, cast(str | float, _check_scalar(bound, prop, op))))
        return [_Clause(prop, "range", tuple(bounds))]
    if len(ops) != 1:
        raise BindingLimitError(
            f"VECTOR_QUERY_ERROR: filter {prop!r}: combine at most one of $eq/$ne/$in/$nin "
            "per property"
        )
    op = ops[0]
    operand = spec[op]
    if op in ("$in", "$nin"):
        if not isinstance(operand, list):
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: operand must be an array"
            )
        values = tuple(_check_scalar(v, prop, op) for v in operand)
        return [_Clause(prop, "in" if op == "$in" else "nin", values)]
    value = _check_scalar(operand, prop, op)
    return [_Clause(prop, "eq" if op == "$eq" else "ne", value)]


def _evaluate(clauses: Sequence[_Clause], part: _Partition) -> BoolArray:
    n = part.size
    mask = np.ones(n, dtype=np.bool_)
    for clause in clauses:
        column = part.columns[clause.prop]
        if clause.kind == "eq":
            mask &= column.eq(n, clause.operand)
        elif clause.kind == "ne":
            mask &= ~column.eq(n, clause.operand)
        elif clause.kind == "in":
            mask &= column.isin(n, clause.operand)
        elif clause.kind == "nin":
            mask &= ~column.isin(n, clause.operand)
        else:
            mask &= column.range(n, clause.operand)
    return mask


# --------------------------------------------------------------------------- the index


@dataclass
class _Stored:
    namespace: str | None
    # kept as JSON: cheap to reopen, and every read decodes a fresh copy for the caller
    metadata_json: str
    indexed: dict[str, Scalar]


@dataclass
class _Prepared:
    id: str
    namespace: str | None
    values: F32Array
    inv_norm: float
    metadata: dict[str, Any]
    metadata_json: str


_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectorize_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectorize_metadata_indexes (
    property TEXT PRIMARY KEY,
    type TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vectorize_vectors (
    id TEXT PRIMARY KEY,
    namespace TEXT,
    vals BLOB NOT NULL,
    metadata TEXT NOT NULL,
    indexed TEXT NOT NULL
);
"""


class LocalVectorIndex:
    """A Vectorize index (cosine metric) backed by SQLite and numpy.

    `path=None` keeps everything in memory. The dimensions are fixed when the file is first
    created; reopening with different dimensions raises. `metadata_indexes` (a
    `{property: type}` mapping or `MetadataIndex` items) are created if missing (a property
    already indexed with another type raises). Implements
    `bindings.ports.vectorize.VectorIndex`; see the module docstring for the contract.
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
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise BindingLimitError("dimensions must be an integer")
        if not 1 <= dimensions <= VECTORIZE_MAX_DIMENSIONS:
            raise BindingLimitError(
                f"dimensions must be between 1 and {VECTORIZE_MAX_DIMENSIONS}, got {dimensions}"
            )
        self.dimensions = dimensions
        self.name = name
        self._lock = threading.RLock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._indexes: dict[str, str] = {}
        self._dictionaries: dict[str, _StringDictionary] = {}
        self._partitions: dict[str | None, _Partition] = {}
        self._records: dict[str, _Stored] = {}
        self._check_dimensions()
        self._load()
        declared: Iterable[MetadataIndex | tuple[str, str]] = (
            metadata_indexes.items() if isinstance(metadata_indexes, Mapping) else metadata_indexes
        )
        for spec in declared:
            if isinstance(spec, MetadataIndex):
                index = spec
            elif spec[1] in _INDEX_TYPES:
                index = MetadataIndex(property=spec[0], type=cast(MetadataIndexType, spec[1]))
            else:
                raise BindingLimitError(
                    f"metadata index type must be one of {', '.join(_INDEX_TYPES)}, "
                    f"got {spec[1]!r} for {spec[0]!r}"
                )
            existing = self._indexes.get(index.property)
            if existing is None:
                self.create_metadata_index(index.property, index.type)
            elif existing != index.type:
                raise BindingLimitError(
                    f"metadata index {index.property!r} already exists with type {existing!r}, "
                    f"not {index.type!r}; delete it first"
                )

    # ---------------------------------------------------------------- lifecycle

    def _check_dimensions(self) -> None:
        row = self._db.execute(
            "SELECT value FROM vectorize_settings WHERE key = 'dimensions'"
        ).fetchone()
        if row is None:
            self._db.execute(
                "INSERT INTO vectorize_settings (key, value) VALUES ('dimensions', ?)",
                (str(self.dimensions),),
            )
        elif int(row[0]) != self.dimensions:
            raise BindingLimitError(
                f"this index was created with {row[0]} dimensions, not {self.dimensions}; "
                "a Vectorize index's dimensions cannot change (create a new index)"
            )

    def _load(self) -> None:
        for prop, kind in self._db.execute(
            "SELECT property, type FROM vectorize_metadata_indexes ORDER BY rowid"
        ):
            self._indexes[prop] = kind
            if kind == "string":
                self._dictionaries[prop] = _StringDictionary()
        rows = self._db.execute(
            "SELECT id, namespace, vals, metadata, indexed FROM vectorize_vectors ORDER BY rowid"
        ).fetchall()
        if not rows:
            return
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(
            len(rows), self.dimensions
        )
        inv = (1.0 / np.sqrt(np.einsum("ij,ij->i", matrix, matrix))).astype(np.float32)
        by_namespace: dict[str | None, list[int]] = {}
        for i, (vector_id, namespace, _vals, metadata, indexed) in enumerate(rows):
            self._records[vector_id] = _Stored(namespace, metadata, json.loads(indexed))
            by_namespace.setdefault(namespace, []).append(i)
        for namespace, positions in by_namespace.items():
            ids = [rows[i][0] for i in positions]
            self._partition(namespace).bulk_load(
                ids, matrix[positions], inv[positions], [self._records[v].indexed for v in ids]
            )

    def close(self) -> None:
        """Close the SQLite connection (the object is unusable afterwards)."""
        with self._lock:
            self._db.close()

    def _partition(self, namespace: str | None) -> _Partition:
        part = self._partitions.get(namespace)
        if part is None:
            part = _Partition(
                self.dimensions,
                {p: (k, self._dictionaries.get(p)) for p, k in self._indexes.items()},
            )
            self._partitions[namespace] = part
        return part

    # ---------------------------------------------------------------- metadata indexes

    def create_metadata_index(self, property: str, type: MetadataIndexType) -> None:
        """Index `property` (dotted for nested metadata) so queries can filter on it.

        Like Cloudflare, only vectors written after this call are indexed; re-upsert older
        ones. At most 10 metadata indexes; creating an existing one raises.
        """
        if type not in _INDEX_TYPES:
            raise BindingLimitError(
                f"metadata index type must be one of {', '.join(_INDEX_TYPES)}, got {type!r}"
            )
        if (
            not isinstance(property, str)
            or not property
            or '"' in property
            or property.startswith("$")
            or len(property) > VECTORIZE_MAX_FILTER_KEY_CHARS
            or any(not part for part in property.split("."))
        ):
            raise BindingLimitError(f"invalid metadata index property name {property!r}")
        with self._lock:
            if property in self._indexes:
                raise BindingLimitError(f"metadata index {property!r} already exists")
            if len(self._indexes) >= VECTORIZE_MAX_METADATA_INDEXES:
                raise BindingLimitError(
                    f"an index can have at most {VECTORIZE_MAX_METADATA_INDEXES} metadata indexes"
                )
            self._db.execute(
                "INSERT INTO vectorize_metadata_indexes (property, type) VALUES (?, ?)",
                (property, type),
            )
            self._indexes[property] = type
            dictionary = _StringDictionary() if type == "string" else None
            if dictionary is not None:
                self._dictionaries[property] = dictionary
            for part in self._partitions.values():
                part.add_column(property, type, dictionary)

    def delete_metadata_index(self, property: str) -> None:
        """Drop a metadata index; filters on `property` raise afterwards."""
        with self._lock:
            if property not in self._indexes:
                raise BindingLimitError(f"metadata index {property!r} does not exist")
            stripped: list[tuple[str, str]] = []
            for vector_id, stored in self._records.items():
                if property in stored.indexed:
                    del stored.indexed[property]
                    stripped.append((_compact_json(stored.indexed), vector_id))
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "DELETE FROM vectorize_metadata_indexes WHERE property = ?", (property,)
                )
                self._db.executemany(
                    "UPDATE vectorize_vectors SET indexed = ? WHERE id = ?", stripped
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            del self._indexes[property]
            self._dictionaries.pop(property, None)
            for part in self._partitions.values():
                part.drop_column(property)

    def list_metadata_indexes(self) -> list[MetadataIndex]:
        """The metadata indexes, in creation order."""
        with self._lock:
            return [
                MetadataIndex(property=p, type=cast(MetadataIndexType, k))
                for p, k in self._indexes.items()
            ]

    # ---------------------------------------------------------------- writes

    def _prepare(self, record: VectorRecord, op: str) -> _Prepared:
        vid = record.id
        if not isinstance(vid, str) or not vid:
            raise BindingLimitError(f"VECTOR_{op}_ERROR: vector id must be a non-empty string")
        if _utf8_len(vid) > VECTORIZE_MAX_ID_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: vector id {vid[:80]!r} is {_utf8_len(vid)} bytes; the "
                f"maximum is {VECTORIZE_MAX_ID_BYTES} bytes"
            )
        self._check_namespace(record.namespace, op)
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
        _check_metadata_keys(metadata, op, vid)
        try:
            metadata_json = _compact_json(metadata)
        except (TypeError, ValueError) as exc:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: metadata for id={vid!r} is not JSON: {exc}"
            ) from exc
        size = _utf8_len(metadata_json)
        if size > VECTORIZE_MAX_METADATA_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: metadata for id={vid!r} is {size} bytes; the maximum is "
                f"{VECTORIZE_MAX_METADATA_BYTES} bytes (10 KiB)"
            )
        return _Prepared(
            vid, record.namespace, values, 1.0 / norm, json.loads(metadata_json), metadata_json
        )

    @staticmethod
    def _check_namespace(namespace: str | None, op: str) -> None:
        if namespace is None:
            return
        if not isinstance(namespace, str) or not namespace:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: namespace must be a non-empty string or omitted"
            )
        if _utf8_len(namespace) > VECTORIZE_MAX_NAMESPACE_BYTES:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: namespace {namespace[:80]!r} is {_utf8_len(namespace)} "
                f"bytes; the maximum is {VECTORIZE_MAX_NAMESPACE_BYTES} bytes"
            )

    def _write(
        self, vectors: Sequence[VectorRecord], op: Literal["INSERT", "UPSERT"]
    ) -> VectorMutation:
        if len(vectors) > VECTORIZE_MAX_BATCH:
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: {len(vectors)} vectors in one call; the maximum from "
                f"Workers is {VECTORIZE_MAX_BATCH}"
            )
        # Validate the whole batch first: a bad vector rejects the call, nothing is written.
        prepared = [self._prepare(v, op) for v in vectors]
        with self._lock:
            chosen: dict[str, _Prepared] = {}
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
            indexed = {vid: self._index_values(item.metadata) for vid, item in chosen.items()}
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectorize_vectors (id, namespace, vals, metadata, "
                    "indexed) VALUES (?, ?, ?, ?, ?)",
                    [
                        (
                            vid,
                            item.namespace,
                            item.values.tobytes(),
                            item.metadata_json,
                            _compact_json(indexed[vid]),
                        )
                        for vid, item in chosen.items()
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            for vid, item in chosen.items():
                previous = self._records.get(vid)
                if previous is not None and previous.namespace != item.namespace:
                    self._drop_from_partition(vid, previous.namespace)
                self._records[vid] = _Stored(item.namespace, item.metadata_json, indexed[vid])
                self._partition(item.namespace).put(vid, item.values, item.inv_norm, indexed[vid])
        return VectorMutation(mutation_id=str(uuid.uuid4()), count=len(chosen))

    def _index_values(self, metadata: dict[str, Any]) -> dict[str, Scalar]:
        out: dict[str, Scalar] = {}
        for prop, kind in self._indexes.items():
            value = _indexed_value(kind, _lookup_path(metadata, prop))
            if value is not None:
                out[prop] = value
        return out

    def _drop_from_partition(self, vector_id: str, namespace: str | None) -> None:
        part = self._partitions[namespace]
        part.remove(vector_id)
        if part.size == 0:
            del self._partitions[namespace]

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
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "DELETE FROM vectorize_vectors WHERE id = ?", [(vid,) for vid in present]
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            for vid in present:
                stored = self._records.pop(vid)
                self._drop_from_partition(vid, stored.namespace)
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
                part = self._partitions[stored.namespace]
                row = part.rows[vid]
                out.append(
                    VectorRecord(
                        id=vid,
                        values=part.values[row].astype(np.float64).tolist(),
                        namespace=stored.namespace,
                        metadata=json.loads(stored.metadata_json),
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
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise BindingLimitError("VECTOR_QUERY_ERROR: topK must be an integer")
        if return_metadata not in _RETURN_METADATA:
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: returnMetadata must be one of "
                f"{', '.join(_RETURN_METADATA)}, got {return_metadata!r}"
            )
        with_data = return_values or return_metadata == "all"
        limit = VECTORIZE_MAX_TOP_K_WITH_DATA if with_data else VECTORIZE_MAX_TOP_K
        if not 1 <= top_k <= limit:
            detail = " when returnValues is true or returnMetadata is 'all'" if with_data else ""
            raise BindingLimitError(
                f"VECTOR_QUERY_ERROR: invalid topK {top_k}; it must be between 1 and "
                f"{limit}{detail}"
            )
        self._check_namespace(namespace, "QUERY")
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
        q = q / np.float32(q_norm)
        with self._lock:
            clauses = (
                _compile_filter(filter, self._indexes, self.name) if filter is not None else []
            )
            if namespace is not None:
                part = self._partitions.get(namespace)
                parts = [part] if part is not None else []
            else:
                parts = list(self._partitions.values())
            candidates: list[tuple[float, str, _Partition, int]] = []
            for part in parts:
                candidates.extend(self._top_in_partition(part, q, top_k, clauses))
            candidates.sort(key=lambda c: (-c[0], c[1]))
            matches = [
                self._match(score, vid, part, row, return_values, return_metadata)
                for score, vid, part, row in candidates[:top_k]
            ]
        return VectorQueryResult(count=len(matches), matches=matches)

    @staticmethod
    def _top_in_partition(
        part: _Partition, q: F32Array, top_k: int, clauses: Sequence[_Clause]
    ) -> list[tuple[float, str, _Partition, int]]:
        n = part.size
        if n == 0:
            return []
        scores: F32Array = (part.values[:n] @ q) * part.inv_norms[:n]
        rows: npt.NDArray[np.intp]
        if clauses:
            rows = np.flatnonzero(_evaluate(clauses, part))
            scores = scores[rows]
        else:
            rows = np.arange(n)
        if len(rows) == 0:
            return []
        if len(rows) > top_k:
            kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            # keep everything tied with the k-th score so ties can be broken by id
            keep = np.flatnonzero(scores >= kth)
            rows, scores = rows[keep], scores[keep]
        clipped = np.clip(scores.astype(np.float64), -1.0, 1.0)
        return [
            (float(s), part.ids[int(r)], part, int(r))
            for s, r in zip(clipped.tolist(), rows.tolist(), strict=True)
        ]

    def _match(
        self,
        score: float,
        vector_id: str,
        part: _Partition,
        row: int,
        return_values: bool,
        return_metadata: str,
    ) -> VectorMatch:
        stored = self._records[vector_id]
        metadata: dict[str, Any] | None = None
        if return_metadata == "all":
            metadata = json.loads(stored.metadata_json)
        elif return_metadata == "indexed":
            metadata = _nest({p: v for p, v in stored.indexed.items() if p in self._indexes})
        return VectorMatch(
            id=vector_id,
            score=score,
            namespace=stored.namespace,
            values=part.values[row].astype(np.float64).tolist() if return_values else None,
            metadata=metadata,
        )


__all__ = [
    "VECTORIZE_MAX_FILTER_KEY_CHARS",
    "VECTORIZE_MAX_INDEXED_STRING_BYTES",
    "VECTORIZE_MAX_METADATA_INDEXES",
    "LocalVectorIndex",
    "MetadataIndex",
    "MetadataIndexType",
]
