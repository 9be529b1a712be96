"""The SQL text scanner: statements split as SQLite consumes them, and checks on the text.

`split_sql_statements` is public (the migrations and the local D1 use it). `parse` adds
what `SqliteEngine.run` checks about the text alone, before SQLite sees it: the size
limit, an empty statement (workerd's "SQL code did not contain a statement.") and
transaction control, which workerd refuses. Both are cached, since callers repeat SQL.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from functools import lru_cache

from local_runtime.adapters.do_sql._security import MAX_SQL_BYTES

_TRANSACTION_KEYWORDS = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.DOTALL)
_FIRST_WORD = re.compile(r"[A-Za-z_]+")


def split_sql_statements(sql: str) -> tuple[str, ...]:
    """Split SQL text into complete statements, the way SQLite would consume it.

    Semicolons inside quotes, identifiers, comments and trigger bodies do not split
    (trigger bodies are recognised with `sqlite3.complete_statement`). Empty and
    comment-only statements are dropped; text after the last `;` is kept as a statement
    when it holds code.
    """
    return _scan(sql)[0]


@lru_cache(maxsize=4096)
def _scan(sql: str) -> tuple[tuple[str, ...], bool]:
    """`split_sql_statements`, plus whether the text holds an empty statement.

    workerd prepares what follows each statement (after whitespace) as the next one, and
    fails with "SQL code did not contain a statement." when that is only `;` or a comment:
    so `SELECT 1;;` and `SELECT 1; -- note` fail there, and the flag reports exactly that.
    """
    statements: list[str] = []
    start = 0
    has_code = False
    empty = False
    i = 0
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while True:
                j = sql.find(close, j)
                if j == -1:
                    j = n
                    break
                if close != "]" and j + 1 < n and sql[j + 1] == close:
                    j += 2  # a doubled quote is an escaped quote
                    continue
                break
            has_code = True
            i = j + 1
            continue
        if ch == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        if ch == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j == -1 else j + 2
            continue
        if ch == ";":
            if not has_code:
                empty = True
                start = i + 1
            elif sqlite3.complete_statement(sql[start : i + 1]):
                statements.append(sql[start : i + 1].strip())
                start = i + 1
                has_code = False
            i += 1
            continue
        if not has_code and not ch.isspace():
            has_code = True
        i += 1
    if has_code:
        statements.append(sql[start:].strip())
    elif statements and sql[start:].strip():
        empty = True  # a trailing comment after the last statement
    return tuple(statements), empty


def _first_keyword(statement: str) -> str:
    noise = _LEADING_NOISE.match(statement)
    match = _FIRST_WORD.match(statement, noise.end() if noise else 0)
    return match.group(0).upper() if match else ""


@dataclass(frozen=True)
class ParsedSql:
    """What `parse` found in one SQL text."""

    statements: tuple[str, ...]
    too_long: bool
    controls_transaction: bool
    has_empty_statement: bool


@lru_cache(maxsize=4096)
def parse(sql: str) -> ParsedSql:
    """Everything `SqliteEngine.run` checks about the text alone (cached: callers repeat
    their SQL)."""
    size = len(sql) if sql.isascii() else len(sql.encode("utf-8"))
    statements, empty = _scan(sql)
    return ParsedSql(
        statements=statements,
        has_empty_statement=empty,
        too_long=size > MAX_SQL_BYTES,
        controls_transaction=any(
            _first_keyword(statement) in _TRANSACTION_KEYWORDS for statement in statements
        ),
    )
