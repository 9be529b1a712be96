"""The local index's approximate first pass for large partitions (`vectorize.projection`):
above the threshold it still returns exact cosine scores, finds what the exact scan finds,
follows writes and deletes, and refits as the partition grows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from bindings.ports.vectorize import VectorRecord
from local_runtime.adapters.vectorize import LocalVectorIndex, projection

DIMS = 256
ROWS = 3_000


def _embeddings(n: int, seed: int, topic: int = 0) -> npt.NDArray[np.float32]:
    """Vectors shaped like text embeddings: most variance in a few directions (set by
    `topic`), plus noise."""
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(topic).standard_normal((24, DIMS))
    vectors = rng.standard_normal((n, 24)) @ basis + 0.3 * rng.standard_normal((n, DIMS))
    return vectors.astype(np.float32)


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same code path as 50K+ rows, at a size a test can build in a second.
    monkeypatch.setattr(projection, "APPROX_MIN_ROWS", 1_000)
    monkeypatch.setattr(projection, "MIN_SHORTLIST", 200)


async def _put(index: LocalVectorIndex, vectors: npt.NDArray[np.float32], prefix: str) -> None:
    for start in range(0, len(vectors), 1000):
        await index.upsert(
            [
                VectorRecord(id=f"{prefix}{i}", values=vectors[i].tolist())
                for i in range(start, min(len(vectors), start + 1000))
            ]
        )


async def _index(path: Path | None, vectors: npt.NDArray[np.float32]) -> LocalVectorIndex:
    index = LocalVectorIndex(path, DIMS)
    await _put(index, vectors, "v")
    return index


def _exact(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32]) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit @ (query / np.linalg.norm(query))


@pytest.mark.usefixtures("small_threshold")
async def test_a_large_partition_returns_the_exact_top_k_with_exact_scores() -> None:
    vectors = _embeddings(ROWS, seed=1)
    index = await _index(None, vectors)
    for query in _embeddings(40, seed=2):
        found = await index.query(query.tolist(), top_k=20)
        exact = _exact(vectors, query)
        # Scores are exact cosines, not projected estimates.
        for match in found.matches:
            assert match.score == pytest.approx(float(exact[int(match.id[1:])]), abs=1e-5)
        kth = float(np.sort(exact)[-20])
        assert sum(m.score >= kth - 1e-5 for m in found.matches) >= 19


@pytest.mark.usefixtures("small_threshold")
async def test_writes_after_the_fit_are_found_and_deleted_vectors_never_return(
    tmp_path: Path,
) -> None:
    vectors = _embeddings(ROWS, seed=3)
    index = await _index(tmp_path / "v.sqlite", vectors)
    fresh = _embeddings(5, seed=4)
    await index.upsert([VectorRecord(id=f"new{i}", values=v.tolist()) for i, v in enumerate(fresh)])
    for i, vector in enumerate(fresh):
        found = await index.query(vector.tolist(), top_k=1)
        assert found.matches[0].id == f"new{i}"
    # Deleting moves the last rows into the gaps: their projected rows must move with them.
    await index.delete_by_ids([f"v{i}" for i in range(300)])
    found = await index.query(vectors[10].tolist(), top_k=5)
    assert "v10" not in [m.id for m in found.matches]
    moved = range(ROWS - 300, ROWS)
    for i in moved:
        assert (await index.query(vectors[i].tolist(), top_k=1)).matches[0].id == f"v{i}"
    last = vectors[ROWS - 1]
    index.close()
    # Reopened from the file: fitted again on load, same answers.
    reopened = LocalVectorIndex(tmp_path / "v.sqlite", DIMS)
    assert (await reopened.query(last.tolist(), top_k=1)).matches[0].id == f"v{ROWS - 1}"
    reopened.close()


@pytest.mark.usefixtures("small_threshold")
async def test_the_projection_follows_the_data_as_the_partition_doubles() -> None:
    first = _embeddings(1_200, seed=5, topic=1)
    index = await _index(None, first)
    # Then as many again about other things (other directions): the projection fitted on
    # the first topic alone would lose them; it is refitted when the partition doubles.
    second = _embeddings(1_300, seed=6, topic=2)
    await _put(index, second, "m")
    everything = np.vstack([first, second])
    shares = []
    for query in _embeddings(30, seed=8, topic=2):
        found = await index.query(query.tolist(), top_k=20)
        kth = float(np.sort(_exact(everything, query))[-20])
        shares.append(sum(m.score >= kth - 1e-5 for m in found.matches) / 20)
    assert np.mean(shares) >= 0.95


async def test_below_the_threshold_the_scan_is_exact() -> None:
    vectors = _embeddings(1_500, seed=7)
    index = await _index(None, vectors)
    for query in _embeddings(10, seed=9):
        found = await index.query(query.tolist(), top_k=100)
        exact = _exact(vectors, query)
        assert [m.id for m in found.matches] == [f"v{i}" for i in np.argsort(-exact)[:100]]


def test_the_shortlist_of_a_large_partition_holds_the_best_projected_rows() -> None:
    # 100K rows: the shortlist's threshold is estimated from a sample of the projected
    # scores rather than by a full selection; it must still be (about) the best rows.
    rng = np.random.default_rng(11)
    n, dims = 100_000, 128
    values = (rng.standard_normal((n, 16)) @ rng.standard_normal((16, dims))).astype(np.float32)
    values += 0.2 * rng.standard_normal((n, dims)).astype(np.float32)
    inv = (1.0 / np.linalg.norm(values, axis=1)).astype(np.float32)
    fitted = projection.Projection.fit(values, inv, n, n)
    for _ in range(5):
        q = values[int(rng.integers(n))] * inv[0]
        q = (q / np.linalg.norm(q)).astype(np.float32)
        shortlist = fitted.shortlist(q, n, None, top_k=20)
        assert shortlist is not None
        wanted = max(projection.MIN_SHORTLIST, int(n * projection.SHORTLIST_SHARE))
        assert wanted // 2 <= len(shortlist) <= wanted
        approx = fitted.values[:n] @ (fitted.components @ q)
        ranked = np.argsort(-approx)
        assert set(ranked[: len(shortlist) // 2]) <= set(shortlist.tolist())
        assert set(shortlist.tolist()) <= set(ranked[: 2 * wanted].tolist())
