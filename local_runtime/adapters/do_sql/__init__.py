"""Durable Object SQL storage on sqlite3, and the SQLite engine the local D1 shares.

`LocalDurableObjectStorage` implements `bindings.ports.do_sql.DurableObjectStorage`;
`DurableObjectStorageRegistry` gives each object id its own SQLite file and its own
`asyncio.Lock` (the local runtime serialises calls to one object with it).

Cloudflare runs the same engine, SQLite, behind workerd's `SqliteDatabase` (source read:
cloudflare/workerd `src/workerd/util/sqlite.c++` and `src/workerd/api/sql.c++`). The
`SqliteEngine` (`_engine`) reproduces what that layer adds on top of SQLite:

* the same limits (`setupSecurity`): 100 bound parameters, 100 000-byte SQL, 100 columns,
  2 200 000-byte strings/BLOBs, LIKE patterns of 50 bytes, 5 compound-SELECT terms, ...;
  SQLite itself then raises its own messages ("too many SQL variables", ...);
* the same authorizer (`isAuthorized`): tables whose name starts with `_cf_` are
  reserved; only allow-listed functions and PRAGMAs; no ATTACH, no temp objects, no
  virtual tables except FTS5; BEGIN/COMMIT/ROLLBACK/SAVEPOINT/RELEASE are refused with
  workerd's own text (`SqlStorage::allowTransactions`);
* several `;`-separated statements per call, where only the last may take parameters and
  only the last one's rows are returned (`prepareSql`, MULTI mode);
* error text `<sqlite message>: <SQLITE_CODE>` (`dbErrorMessage`; Python's sqlite3 does not
  expose the " at offset N" part, so it is omitted).

Values follow what Python sees on Workers: numbers bind as JS doubles (workerd binds every
JS number with `sqlite3_bind_double`, so 3 written to a TEXT column is stored as "3.0"), and
read back through `jsnumbers` (int64 -> double -> Pyodide). Booleans are not a documented
binding type and workerd stores them as the text 'true'/'false', so they are refused here
(bind 1/0); ints beyond +-2^53 would be BigInts in JS, which workerd cannot bind either.
BLOBs come back as `bytes` (through the Workers SDK they arrive as a `memoryview`).
A `;` with nothing before it, or a comment after the last statement, is an error, as in
workerd ("SQL code did not contain a statement.").

Foreign keys are enforced by default, as in D1 (cloudflare-docs `d1/sql-api/foreign-keys`)
and as `PRAGMA foreign_keys` reports in workerd (checked against Miniflare).

Deviations: `rows_read` counts rows returned rather than rows scanned and `rows_written`
counts changed rows (workerd uses patched per-statement counters that also count index
work); a cursor's rows are read eagerly when `exec` returns; SQLite's "defensive" flag is
not set (Python 3.11 cannot); each file is opened in WAL mode with synchronous=NORMAL.

Layout: `_storage` (`ctx.storage` and the registry) and `_cursor` over `_engine`
(`SqliteEngine`), which runs on `_scanner` (statement splitting and text checks),
`_security` (limits and authorizer) and `_errors` (workerd's error texts).
"""

from local_runtime.adapters.do_sql._cursor import BufferedSqlCursor, LocalSqlCursor
from local_runtime.adapters.do_sql._engine import QueryResult, SqliteEngine
from local_runtime.adapters.do_sql._errors import (
    MULTI_STATEMENT_PARAMS,
    NO_STATEMENT,
    TRANSACTION_REFUSED,
    WRONG_PARAMETER_COUNT,
    SqlEngineError,
    SqlStorageError,
    SqlStorageLimitError,
)
from local_runtime.adapters.do_sql._scanner import split_sql_statements
from local_runtime.adapters.do_sql._security import MAX_SQL_BYTES, RESERVED_PREFIX
from local_runtime.adapters.do_sql._storage import (
    DurableObjectStorageRegistry,
    LocalDurableObjectStorage,
    LocalSqlStorage,
)

__all__ = [
    "MAX_SQL_BYTES",
    "MULTI_STATEMENT_PARAMS",
    "NO_STATEMENT",
    "RESERVED_PREFIX",
    "TRANSACTION_REFUSED",
    "WRONG_PARAMETER_COUNT",
    "BufferedSqlCursor",
    "DurableObjectStorageRegistry",
    "LocalDurableObjectStorage",
    "LocalSqlCursor",
    "LocalSqlStorage",
    "QueryResult",
    "SqlEngineError",
    "SqlStorageError",
    "SqlStorageLimitError",
    "SqliteEngine",
    "split_sql_statements",
]
