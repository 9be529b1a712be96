"""D1 port (d1/worker-api/*): `prepare(sql).bind(*params)` is synchronous, execution async;
`batch` is one transaction; at most 100 bound parameters. Value types are slotted dataclasses
(bare Pyodide, where tests/pyodide runs the adapters, has no pydantic-core).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bindings.ports.sql import Row, SqlValue


@dataclass(frozen=True, slots=True)
class D1Meta:
    """The counters of `meta` callers read (`size_after`: the database's bytes after it)."""

    changes: int = 0
    size_after: int = 0


@dataclass(frozen=True, slots=True)
class D1Result:
    meta: D1Meta = field(default_factory=D1Meta)
    results: list[Row] = field(default_factory=list)


class D1Error(Exception):
    """A statement failed in the database (constraint, syntax, limit...)."""


# What a fence trigger raises (agent_memory.directory): the tenant is moving away.
FENCE_MARK = "tenant_moved"


def met_fence(exc: BaseException) -> bool:
    """Whether `exc` is a write refused by a tenant's fence."""
    return isinstance(exc, D1Error) and FENCE_MARK in str(exc)


class D1Statement(Protocol):
    def bind(self, *params: SqlValue | bool) -> D1Statement: ...

    async def all(self) -> D1Result: ...

    async def run(self) -> D1Result: ...

    async def first(self) -> Row | None: ...

    async def first_value(self, column: str) -> Any:
        """`first(column)`: the value of one column of the first row, or None."""


class D1Database(Protocol):
    def prepare(self, sql: str) -> D1Statement: ...

    async def batch(self, statements: Sequence[D1Statement]) -> list[D1Result]:
        """Run statements in one transaction; on any failure none of them take effect."""
