"""D1 on sqlite3: `SqliteD1` implements `bindings.ports.d1.D1Database` like miniflare's D1
(the shared `do_sql.SqliteEngine` under workerd's d1-api.ts client layer): `bind` takes str,
int, float, bool (1/0), None, bytes-likes and lists of byte values, else (or an int beyond
+-2^53) `D1_TYPE_ERROR`; ints and whole floats bind as INTEGER, NaN and infinities as NULL.
Every query and every `batch` is one transaction (a failure writes nothing). Results look like
D1's JSON: JS numbers, BLOBs as lists of byte values, a repeated column name keeping the last.
Errors are `D1Error("D1_ERROR: <sqlite message>: <SQLITE_CODE>")`, limit errors also
`BindingLimitError`s; `first()` runs the whole statement, as D1 does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from bindings.ports.d1 import D1Error, D1Meta, D1Result, D1Statement
from bindings.ports.errors import BindingLimitError
from bindings.ports.sql import Row, SqlValue
from local_runtime.adapters.do_sql import (
    QueryResult,
    SqlEngineError,
    SqliteEngine,
)
from local_runtime.adapters.jsnumbers import (
    PYODIDE_INT_LIMIT,
    becomes_js_number,
    from_int64,
    js_number,
)

NO_STATEMENTS_DETECTED = "No SQL statements detected."


class D1LimitError(D1Error, BindingLimitError):
    """D1 rejected a statement for breaking a documented limit."""


def _js_typeof(value: object) -> str:
    if isinstance(value, int):
        return "bigint"
    if callable(value):
        return "function"
    return "object"


def _js_string(value: object) -> str:
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, list | tuple):
        return ",".join("" if v is None else str(v) for v in value)
    return str(value)


def _is_byte_list(value: object) -> bool:
    return isinstance(value, list) and all(
        type(b) is int and 0 <= b < 256  # bool is not a byte value in JS
        for b in value
    )


def _bind_value(value: object) -> SqlValue:
    """Convert one bound value as d1-api.ts `bind()` (and its JSON body) would."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, int):
        if becomes_js_number(value):
            return value
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None  # JSON.stringify turns NaN and +-Infinity into null
        return js_number(value)
    elif isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    elif _is_byte_list(value):
        return bytes(cast(list[int], value))
    message = f"Type '{_js_typeof(value)}' not supported for value '{_js_string(value)}'"
    raise D1Error(f"D1_TYPE_ERROR: {message}")


def _result_value(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return from_int64(value)  # int64 -> JSON number (a double) -> Pyodide
    if kind is float:
        return js_number(value) if math.isfinite(value) else None
    return list(value) if kind is bytes else value


def _to_d1_result(result: QueryResult) -> D1Result:
    columns = result.columns
    convert = _result_value
    limit = PYODIDE_INT_LIMIT
    # Text, NULL and small integers (most values) are passed through inline: a function
    # call per value was a tenth of a 100K-fact recall.
    rows: list[Row] = [
        dict(
            zip(
                columns,
                [
                    v
                    if (t := type(v)) is str or v is None or (t is int and -limit <= v <= limit)
                    else convert(v)
                    for v in row
                ],
                strict=True,
            )
        )
        for row in result.rows
    ]
    return D1Result(meta=D1Meta(changes=result.changes), results=rows)


class SqliteD1Statement:
    """A prepared statement; `bind` returns a new statement, execution is async."""

    def __init__(self, db: SqliteD1, sql: str, params: tuple[SqlValue, ...] = ()) -> None:
        self._db = db
        self.sql = sql
        self.params = params

    def bind(self, *params: SqlValue | bool) -> SqliteD1Statement:
        """Return a statement with these positional parameters; raises D1_TYPE_ERROR."""
        return SqliteD1Statement(self._db, self.sql, tuple(_bind_value(p) for p in params))

    async def all(self) -> D1Result:
        [result] = self._db._execute([self])
        return result

    async def run(self) -> D1Result:
        """Like `all()` (D1 documents `run` as its alias); used for writes."""
        [result] = self._db._execute([self], sized=True)
        return result

    async def first(self) -> Row | None:
        [result] = self._db._execute([self])
        return result.results[0] if result.results else None

    async def first_value(self, column: str) -> Any:
        row = await self.first()
        if row is None:
            return None
        if column not in row:
            raise D1Error(f"D1_COLUMN_NOTFOUND: Column not found ({column})")
        return row[column]


class SqliteD1:
    """A D1 database in one SQLite file (":memory:" for tests)."""

    def __init__(self, path: str | Path) -> None:
        # secure_delete ON for the local file only (D1 does not allow the PRAGMA, and what
        # its storage keeps of deleted pages is Cloudflare's): deleted rows are overwritten
        # with zeros, so a subject erase leaves no bytes behind here (docs/lifecycle.md).
        self._engine = SqliteEngine(path, secure_delete=True)

    def close(self) -> None:
        self._engine.close()

    def checkpoint(self) -> None:
        """Local only: checkpoint and truncate the WAL (see `SqliteEngine.checkpoint`)."""
        self._engine.checkpoint()

    def prepare(self, sql: str) -> SqliteD1Statement:
        return SqliteD1Statement(self, sql)

    def _execute(
        self, statements: Sequence[SqliteD1Statement], *, sized: bool = False
    ) -> list[D1Result]:
        engine = self._engine
        try:
            with engine.transaction():
                results = [
                    _to_d1_result(engine.run(statement.sql, statement.params))
                    for statement in statements
                ]
        except SqlEngineError as exc:
            raise (D1LimitError if exc.limit else D1Error)(f"D1_ERROR: {exc.message}") from None
        if not sized:
            return results
        # D1 reports the database's size after each statement (`meta.size_after`); here it
        # is the file's pages in use, read for `run` and `batch` (writes and the directory's
        # size probe), not for every read.
        size = engine.database_size()
        return [replace(r, meta=replace(r.meta, size_after=size)) for r in results]

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        if not statements:
            raise D1Error(f"D1_ERROR: {NO_STATEMENTS_DETECTED}")
        own: list[SqliteD1Statement] = []
        for statement in statements:
            if not isinstance(statement, SqliteD1Statement) or statement._db is not self:
                raise TypeError("batch() takes statements prepared on this database")
            own.append(statement)
        return self._execute(own, sized=True)
