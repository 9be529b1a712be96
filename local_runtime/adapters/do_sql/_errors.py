"""The errors of the local SQL engine and Durable Object storage, with workerd's texts.

`SqlEngineError` is what `SqliteEngine` raises (the local D1 and DO storage each turn it
into their own binding error); `engine_error` maps a sqlite3 exception to workerd's
`dbErrorMessage` text, `<sqlite message>: <SQLITE_CODE>` (Python's sqlite3 does not
expose the " at offset N" part, so it is omitted), flagging documented limits.
"""

from __future__ import annotations

import sqlite3

from bindings.ports.errors import BindingError, BindingLimitError

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

# SQLite's primary result codes (sqlite3.h), for workerd-style error texts.
_PRIMARY_CODE_NAMES = {
    1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT",
    5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY",
    9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND",
    13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL", 16: "SQLITE_EMPTY",
    17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH",
    21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 24: "SQLITE_FORMAT",
    25: "SQLITE_RANGE", 26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE", 28: "SQLITE_WARNING",
}  # fmt: skip
# Extended constraint codes Python's sqlite3 may not name (it says "unknown" for DATATYPE).
_EXTENDED_CODE_NAMES = {
    275: "SQLITE_CONSTRAINT_CHECK", 531: "SQLITE_CONSTRAINT_COMMITHOOK",
    787: "SQLITE_CONSTRAINT_FOREIGNKEY", 1043: "SQLITE_CONSTRAINT_FUNCTION",
    1299: "SQLITE_CONSTRAINT_NOTNULL", 1555: "SQLITE_CONSTRAINT_PRIMARYKEY",
    1811: "SQLITE_CONSTRAINT_TRIGGER", 2067: "SQLITE_CONSTRAINT_UNIQUE",
    2323: "SQLITE_CONSTRAINT_VTAB", 2579: "SQLITE_CONSTRAINT_ROWID",
    2835: "SQLITE_CONSTRAINT_PINNED", 3091: "SQLITE_CONSTRAINT_DATATYPE",
}  # fmt: skip


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
    name = getattr(exc, "sqlite_errorname", None)
    limit = name == "SQLITE_TOOBIG" or message.startswith(_LIMIT_MESSAGES)
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _PRIMARY_CODE_NAMES:
        # workerd's text names the primary result code and, when SQLite reports a more
        # specific one, adds it: "...: SQLITE_CONSTRAINT (extended:
        # SQLITE_CONSTRAINT_UNIQUE)" (checked against workerd through miniflare).
        primary = _PRIMARY_CODE_NAMES[code & 0xFF]
        if code != code & 0xFF:
            extended = _EXTENDED_CODE_NAMES.get(code, name)
            primary = f"{primary} (extended: {extended})"
        return SqlEngineError(f"{message}: {primary}", limit=limit)
    return SqlEngineError(f"{message}: {name}" if name else message, limit=limit)
