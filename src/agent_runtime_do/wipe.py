"""Deleting rows that hold content so their bytes do not stay behind in the file.

workerd's SQLite keeps `secure_delete` off (its build does not define
SQLITE_SECURE_DELETE) and refuses the pragma, `auto_vacuum`, `incremental_vacuum` and
`VACUUM` (measured on Miniflare; docs/lifecycle.md). A plain DELETE leaves a row's bytes in
the page's free space, where an erase can no longer find them. So every DELETE of a row
that may hold memory content first overwrites its text columns in place with as many `0`
bytes as they hold: the record keeps its size and storage class, so SQLite rewrites the
cell where it is, and the page then holds zeros. (Cloudflare's point-in-time-recovery log
keeps the object's history for 30 days regardless; the docs say so.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent_memory.statements import chunks
from bindings.ports.do_sql import SqlStorage
from bindings.ports.sql import SqlValue


def zeros(column: str) -> str:
    """SQL assigning `column` as many ASCII `0`s as it holds bytes."""
    size = f"length(CAST({column} AS BLOB))"
    return f"{column} = substr(hex(zeroblob({size})), 1, {size})"


def wipe_and_delete(
    sql: SqlStorage, table: str, columns: Sequence[str], where: str, *params: SqlValue
) -> int:
    """Overwrite `columns` of the rows matching `where`, then delete them; returns the
    number of rows deleted. Two statements: call inside `transaction_sync` when the pair
    must be atomic (a crash between them leaves zeroed rows, never half-deleted content)."""
    wipe = ", ".join(zeros(column) for column in columns)
    sql.exec(f"UPDATE {table} SET {wipe} WHERE {where}", *params)
    cursor = sql.exec(f"DELETE FROM {table} WHERE {where}", *params)
    list(cursor)
    return cursor.rows_written


def wipe_and_delete_ids(
    sql: SqlStorage, table: str, columns: Sequence[str], key: str, ids: Iterable[SqlValue]
) -> int:
    """`wipe_and_delete` of the rows whose `key` is one of `ids`, in slices."""
    deleted = 0
    # `chunks`' default slice (90 values) stays under DO SQL's 100 bound parameters too.
    for chunk in chunks(list(ids)):
        marks = ", ".join("?" for _ in chunk)
        deleted += wipe_and_delete(sql, table, columns, f"{key} IN ({marks})", *chunk)
    return deleted
