"""The approximate first pass of a large partition's scan (docs/semantic-memory.md, recall
latency): above `APPROX_MIN_ROWS` rows a partition also keeps each unit vector projected onto
the top `PROJECTED_DIMENSIONS` right singular vectors of a sample of them (a truncated,
uncentred SVD keeps inner products best among rank-d maps); a query scores that narrower
matrix, keeps a shortlist and scores it exactly, so returned scores are exact cosines and
only which rows are considered is approximate (benchmarks/semantic_latency.py prints its
share of the exact top 100). The fit is redone when the partition has doubled since.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.intp]

APPROX_MIN_ROWS = 50_000
PROJECTED_DIMENSIONS = 48
OVERSAMPLE = 10
MIN_SHORTLIST = 2_000
# The shortlist also grows with the partition: the more vectors, the more of them lie as
# close to the query as the k-th best, inside the projection's error (at 1M synthetic facts
# a fixed 1,000 kept 0.89 of the exact top 100; 1% of the rows keeps 0.98).
SHORTLIST_SHARE = 0.01
FIT_SAMPLE_ROWS = 8_192
_SAMPLE_STRIDE = 64
_CHUNK_ROWS = 65_536  # rows projected per matrix product when fitting (bounds the temporary)


class Projection:
    """The projected rows of one partition (same row numbers as its vectors)."""

    def __init__(self, components: F32Array, capacity: int, fitted_rows: int) -> None:
        self.components = components  # (PROJECTED_DIMENSIONS, dimensions)
        self.fitted_rows = fitted_rows
        self.values: F32Array = np.zeros((capacity, components.shape[0]), dtype=np.float32)

    @classmethod
    def fit(cls, values: F32Array, inv_norms: F32Array, size: int, capacity: int) -> Projection:
        """Fit on an evenly spaced sample of the first `size` rows, then project them all."""
        sample = np.linspace(0, size - 1, num=min(size, FIT_SAMPLE_ROWS)).astype(np.intp)
        unit = values[sample] * inv_norms[sample, None]
        _, _, vt = np.linalg.svd(unit.astype(np.float64), full_matrices=False)
        dims = min(PROJECTED_DIMENSIONS, vt.shape[0])
        projection = cls(np.ascontiguousarray(vt[:dims], dtype=np.float32), capacity, size)
        for start in range(0, size, _CHUNK_ROWS):
            stop = min(size, start + _CHUNK_ROWS)
            unit = values[start:stop] * inv_norms[start:stop, None]
            projection.values[start:stop] = unit @ projection.components.T
        return projection

    def grow(self, capacity: int, size: int) -> None:
        grown = np.zeros((capacity, self.values.shape[1]), dtype=np.float32)
        grown[:size] = self.values[:size]
        self.values = grown

    def set(self, row: int, unit: F32Array) -> None:
        self.values[row] = self.components @ unit

    def move(self, source: int, target: int) -> None:
        self.values[target] = self.values[source]

    def shortlist(
        self, q: F32Array, size: int, rows: IntArray | None, top_k: int
    ) -> IntArray | None:
        """The rows (among `rows`, None: all of the first `size`) most likely to hold the
        exact top `top_k` for the unit query `q`; `rows` itself when they are few."""
        among = size if rows is None else len(rows)
        wanted = max(OVERSAMPLE * top_k, MIN_SHORTLIST, int(among * SHORTLIST_SHARE))
        if among <= wanted:
            return rows
        projected = self.values[:size] if rows is None else self.values[rows]
        approx = projected @ (self.components @ q)
        best = _best(approx, wanted)
        return best if rows is None else rows[best]


def _best(scores: F32Array, wanted: int) -> IntArray:
    """About the `wanted` highest of `scores` (at least half as many, at most `wanted`).

    A full selection over 1M scores costs ~4 ms; the threshold is estimated instead from
    every `_SAMPLE_STRIDE`-th score (its quantile of the same rank), and the rows above it
    are taken in one comparison. A shortlist only needs roughly its size: when the estimate
    lands far off, the exact selection is used."""
    n = len(scores)
    sample = scores[::_SAMPLE_STRIDE]
    rank = len(sample) * wanted // n
    if rank >= 20:  # enough sampled scores above the threshold for a steady estimate
        threshold = np.partition(sample, len(sample) - rank)[len(sample) - rank]
        above = np.flatnonzero(scores >= threshold)
        if wanted // 2 <= len(above) <= wanted:
            return above
        if wanted < len(above) <= 2 * wanted:
            return above[np.argpartition(scores[above], len(above) - wanted)[-wanted:]]
    return np.argpartition(scores, n - wanted)[n - wanted :]


def needs_fit(projection: Projection | None, size: int, dimensions: int) -> bool:
    """Whether a partition of `size` rows of `dimensions` should (re)fit its projection now
    (never when the projection would not be at least twice narrower than the vectors)."""
    if size < APPROX_MIN_ROWS or dimensions < 2 * PROJECTED_DIMENSIONS:
        return False
    return projection is None or size >= 2 * projection.fitted_rows
