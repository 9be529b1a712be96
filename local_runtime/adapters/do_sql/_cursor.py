"""Cursors over a statement's complete result, consumed once like workerd's `SqlCursor`.

`BufferedSqlCursor` holds the rows (read eagerly when `exec` returns: a documented
deviation) and serves iteration, `raw`, `to_array` and `one` with workerd's texts; the
Miniflare test adapter reuses it. `LocalSqlCursor` is what the local `exec` returns:
numbers converted the way Pyodide delivers workerd's (int64 -> double -> Python).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bindings.ports.errors import BindingError
from bindings.ports.sql import Row
from local_runtime.adapters.do_sql._engine import QueryResult
from local_runtime.adapters.do_sql._errors import SqlStorageError
from local_runtime.adapters.jsnumbers import from_int64, js_number


def _do_value(value: Any) -> Any:
    """A stored value as Python on Workers sees it (SQLite int64 -> JS number -> Pyodide)."""
    kind = type(value)
    if kind is int:
        return from_int64(value)
    if kind is float:
        return js_number(value)
    return value


class BufferedSqlCursor:
    """A cursor over a statement's complete result, consumed once like workerd's.

    Iteration, `to_array`, `raw` and `one` take the rows not yet taken. `_convert` maps a
    stored row to what Python code sees; `error_type` is the error `one()` raises.
    """

    error_type: type[BindingError] = SqlStorageError

    def __init__(
        self, columns: list[str], rows: list[Any], rows_read: int, rows_written: int
    ) -> None:
        self._columns = columns
        self._rows = rows
        self._position = 0
        self._rows_read = rows_read
        self._rows_written = rows_written

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    @property
    def rows_read(self) -> int:
        return self._rows_read

    @property
    def rows_written(self) -> int:
        return self._rows_written

    def _convert(self, row: Any) -> list[Any]:
        return list(row)

    def _next_raw(self) -> list[Any] | None:
        if self._position >= len(self._rows):
            return None
        row = self._rows[self._position]
        self._position += 1
        return self._convert(row)

    def _as_row(self, values: list[Any]) -> Row:
        # Like workerd's object rows: a repeated column name keeps the last value.
        return dict(zip(self._columns, values, strict=True))

    def __iter__(self) -> Iterator[Row]:
        while (values := self._next_raw()) is not None:
            yield self._as_row(values)

    def raw(self) -> Iterator[list[Any]]:
        """Remaining rows as lists of values, in column order."""
        while (values := self._next_raw()) is not None:
            yield values

    def to_array(self) -> list[Row]:
        """Every remaining row as a dict."""
        return list(self)

    def one(self) -> Row:
        """Exactly one row; raises `error_type` (workerd's text) for zero or several."""
        values = self._next_raw()
        if values is None:
            raise self.error_type("Expected exactly one result from SQL query, but got no results.")
        if self._position < len(self._rows):
            self._position = len(self._rows)
            raise self.error_type(
                "Expected exactly one result from SQL query, but got multiple results."
            )
        return self._as_row(values)


class LocalSqlCursor(BufferedSqlCursor):
    """The result of one local `exec`, with numbers as Pyodide delivers workerd's."""

    def __init__(self, result: QueryResult) -> None:
        super().__init__(result.columns, result.rows, len(result.rows), result.changes)

    def _convert(self, row: Any) -> list[Any]:
        return [_do_value(v) for v in row]
