"""Vectorize metadata filters: compiled once per query, evaluated per namespace partition.

`compile_filter` checks a filter against metadata-filtering.mdx (compact JSON under 2048
bytes, valid keys, implicit `$eq`, `$eq $ne $in $nin`, a range of at most one lower and one
upper bound, scalar operands) and against the index's metadata indexes (a property without
one raises `BindingLimitError`, see the package docstring), giving a list of `Clause`s that
must all hold. `evaluate` turns them into a boolean mask over a partition's live rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import VECTORIZE_MAX_FILTER_BYTES, MetadataFilter
from local_runtime.adapters.vectorize._columns import BoolArray
from local_runtime.adapters.vectorize._metadata import (
    VECTORIZE_MAX_FILTER_KEY_CHARS,
    Scalar,
    compact_json,
    is_number,
    is_valid_property,
)
from local_runtime.adapters.vectorize._partition import Partition

_LOWER_OPS = ("$gt", "$gte")
_UPPER_OPS = ("$lt", "$lte")
_ALL_OPS = ("$eq", "$ne", "$in", "$nin", *_LOWER_OPS, *_UPPER_OPS)


@dataclass(frozen=True)
class Clause:
    prop: str
    kind: Literal["eq", "ne", "in", "nin", "range"]
    operand: Any


def _check_scalar(value: object, prop: str, op: str) -> Scalar:
    if value is None or isinstance(value, str | bool):
        return value
    if is_number(value):
        if not math.isfinite(cast(float, value)):
            raise BindingLimitError(f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: non-finite number")
        return cast(float, value)
    raise BindingLimitError(
        f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: value must be a string, number, boolean "
        f"or null, got {type(value).__name__}"
    )


def compile_filter(
    filter_: MetadataFilter, indexes: dict[str, str], index_hint: str
) -> list[Clause]:
    """The clauses of `filter_`; `index_hint` names the index in the error messages."""
    if not isinstance(filter_, dict) or not filter_:
        raise BindingLimitError("VECTOR_QUERY_ERROR: filter must be a non-empty object")
    try:
        size = len(compact_json(filter_).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise BindingLimitError(f"VECTOR_QUERY_ERROR: filter is not valid JSON: {exc}") from exc
    if size >= VECTORIZE_MAX_FILTER_BYTES:
        raise BindingLimitError(
            f"VECTOR_QUERY_ERROR: filter JSON is {size} bytes; it must be less than "
            f"{VECTORIZE_MAX_FILTER_BYTES} bytes"
        )
    clauses: list[Clause] = []
    for prop, spec in filter_.items():
        if not is_valid_property(prop):
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


def _compile_property(prop: str, spec: object) -> list[Clause]:
    if not isinstance(spec, dict):
        return [Clause(prop, "eq", _check_scalar(spec, prop, "$eq"))]
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
            if not isinstance(bound, str) and not is_number(bound):
                raise BindingLimitError(
                    f"VECTOR_QUERY_ERROR: filter {prop!r} {op}: range operands must be strings "
                    f"or numbers, got {type(bound).__name__}"
                )
            bounds.append((op, cast(str | float, _check_scalar(bound, prop, op))))
        return [Clause(prop, "range", tuple(bounds))]
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
        return [Clause(prop, "in" if op == "$in" else "nin", values)]
    value = _check_scalar(operand, prop, op)
    return [Clause(prop, "eq" if op == "$eq" else "ne", value)]


def evaluate(clauses: Sequence[Clause], part: Partition) -> BoolArray:
    """A mask over `part`'s live rows: True where every clause holds."""
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
