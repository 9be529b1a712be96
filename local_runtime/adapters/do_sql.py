"""Durable Object SQL storage on sqlite3, and the SQLite engine the local D1 shares.

`LocalDurableObjectStorage` implements `bindings.ports.do_sql.DurableObjectStorage`; the
registry gives each object id its own SQLite file and `asyncio.Lock`. `SqliteEngine` is SQLite
as workerd's `SqliteDatabase` configures it (workerd `util/sqlite.c++`, `api/sql.c++`): its
limits (`setupSecurity`), its authorizer (`isAuthorized`: `_cf_` names reserved, allow-listed
functions and PRAGMAs, no ATTACH or temp objects, FTS5 the only virtual tables, transaction
statements refused with workerd's text), several `;`-separated statements per call (only the
last takes parameters and returns rows) and its error texts (`<message>: <SQLITE_CODE>`).

Values are what Python sees on Workers: numbers bind as JS doubles and read back through
`jsnumbers`; booleans and ints beyond +-2^53 are refused; BLOBs come back as `bytes`.
Deviations (docs/miniflare.md): no " at offset N" in errors, `rows_written` counts changed
rows only, rows are read when `exec` returns, SQLite's "defensive" flag is not set.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from bindings.ports.errors import BindingError, BindingLimitError
from bindings.ports.sql import Row, SqlValue
from local_runtime.adapters.jsnumbers import becomes_js_number, from_int64, js_number

T = TypeVar("T")

# What workerd answers to VACUUM (checked on Miniflare): its statements always run inside
# the object's implicit transaction.
VACUUM_REFUSED = "cannot VACUUM from within a transaction: SQLITE_ERROR"
TRANSACTION_REFUSED = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)
MULTI_STATEMENT_PARAMS = (
    "When executing multiple SQL statements in a single call, only the last statement can "
    "have parameters."
)
WRONG_PARAMETER_COUNT = "Wrong number of parameter bindings for SQL query."
NO_STATEMENT = "SQL code did not contain a statement."

# SQLite messages that mean "a documented limit was exceeded".
_LIMIT_MESSAGES = (
    "too many SQL variables",
    "too many columns",
    "too many terms in compound SELECT",
    "LIKE or GLOB pattern too complex",
    "Expression tree is too large",
    "too many arguments on function",
    "statement too long",
    "string or blob too big",
)

# Python's sqlite3 names every result code but this one ("unknown").
_UNNAMED_CODES = {3091: "SQLITE_CONSTRAINT_DATATYPE"}


class SqlEngineError(Exception):
    """A statement failed; `message` is the text workerd would report."""

    def __init__(self, message: str, *, limit: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit


class SqlStorageError(BindingError):
    """Durable Object SQL rejected or failed a statement (workerd throws a JS Error)."""


class SqlStorageLimitError(SqlStorageError, BindingLimitError):
    """A documented Durable Object SQL limit was exceeded (parameters, SQL length...)."""


def engine_error(exc: sqlite3.Error) -> SqlEngineError:
    """`exc` as workerd would report it."""
    message = str(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "number of bindings" in message:
        return SqlEngineError(WRONG_PARAMETER_COUNT)
    code = getattr(exc, "sqlite_errorcode", None)
    name = _UNNAMED_CODES.get(code, getattr(exc, "sqlite_errorname", None))  # type: ignore[arg-type]
    limit = name == "SQLITE_TOOBIG" or message.startswith(_LIMIT_MESSAGES)
    if not name or not name.startswith("SQLITE_"):
        return SqlEngineError(message, limit=limit)
    # workerd's text names the primary result code and, when SQLite reports a more specific
    # one, adds it: "...: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_UNIQUE)" (checked
    # against workerd through miniflare). Every extended name starts with its primary's.
    primary = "_".join(name.split("_", 2)[:2])
    if primary != name:
        primary = f"{primary} (extended: {name})"
    return SqlEngineError(f"{message}: {primary}", limit=limit)


RESERVED_PREFIX = "_cf_"

MAX_SQL_BYTES = 100_000

# workerd's SqliteDatabase::setupSecurity(), limit by limit.
_LIMITS: dict[int, int] = {
    sqlite3.SQLITE_LIMIT_LENGTH: 2_200_000,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: MAX_SQL_BYTES,
    sqlite3.SQLITE_LIMIT_COLUMN: 100,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 5,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 25_000,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 127,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 50,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 100,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 10,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}

# workerd's ALLOWED_SQLITE_FUNCTIONS, grouped as in its source.
# fmt: off
_ALLOWED_FUNCTIONS = frozenset((
    # core
    "abs", "changes", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex",
    "ifnull", "iif", "instr", "last_insert_rowid", "length", "like", "likelihood", "likely",
    "load_extension", "lower", "ltrim", "max_scalar", "min_scalar", "nullif", "octet_length",
    "printf", "quote", "random", "randomblob", "replace", "round", "rtrim", "sign", "soundex",
    "substr", "substring", "total_changes", "trim", "typeof", "unhex", "unicode", "unlikely",
    "upper", "zeroblob",
    # date and time
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
    "current_date", "current_time", "current_timestamp",
    # aggregates
    "avg", "count", "group_concat", "max", "min", "string_agg", "sum", "total",
    # window functions
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    # math
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "cos", "cosh",
    "degrees", "exp", "floor", "ln", "log", "log2", "mod", "pi", "pow", "radians", "sin",
    "sinh", "sqrt", "tan", "tanh", "trunc",
    # JSON
    "json", "json_array", "json_array_length", "json_extract", "->", "->>", "json_insert",
    "json_object", "json_patch", "json_remove", "json_replace", "json_set", "json_type",
    "json_valid", "json_quote", "json_group_array", "json_group_object", "json_each",
    "json_tree",
    # FTS5
    "match", "highlight", "bm25", "snippet",
    # ALTER TABLE internals
    "sqlite_rename_column", "sqlite_rename_table", "sqlite_rename_test", "sqlite_drop_column",
    "sqlite_rename_quotefix",
))
# fmt: on

# workerd's ALLOWED_PRAGMAS, by argument signature.
_PRAGMAS_NO_ARG = frozenset({"data_version"})
_PRAGMAS_BOOLEAN = frozenset(
    {
        "case_sensitive_like",
        "foreign_keys",
        "defer_foreign_keys",
        "ignore_check_constraints",
        "legacy_alter_table",
        "recursive_triggers",
        "reverse_unordered_selects",
    }
)
_PRAGMAS_OBJECT = frozenset(
    {"table_info", "table_xinfo", "foreign_key_list", "index_info", "index_list", "index_xinfo"}
)
_PRAGMAS_OPTIONAL_OBJECT = frozenset({"foreign_key_check"})
_BOOLEAN_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")


def _is_allowed_name(name: str | None) -> bool:
    return name is not None and not name.startswith(RESERVED_PREFIX)


def _boolean_argument(value: str | None) -> bool:
    if value is None:
        return True  # reading the current value
    text = value
    if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
        text = text[1:-1]
    return text.lower().startswith(_BOOLEAN_WORDS)


# Authorizer actions by what workerd checks of them (its `isAuthorized`).
_ALWAYS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE, sqlite3.SQLITE_ANALYZE})
_FIRST_NAMED = frozenset(
    {
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_ALTER_TABLE,
    }
)
_BOTH_NAMED = frozenset(
    {
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_DROP_TRIGGER,
    }
)


class Authorizer:
    """The sqlite3 authorizer callback: workerd's rules, bypassed while `trusted()`."""

    def __init__(self) -> None:
        self._trusted = False
        # Set when a transaction statement was denied; the engine reads and resets it to
        # replace SQLite's "not authorized" with workerd's TRANSACTION_REFUSED text.
        self.refused_transaction = False

    @contextmanager
    def trusted(self) -> Iterator[None]:
        """Let the engine's own statements (transaction control, bookkeeping) through."""
        self._trusted = True
        try:
            yield
        finally:
            self._trusted = False

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, _: str | None
    ) -> int:
        ok = self._trusted or self._is_authorized(action, arg1, arg2, db)
        return sqlite3.SQLITE_OK if ok else sqlite3.SQLITE_DENY

    def _is_authorized(
        self, action: int, arg1: str | None, arg2: str | None, db_name: str | None
    ) -> bool:
        if action in (sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_DETACH):
            # SQLite passes the database name first for these two; workerd swaps them back.
            db_name, arg1, arg2 = arg1, arg2, None
        if db_name == "temp":
            return action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE) and _is_allowed_name(arg1)
        if db_name not in (None, "main"):
            return False
        if action in _ALWAYS:
            return True
        if action in _FIRST_NAMED:
            return _is_allowed_name(arg1)
        if action in _BOTH_NAMED:
            return _is_allowed_name(arg1) and _is_allowed_name(arg2)
        if action == sqlite3.SQLITE_FUNCTION:
            return arg2 is not None and arg2.lower() in _ALLOWED_FUNCTIONS
        if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
            self.refused_transaction = True
            return False
        if action == sqlite3.SQLITE_PRAGMA:
            return _pragma_allowed((arg1 or "").lower(), arg2)
        if action in (sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE):
            return arg2 is not None and arg2.lower() in ("fts5", "fts5vocab")
        # ATTACH/DETACH, temp objects, and anything unknown.
        return False


