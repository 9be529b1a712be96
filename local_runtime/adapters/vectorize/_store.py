"""The SQLite file (or in-memory database) behind one local Vectorize index.

Three tables: the settings (the dimensions, fixed at creation), the metadata indexes in
creation order, and one row per vector: id, namespace, float32 values as a blob, the
metadata JSON and the JSON of its indexed values (what the metadata indexes held when it
was written, since Vectorize does not re-index older vectors). Each mutation is one
transaction. `LocalVectorIndex` mirrors the contents in memory and is the only caller.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bindings.ports.errors import BindingLimitError
from local_runtime.adapters.vectorize._metadata import Scalar, compact_json

F32Array = npt.NDArray[np.float32]

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


# One vector's row apart from its values (those live in its namespace's partition):
# (namespace, metadata as JSON, indexed metadata values). The metadata is kept as JSON:
# cheap to reopen, and every read decodes a fresh copy for the caller. A plain tuple the
# index splits on load and write: it keeps the two strings apart from the indexed values
# (`LocalVectorIndex._records`), so the garbage collector stops tracking them.
StoredVector = tuple[str | None, str, dict[str, Scalar]]


class VectorStore:
    """The persisted index: opened (and its dimensions checked) on construction.

    Reopening a file created with other dimensions raises `BindingLimitError`.
    """

    def __init__(self, path: Path | None, dimensions: int) -> None:
        self._dimensions = dimensions
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        # Deleted vectors (and their metadata) are overwritten with zeros.
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.executescript(_SCHEMA)
        self._check_dimensions()

    def _check_dimensions(self) -> None:
        row = self._db.execute(
            "SELECT value FROM vectorize_settings WHERE key = 'dimensions'"
        ).fetchone()
        if row is None:
            self._db.execute(
                "INSERT INTO vectorize_settings (key, value) VALUES ('dimensions', ?)",
                (str(self._dimensions),),
            )
        elif int(row[0]) != self._dimensions:
            raise BindingLimitError(
                f"this index was created with {row[0]} dimensions, not {self._dimensions}; "
                "a Vectorize index's dimensions cannot change (create a new index)"
            )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def metadata_indexes(self) -> list[tuple[str, str]]:
        """(property, type) of every metadata index, in creation order."""
        return list(
            self._db.execute("SELECT property, type FROM vectorize_metadata_indexes ORDER BY rowid")
        )

    def vectors(self) -> tuple[list[tuple[str, StoredVector]], F32Array]:
        """Every vector in insertion order, and their values as one matrix (row i: vector i)."""
        rows = self._db.execute(
            "SELECT id, namespace, vals, metadata, indexed FROM vectorize_vectors ORDER BY rowid"
        ).fetchall()
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(
            len(rows), self._dimensions
        )
        records = [
            (vector_id, (namespace, metadata, json.loads(indexed)))
            for vector_id, namespace, _vals, metadata, indexed in rows
        ]
        return records, matrix

    def add_metadata_index(self, property: str, type: str) -> None:
        self._db.execute(
            "INSERT INTO vectorize_metadata_indexes (property, type) VALUES (?, ?)",
            (property, type),
        )

    def drop_metadata_index(
        self, property: str, stripped: Iterable[tuple[str, StoredVector]]
    ) -> None:
        """Drop the index and rewrite the indexed values of the vectors that lost one."""
        rows = [(compact_json(indexed), vid) for vid, (_, _, indexed) in stripped]
        with self._transaction() as db:
            db.execute("DELETE FROM vectorize_metadata_indexes WHERE property = ?", (property,))
            db.executemany("UPDATE vectorize_vectors SET indexed = ? WHERE id = ?", rows)

    def write(self, vectors: Iterable[tuple[str, StoredVector, F32Array]]) -> None:
        """Insert or replace each (id, record, float32 values) in one transaction."""
        rows = [
            (vid, namespace, values.tobytes(), metadata_json, compact_json(indexed))
            for vid, (namespace, metadata_json, indexed), values in vectors
        ]
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectorize_vectors (id, namespace, vals, metadata, "
                "indexed) VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def delete(self, ids: Iterable[str]) -> None:
        with self._transaction() as db:
            db.executemany("DELETE FROM vectorize_vectors WHERE id = ?", [(vid,) for vid in ids])

    def close(self) -> None:
        self._db.close()

    def checkpoint(self) -> None:
        """Checkpoint and truncate the WAL (no deleted vector survives in the -wal file)."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
