"""`SqliteEngine`: one SQLite connection configured like workerd's `SqliteDatabase`.

`run(sql, params)` executes one or more `;`-separated statements (only the last may take
parameters; only its rows are returned) under workerd's limits and authorizer
(`_security`), raising `SqlEngineError` with workerd's text (`_errors`). `transaction()`
is the only way to group statements atomically; it nests as savepoints. The local D1
and the Durable Object storage both run on it.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_runtime.adapters.do_sql._errors import (
    MULTI_STATEMENT_PARAMS,
    NO_STATEMENT,
    TRANSACTION_REFUSED,
    VACUUM_REFUSED,
    SqlEngineError,
    engine_error,
)
from local_runtime.adapters.do_sql._scanner import parse
from local_runtime.adapters.do_sql._security import setup_security

_VACUUM = re.compile(r"\s*VACUUM\b", re.IGNORECASE)


@dataclass(frozen=True)
class QueryResult:
    """What one `SqliteEngine.run` produced: the last statement's columns and raw rows."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    changes: int
    last_row_id: int
    duration_ms: float


class SqliteEngine:
    """One SQLite connection configured like workerd's `SqliteDatabase`.

    Not thread-safe; meant for one asyncio loop (every call is synchronous and short).
    """

    def __init__(self, path: str | Path, *, secure_delete: bool | None = None) -> None:
        """`secure_delete`: set SQLite's `secure_delete` (None keeps the build's default;
        Python's SQLite is often built with it on, workerd's is not)."""
        location = str(path)
        if location != ":memory:":
            Path(location).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit BEGIN; transactions are ours (see transaction()).
        self._db = sqlite3.connect(
            location, isolation_level=None, check_same_thread=False, cached_statements=512
        )
        # executescript bypasses the statement cache, so none of these trusted statements
        # can later be reused by a caller's identical text without passing the authorizer.
        self._db.executescript(
            "PRAGMA journal_mode = WAL;"
            "PRAGMA synchronous = NORMAL;"
            "PRAGMA busy_timeout = 2000;"
            "PRAGMA foreign_keys = ON;"
            # Reads through a memory map instead of a read() per page: a recall over 100K
            # facts reads a few hundred random rows (~25% faster). Address space only.
            "PRAGMA mmap_size = 1073741824;"
        )
        if secure_delete is not None:
            self._db.execute(f"PRAGMA secure_delete = {'ON' if secure_delete else 'OFF'}")
        self._authorizer = setup_security(self._db)
        self._depth = 0
        self._last_row_id = 0

    @property
    def connection(self) -> sqlite3.Connection:
        return self._db

    def close(self) -> None:
        self._db.close()

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and truncate it (`wal_checkpoint(TRUNCATE)`),
        so no page image from before an erase stays in the -wal file."""
        with self._authorizer.trusted():
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    # --- execution -------------------------------------------------------------------------

    def _control(self, sql: str) -> None:
        """Run one of our own transaction-control statements, past the authorizer."""
        with self._authorizer.trusted():
            self._db.execute(sql)

    def _error(self, exc: sqlite3.Error) -> SqlEngineError:
        if self._authorizer.refused_transaction:
            self._authorizer.refused_transaction = False
            return SqlEngineError(TRANSACTION_REFUSED)
        return engine_error(exc)

    def run(self, sql: str, params: Sequence[Any] = ()) -> QueryResult:
        """Execute every statement in `sql`; return the last one's result.

        Raises `SqlEngineError` with workerd's text on any failure. Statements before the
        last are executed immediately and must not take parameters.
        """
        started = time.perf_counter()
        parsed = parse(sql)
        if parsed.too_long:
            # SQLite checks SQLITE_LIMIT_SQL_LENGTH against the whole text it is handed.
            raise SqlEngineError("statement too long: SQLITE_TOOBIG", limit=True)
        statements = parsed.statements
        if not statements or parsed.has_empty_statement:
            raise SqlEngineError(NO_STATEMENT)
        if parsed.controls_transaction:
            raise SqlEngineError(TRANSACTION_REFUSED)
        if any(_VACUUM.match(statement) for statement in statements):
            # workerd runs every statement inside its implicit transaction.
            raise SqlEngineError(VACUUM_REFUSED)
        db = self._db
        before = db.total_changes
        self._authorizer.refused_transaction = False
        try:
            for statement in statements[:-1]:
                try:
                    db.execute(statement)
                except sqlite3.ProgrammingError as exc:
                    if "number of bindings" in str(exc):
                        raise SqlEngineError(MULTI_STATEMENT_PARAMS) from None
                    raise
            cursor = db.execute(statements[-1], params)
            rows = cursor.fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        description = cursor.description
        columns = [d[0] for d in description] if description else []
        changes = db.total_changes - before
        if changes:
            with self._authorizer.trusted():
                self._last_row_id = db.execute("SELECT last_insert_rowid()").fetchone()[0]
        return QueryResult(
            columns=columns,
            rows=rows,
            changes=changes,
            last_row_id=self._last_row_id,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )

    def database_size(self) -> int:
        """Pages in use times page size (workerd's SqlStorage::getDatabaseSize query)."""
        with self._authorizer.trusted():
            # The comment keeps this trusted text distinct in the statement cache, so a
            # caller's own query can never reuse it past the authorizer.
            in_use, page_size = self._db.execute(
                "SELECT (SELECT * FROM pragma_page_count) - (SELECT * FROM pragma_freelist_count),"
                " (SELECT * FROM pragma_page_size) /* local_runtime: database_size */"
            ).fetchone()
        return int(in_use) * int(page_size)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Atomic block: rolled back if the body raises. Nests (as savepoints)."""
        depth = self._depth
        savepoint = f"_lr_savepoint_{depth}"
        self._control("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {savepoint}")
        self._depth = depth + 1
        try:
            yield
        except BaseException:
            self._depth = depth
            if depth == 0:
                if self._db.in_transaction:
                    self._control("ROLLBACK")
            else:
                self._control(f"ROLLBACK TO {savepoint}")
                self._control(f"RELEASE {savepoint}")
            raise
        self._depth = depth
        if depth > 0:
            self._control(f"RELEASE {savepoint}")
            return
        try:
            self._control("COMMIT")
        except sqlite3.Error as exc:
            # e.g. a deferred foreign key still violated at commit time.
            if self._db.in_transaction:
                self._control("ROLLBACK")
            raise self._error(exc) from None
