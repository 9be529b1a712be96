"""workerd's SQLite security setup: the limits and the authorizer, as sqlite3 hooks.

`setup_security(db)` applies `SqliteDatabase::setupSecurity()`'s limits to a connection
and installs an `Authorizer`, workerd's `SqliteDatabase::isAuthorized`: tables whose
name starts with `_cf_` are reserved; only allow-listed functions and PRAGMAs; no
ATTACH, no temp objects, no virtual tables except FTS5; transaction statements are
denied and remembered (`refused_transaction`) so the engine can report workerd's text.
Statements the engine issues itself run inside `Authorizer.trusted()`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

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
_PRAGMAS_OBJECT = frozenset({"foreign_key_list", "index_info", "index_list", "index_xinfo"})
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


def setup_security(db: sqlite3.Connection) -> Authorizer:
    """Apply workerd's limits to `db` and install (and return) its authorizer."""
    for limit, value in _LIMITS.items():
        db.setlimit(limit, value)
    authorizer = Authorizer()
    db.set_authorizer(authorizer)
    return authorizer


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
        self,
        action: int,
        arg1: str | None,
        arg2: str | None,
        db_name: str | None,
        _trigger: str | None,
    ) -> int:
        if self._trusted:
            return sqlite3.SQLITE_OK
        ok = self._is_authorized(action, arg1, arg2, db_name)
        return sqlite3.SQLITE_OK if ok else sqlite3.SQLITE_DENY

    def _is_authorized(
        self, action: int, arg1: str | None, arg2: str | None, db_name: str | None
    ) -> bool:
        if action in (sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_DETACH):
            # SQLite passes the database name first for these two; workerd swaps them back.
            db_name, arg1, arg2 = arg1, arg2, None
        if db_name == "temp":
            return action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE) and _is_allowed_name(arg1)
        if db_name is not None and db_name != "main":
            return False
        if action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE):
            return _is_allowed_name(arg1)
        if action == sqlite3.SQLITE_SELECT or action == sqlite3.SQLITE_RECURSIVE:
            return True
        if action == sqlite3.SQLITE_FUNCTION:
            return arg2 is not None and arg2.lower() in _ALLOWED_FUNCTIONS
        if action in (
            sqlite3.SQLITE_CREATE_TABLE,
            sqlite3.SQLITE_DELETE,
            sqlite3.SQLITE_DROP_TABLE,
            sqlite3.SQLITE_INSERT,
            sqlite3.SQLITE_CREATE_VIEW,
            sqlite3.SQLITE_DROP_VIEW,
            sqlite3.SQLITE_REINDEX,
            sqlite3.SQLITE_ALTER_TABLE,
        ):
            return _is_allowed_name(arg1)
        if action == sqlite3.SQLITE_ANALYZE:
            return True
        if action in (
            sqlite3.SQLITE_CREATE_INDEX,
            sqlite3.SQLITE_DROP_INDEX,
            sqlite3.SQLITE_CREATE_TRIGGER,
            sqlite3.SQLITE_DROP_TRIGGER,
        ):
            return _is_allowed_name(arg1) and _is_allowed_name(arg2)
        if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
            self.refused_transaction = True
            return False
        if action == sqlite3.SQLITE_PRAGMA:
            return self._pragma_allowed((arg1 or "").lower(), arg2)
        if action in (sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE):
            return arg2 is not None and arg2.lower() in ("fts5", "fts5vocab")
        # ATTACH/DETACH, temp objects, and anything unknown.
        return False

    @staticmethod
    def _pragma_allowed(pragma: str, argument: str | None) -> bool:
        if pragma == "table_list":
            return True
        if pragma in ("table_info", "table_xinfo"):
            return _is_allowed_name(argument)
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
