"""`ctx.storage` for local Durable Objects, and the registry that opens one per object id.

`LocalDurableObjectStorage` implements `bindings.ports.do_sql.DurableObjectStorage` on a
`SqliteEngine`: `sql.exec` binds arguments as workerd would receive them from Pyodide and
raises `SqlStorageError` (`SqlStorageLimitError` for documented limits) with workerd's
text; `transaction_sync` is atomic and nests as savepoints. `DurableObjectStorageRegistry`
gives each object id its own SQLite file and its own `asyncio.Lock`.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bindings.ports.sql import SqlValue
from local_runtime.adapters.do_sql._cursor import LocalSqlCursor
from local_runtime.adapters.do_sql._engine import SqliteEngine
from local_runtime.adapters.do_sql._errors import (
    SqlEngineError,
    SqlStorageError,
    SqlStorageLimitError,
)
from local_runtime.adapters.jsnumbers import becomes_js_number

T = TypeVar("T")


def _do_bind(value: object) -> SqlValue:
    """Convert a Python argument the way it would reach workerd's SqlStorage::exec."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        # workerd binds a JS boolean as the text 'true'/'false' (checked against Miniflare),
        # which no caller wants: refuse loudly instead of copying that.
        raise SqlStorageError(
            "Booleans are not a documented Durable Object SQL binding type (workerd stores "
            "them as the text 'true'/'false'); bind 1 or 0."
        )
    if isinstance(value, int):
        if not becomes_js_number(value):
            # Pyodide sends it as a BigInt; workerd then fails with this text.
            raise SqlStorageError(
                f"Cannot convert a BigInt value to a number (the integer {value} is outside "
                "+-2^53; store it as TEXT)."
            )
        return float(value)  # workerd binds every JS number as a double
    if isinstance(value, float):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise SqlStorageError(
        f"Unsupported SQL binding of type {type(value).__name__}: "
        "bind str, int, float, bytes or None."
    )


def _unlink(path: str, *suffixes: str) -> None:
    """Remove a database file with its -wal and -shm (nothing to do in memory)."""
    if path != ":memory:":
        for suffix in suffixes or ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)


class LocalSqlStorage:
    """`ctx.storage.sql`: synchronous `exec(sql, *params)`."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    def exec(self, sql: str, *params: SqlValue) -> LocalSqlCursor:
        """Run one or more statements; return a cursor over the last one's rows."""
        bound = [_do_bind(p) for p in params]
        try:
            return LocalSqlCursor(self._engine.run(sql, bound))
        except SqlEngineError as exc:
            kind = SqlStorageLimitError if exc.limit else SqlStorageError
            raise kind(exc.message) from None

    @property
    def database_size(self) -> int:
        """Bytes used by the database (pages in use times page size), like workerd's."""
        return self._engine.database_size()


class LocalDurableObjectStorage:
    """`ctx.storage` for one Durable Object: its SQL API and `transaction_sync`."""

    def __init__(self, path: str | Path) -> None:
        # secure_delete OFF, as in workerd: its SQLite build (build/BUILD.sqlite3,
        # SQLITE_DEFINES) does not define SQLITE_SECURE_DELETE, so SQLite's default (off)
        # applies, and the pragma is not allow-listed, so code cannot turn it on. Deleted
        # rows therefore leave their bytes in free space here as there (Python's SQLite is
        # often built with it on, which would hide that).
        self._path = str(path)
        self._engine = SqliteEngine(path, secure_delete=False)
        self._sql = LocalSqlStorage(self._engine)

    async def replace_all(self, fill: Callable[[], T]) -> T:
        """Like workerd's deleteAll on a SQLite-backed object followed by `fill`: `fill` writes
        a new file, which then replaces the old one (with its -wal and -shm) by a rename, so a
        crash or a failing `fill` leaves the old database whole, never half of the new one."""
        self._engine.close()
        fresh = self._path if self._path == ":memory:" else self._path + ".new"
        _unlink(fresh)
        self._open(fresh)
        try:
            result = fill()
        except BaseException:
            self._engine.close()
            _unlink(fresh)
            self._open(self._path)
            raise
        if fresh != self._path:
            self._engine.close()  # both files' WALs are checkpointed into them and removed
            _unlink(self._path, "-wal", "-shm")
            os.replace(fresh, self._path)
            self._open(self._path)
        return result

    def _open(self, path: str) -> None:
        self._engine = self._sql._engine = SqliteEngine(path, secure_delete=False)

    @property
    def sql(self) -> LocalSqlStorage:
        return self._sql

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically: if it raises, every write it made is rolled back.

        Nested calls become savepoints: an inner failure rolls back only the inner work.
        `fn` must be synchronous; returning an awaitable is refused (and rolled back),
        since on Cloudflare the transaction would commit before the awaitable ran.
        """
        with self._engine.transaction():
            result = fn()
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()
                raise TypeError("transaction_sync() needs a synchronous function")
            return result

    def close(self) -> None:
        self._engine.close()

    def checkpoint(self) -> None:
        self._engine.checkpoint()


class DurableObjectStorageRegistry:
    """One storage (one SQLite file) and one lock per Durable Object id.

    Files live in `state_dir`, named by the SHA-256 of the id so any id is a safe file
    name; `state_dir=None` keeps every object in memory (tests).
    """

    def __init__(self, state_dir: str | Path | None) -> None:
        self._dir = None if state_dir is None else Path(state_dir)
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
        self._storages: dict[str, LocalDurableObjectStorage] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._guard = threading.Lock()

    def path(self, object_id: str) -> Path | None:
        """Where the object's SQLite file is (None in memory mode)."""
        if self._dir is None:
            return None
        digest = hashlib.sha256(object_id.encode("utf-8")).hexdigest()
        return self._dir / f"{digest}.sqlite"

    def storage(self, object_id: str) -> LocalDurableObjectStorage:
        """The object's storage, opened on first use and kept open."""
        with self._guard:
            found = self._storages.get(object_id)
            if found is None:
                location = self.path(object_id)
                found = LocalDurableObjectStorage(":memory:" if location is None else location)
                self._storages[object_id] = found
            return found

    def lock(self, object_id: str) -> asyncio.Lock:
        """The lock that serialises calls delivered to this object."""
        with self._guard:
            found = self._locks.get(object_id)
            if found is None:
                found = self._locks[object_id] = asyncio.Lock()
            return found

    def checkpoint(self) -> None:
        """Checkpoint every open object's WAL (see `SqliteEngine.checkpoint`)."""
        with self._guard:
            storages = list(self._storages.values())
        for storage in storages:
            storage.checkpoint()

    def close(self) -> None:
        with self._guard:
            for storage in self._storages.values():
                storage.close()
            self._storages.clear()