def _pragma_allowed(pragma: str, argument: str | None) -> bool:
    if pragma == "table_list":
        return True
    if pragma in _PRAGMAS_NO_ARG:
        return argument is None
    if pragma in _PRAGMAS_BOOLEAN:
        return _boolean_argument(argument)
    if pragma in _PRAGMAS_OBJECT:
        return _is_allowed_name(argument)
    if pragma in _PRAGMAS_OPTIONAL_OBJECT:
        return argument is None or _is_allowed_name(argument)
    if pragma == "quick_check":
        return argument is None or argument.isdigit() or _is_allowed_name(argument)
    if pragma == "optimize":
        return argument is None or re.fullmatch(r"-?\d+", argument.strip()) is not None
    return False


_TRANSACTION_KEYWORDS = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})
# Whitespace and comments (an unterminated `/*` runs to the end, never past a `*/`).
_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*(?:[^*]|\*(?!/))*(?:\*/|$))*")
_FIRST_WORD = re.compile(r"[A-Za-z_]+")
_VACUUM = re.compile(r"\s*VACUUM\b", re.IGNORECASE)


def split_sql_statements(sql: str) -> tuple[str, ...]:
    """SQL text split into complete statements, the way SQLite consumes it: semicolons in
    quotes, identifiers, comments and trigger bodies do not split (`sqlite3.
    complete_statement`); empty and comment-only statements are dropped, text after the last
    `;` is a statement when it holds code."""
    return _scan(sql)[0]


