"""The metadata indexes of one Vectorize index and the numpy columns that hold their values.

`MetadataIndexes` is the registry (property -> type, in creation order, plus one
index-wide `StringDictionary` per string property); it checks declarations against
Vectorize's limits and computes what a vector's metadata contributes to each index.
`Column` holds one index's values for the rows of one namespace partition and evaluates
filter clauses over them, vectorised: a vector without an indexed value reads as null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from bindings.ports.errors import BindingLimitError
from local_runtime.adapters.vectorize._metadata import (
    INDEX_TYPES,
    VECTORIZE_MAX_METADATA_INDEXES,
    MetadataIndex,
    MetadataIndexType,
    Scalar,
    indexed_value,
    is_number,
    is_valid_property,
    lookup_path,
    truncate_indexed,
)

BoolArray = npt.NDArray[np.bool_]


class StringDictionary:
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


# (type, dictionary) of one metadata index: what a partition needs to lay out a column
ColumnSpec = tuple[str, StringDictionary | None]


class Column:
    """One metadata index inside one namespace partition, aligned with the matrix rows."""

    def __init__(self, index_type: str, capacity: int, dictionary: StringDictionary | None) -> None:
        self.type = index_type
        self.dictionary = dictionary
        self.present: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.data: npt.NDArray[Any] = self._empty(capacity)

    def _empty(self, size: int) -> npt.NDArray[Any]:
        # "no value": code -1 for strings, NaN for numbers, False for booleans
        if self.type == "string":
            return np.full(size, -1, dtype=np.int32)
        if self.type == "number":
            return np.full(size, np.nan, dtype=np.float64)
        return np.zeros(size, dtype=np.bool_)

    def grow(self, capacity: int) -> None:
        extra = capacity - len(self.present)
        self.present = np.concatenate([self.present, np.zeros(extra, dtype=np.bool_)])
        self.data = np.concatenate([self.data, self._empty(extra)])

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
            code = self.dictionary.codes.get(truncate_indexed(operand))
            if code is None:
                return np.zeros(n, dtype=np.bool_)
            return cast(BoolArray, self.data[:n] == code)
        if self.type == "number":
            if not is_number(operand):
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
                    code = self.dictionary.codes.get(truncate_indexed(operand))
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
                selected &= _compare(values, op, truncate_indexed(cast(str, bound)))
            return cast(BoolArray, self.dictionary.table(selected, False)[self.data[:n]])
        if self.type == "number":
            if not all(is_number(b) for _, b in bounds):
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


class MetadataIndexes:
    """The metadata indexes, in creation order, with a dictionary per string property."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        self._dictionaries: dict[str, StringDictionary] = {}

    @staticmethod
    def resolve(spec: MetadataIndex | tuple[str, str]) -> MetadataIndex:
        """A declared index (a `MetadataIndex` or a `(property, type)` pair) as a model."""
        if isinstance(spec, MetadataIndex):
            return spec
        if spec[1] in INDEX_TYPES:
            return MetadataIndex(property=spec[0], type=cast(MetadataIndexType, spec[1]))
        raise BindingLimitError(
            f"metadata index type must be one of {', '.join(INDEX_TYPES)}, "
            f"got {spec[1]!r} for {spec[0]!r}"
        )

    @staticmethod
    def check_declaration(property: str, type: str) -> None:
        """Raise unless `type` is an index type and `property` a valid property name."""
        if type not in INDEX_TYPES:
            raise BindingLimitError(
                f"metadata index type must be one of {', '.join(INDEX_TYPES)}, got {type!r}"
            )
        if not is_valid_property(property):
            raise BindingLimitError(f"invalid metadata index property name {property!r}")

    def check_room_for(self, property: str) -> None:
        """Raise if `property` is already indexed or the index has no room for another."""
        if property in self.types:
            raise BindingLimitError(f"metadata index {property!r} already exists")
        if len(self.types) >= VECTORIZE_MAX_METADATA_INDEXES:
            raise BindingLimitError(
                f"an index can have at most {VECTORIZE_MAX_METADATA_INDEXES} metadata indexes"
            )

    def add(self, property: str, kind: str) -> StringDictionary | None:
        """Register an index; returns the new dictionary of a string index."""
        self.types[property] = kind
        dictionary = StringDictionary() if kind == "string" else None
        if dictionary is not None:
            self._dictionaries[property] = dictionary
        return dictionary

    def drop(self, property: str) -> None:
        del self.types[property]
        self._dictionaries.pop(property, None)

    def column_specs(self) -> dict[str, ColumnSpec]:
        """What a new partition needs to lay out one column per index."""
        return {p: (k, self._dictionaries.get(p)) for p, k in self.types.items()}

    def declared(self) -> list[MetadataIndex]:
        return [
            MetadataIndex(property=p, type=cast(MetadataIndexType, k))
            for p, k in self.types.items()
        ]

    def values_of(self, metadata: dict[str, Any]) -> dict[str, Scalar]:
        """The indexed value of each property `metadata` has a value of the index's type for."""
        out: dict[str, Scalar] = {}
        for prop, kind in self.types.items():
            value = indexed_value(kind, lookup_path(metadata, prop))
            if value is not None:
                out[prop] = value
        return out
