"""D1 port (async SQL database; docs: d1/worker-api/*, d1/platform/limits.mdx).

`prepare(sql).bind(*params)` is synchronous; execution is async. `batch` runs its
statements in one transaction: all of them or none. At most 100 bound parameters per
statement. Booleans are stored as 1/0; None binds NULL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bindings.ports.sql import Row, SqlValue

# Value types are frozen stdlib dataclasses with slots, not pydantic models: the Cloudflare
# adapters build one per D1 call on the edge (cheaper per row), and they must load in bare
# Pyodide, where pydantic-core has no wheel (tests/pyodide runs them there).


@dataclass(frozen=True, slots=True)
class D1Meta:
    """The counter of `meta` that callers read; the others D1 reports are dropped."""

    changes: int = 0


@dataclass(frozen=True, slots=True)
class D1Result:
    """Shape of `.all()` / `.run()`: `{meta, results}`."""

    meta: D1Meta = field(default_factory=D1Meta)
    results: list[Row] = field(default_factory=list)


class D1Error(Exception):
    """A statement failed in the database (constraint, syntax, limit...)."""


class D1Statement(Protocol):
    def bind(self, *params: SqlValue | bool) -> D1Statement:
        """Return a statement with these positional parameters bound."""
        ...

    async def all(self) -> D1Result: ...

    async def run(self) -> D1Result: ...

    async def first(self) -> Row | None:
        """The first row, or None."""
        ...

    async def first_value(self, column: str) -> Any:
        """`first(column)`: the value of one column of the first row, or None."""
        ...


class D1Database(Protocol):
    def prepare(self, sql: str) -> D1Statement: ...

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        """Run statements in one transaction; on any failure none of them take effect."""
        ...