@lru_cache(maxsize=4096)
def _scan(sql: str) -> tuple[tuple[str, ...], bool]:
    """`split_sql_statements`, and whether the text holds an empty statement: workerd
    prepares what follows each statement as the next one and fails with "SQL code did not
    contain a statement." when that is only `;` or a comment (`SELECT 1;;`, `SELECT 1; --`)."""
    statements: list[str] = []
    start, empty = 0, False
    end = sql.find(";")
    while end != -1:
        if sqlite3.complete_statement(sql[start : end + 1]):
            if _NOISE.fullmatch(sql, start, end):
                empty = True
            else:
                statements.append(sql[start : end + 1].strip())
            start = end + 1
        end = sql.find(";", end + 1)
    if not _NOISE.fullmatch(sql, start):
        statements.append(sql[start:].strip())
    elif statements and sql[start:].strip():
        empty = True  # a comment after the last statement
    return tuple(statements), empty


def _controls_transaction(statement: str) -> bool:
    noise = _NOISE.match(statement)
    word = _FIRST_WORD.match(statement, noise.end() if noise else 0)
    return word is not None and word.group(0).upper() in _TRANSACTION_KEYWORDS


@dataclass(frozen=True)
class QueryResult:
    """What one `SqliteEngine.run` produced: the last statement's columns and raw rows."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    changes: int


class SqliteEngine:
    """One SQLite connection configured like workerd's `SqliteDatabase`.

    Not thread-safe; meant for one asyncio loop (every call is synchronous and short).
    """

    def __init__(self, path: str | Path, *, secure_delete: bool) -> None:
        """`secure_delete`: SQLite's `secure_delete` (Python's SQLite is often built with it
        on, workerd's is not)."""
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
        self._db.execute(f"PRAGMA secure_delete = {'ON' if secure_delete else 'OFF'}")
        for limit, value in _LIMITS.items():
            self._db.setlimit(limit, value)
        self._authorizer = Authorizer()
        self._db.set_authorizer(self._authorizer)
        self._depth = 0

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
        if (len(sql) if sql.isascii() else len(sql.encode("utf-8"))) > MAX_SQL_BYTES:
            # SQLite checks SQLITE_LIMIT_SQL_LENGTH against the whole text it is handed.
            raise SqlEngineError("statement too long: SQLITE_TOOBIG", limit=True)
        statements, empty = _scan(sql)
        if not statements or empty:
            raise SqlEngineError(NO_STATEMENT)
        if any(_controls_transaction(statement) for statement in statements):
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
        return QueryResult(columns=columns, rows=rows, changes=db.total_changes - before)

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


