"""The vectors of one namespace: rows of a float32 matrix plus one column per metadata index.

Rows [0, size) are live and contiguous (removal swaps the last row in); `rows` maps an id
to its row. `top` scores the rows against a unit query vector by cosine similarity (one
matrix-vector product times the stored inverse norms) and keeps the best `top_k`, plus
any rows tied with the k-th score so the caller can break ties by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from local_runtime.adapters.vectorize._columns import (
    BoolArray,
    Column,
    ColumnSpec,
    StringDictionary,
)
from local_runtime.adapters.vectorize._metadata import Scalar
from local_runtime.adapters.vectorize.projection import Projection, needs_fit

F32Array = npt.NDArray[np.float32]


class Partition:
    """All vectors of one namespace: rows of a float32 matrix plus metadata columns."""

    def __init__(self, dimensions: int, columns: dict[str, ColumnSpec]) -> None:
        self.dimensions = dimensions
        self.capacity = 16
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.values: F32Array = np.zeros((self.capacity, dimensions), dtype=np.float32)
        self.inv_norms: F32Array = np.zeros(self.capacity, dtype=np.float32)
        self.columns: dict[str, Column] = {
            prop: Column(kind, self.capacity, dictionary)
            for prop, (kind, dictionary) in columns.items()
        }
        # The approximate first pass of large partitions (`projection`).
        self.projection: Projection | None = None

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
        if self.projection is not None:
            self.projection.grow(capacity, self.size)
        self.capacity = capacity

    def _refit_if_due(self) -> None:
        if needs_fit(self.projection, self.size, self.dimensions):
            self.projection = Projection.fit(self.values, self.inv_norms, self.size, self.capacity)

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
        if self.projection is not None:
            self.projection.set(row, values * np.float32(inv_norm))
        self._refit_if_due()

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
        self._refit_if_due()

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
            if self.projection is not None:
                self.projection.move(last, row)
            for column in self.columns.values():
                column.move(last, row)
        self.ids.pop()
        for column in self.columns.values():
            column.set(last, None)

    def add_column(self, prop: str, kind: str, dictionary: StringDictionary | None) -> None:
        self.columns[prop] = Column(kind, self.capacity, dictionary)

    def drop_column(self, prop: str) -> None:
        self.columns.pop(prop, None)

    def top(
        self, q: F32Array, top_k: int, mask: BoolArray | None
    ) -> list[tuple[float, str, Partition, int]]:
        """(score, id, self, row) of the best `top_k` rows where `mask` holds (None: all).

        `q` is the unit query vector; scores are clipped to [-1, 1].
        """
        n = self.size
        if n == 0:
            return []
        if mask is not None and bool(mask.all()):
            mask = None  # every row matches (one tenant, one model): no gather needed
        rows: npt.NDArray[np.intp] | None = None if mask is None else np.flatnonzero(mask)
        if self.projection is not None:
            # Large partition: exact scores for a shortlist from the projected rows only.
            rows = self.projection.shortlist(q, n, rows, top_k)
        if rows is None:
            # One vectorised pass: a matrix-vector product over the whole partition.
            scores: npt.NDArray[np.floating[Any]] = (self.values[:n] @ q) * self.inv_norms[:n]
            rows = np.arange(n)
        else:
            scores = (self.values[rows] @ q) * self.inv_norms[rows]
        if len(rows) == 0:
            return []
        if len(rows) > top_k:
            kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            # keep everything tied with the k-th score so ties can be broken by id
            keep = np.flatnonzero(scores >= kth)
            rows, scores = rows[keep], scores[keep]
        clipped = np.clip(scores.astype(np.float64), -1.0, 1.0)
        return [
            (float(s), self.ids[int(r)], self, int(r))
            for s, r in zip(clipped.tolist(), rows.tolist(), strict=True)
        ]