def _do_value(value: Any) -> Any:
    """A stored value as Python on Workers sees it (SQLite int64 -> JS number -> Pyodide)."""
    kind = type(value)
    if kind is int:
        return from_int64(value)
    if kind is float:
        return js_number(value)
    return value


class BufferedSqlCursor:
    """A cursor over a statement's complete result, consumed once like workerd's: iteration,
    `to_array` and `one` take the rows not yet taken."""

    def __init__(self, columns: list[str], rows: list[Any], rows_written: int) -> None:
        # Like workerd's object rows: a repeated column name keeps the last value.
        self._rows = (dict(zip(columns, row, strict=True)) for row in rows)
        self.rows_written = rows_written

    def __iter__(self) -> Iterator[Row]:
        return self._rows

    def to_array(self) -> list[Row]:
        return list(self._rows)

    def one(self) -> Row:
        row = next(self._rows, None)
        if row is None:
            raise SqlStorageError("Expected exactly one result from SQL query, but got no results.")
        if self.to_array():
            raise SqlStorageError(
                "Expected exactly one result from SQL query, but got multiple results."
            )
        return row


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

    def exec(self, sql: str, *params: SqlValue) -> BufferedSqlCursor:
        """Run one or more statements; return a cursor over the last one's rows, with
        numbers as Pyodide delivers workerd's."""
        try:
            result = self._engine.run(sql, [_do_bind(p) for p in params])
        except SqlEngineError as exc:
            kind = SqlStorageLimitError if exc.limit else SqlStorageError
            raise kind(exc.message) from None
        rows = [[_do_value(v) for v in row] for row in result.rows]
        return BufferedSqlCursor(result.columns, rows, result.changes)

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
        self.sql = LocalSqlStorage(SqliteEngine(path, secure_delete=False))

    async def replace_all(self, fill: Callable[[], T]) -> T:
        """Like workerd's deleteAll on a SQLite-backed object followed by `fill`: `fill` writes
        a new file, which then replaces the old one (with its -wal and -shm) by a rename, so a
        crash or a failing `fill` leaves the old database whole, never half of the new one."""
        self.sql._engine.close()
        fresh = self._path if self._path == ":memory:" else self._path + ".new"
        _unlink(fresh)
        self._open(fresh)
        try:
            result = fill()
        except BaseException:
            self.sql._engine.close()
            _unlink(fresh)
            self._open(self._path)
            raise
        if fresh != self._path:
            self.sql._engine.close()  # both files' WALs are checkpointed into them and removed
            _unlink(self._path, "-wal", "-shm")
            os.replace(fresh, self._path)
            self._open(self._path)
        return result

    def _open(self, path: str) -> None:
        self.sql._engine = SqliteEngine(path, secure_delete=False)

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically: if it raises, every write it made is rolled back.

        Nested calls become savepoints: an inner failure rolls back only the inner work.
        `fn` must be synchronous; returning an awaitable is refused (and rolled back),
        since on Cloudflare the transaction would commit before the awaitable ran.
        """
        with self.sql._engine.transaction():
            result = fn()
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()
                raise TypeError("transaction_sync() needs a synchronous function")
            return result

    def close(self) -> None:
        self.sql._engine.close()

    def checkpoint(self) -> None:
        self.sql._engine.checkpoint()


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
            if object_id not in self._storages:
                location = self.path(object_id) or ":memory:"
                self._storages[object_id] = LocalDurableObjectStorage(location)
            return self._storages[object_id]

    def lock(self, object_id: str) -> asyncio.Lock:
        """The lock that serialises calls delivered to this object."""
        with self._guard:
            return self._locks.setdefault(object_id, asyncio.Lock())

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
