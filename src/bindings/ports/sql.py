"""Types shared by the two SQL ports (D1 and Durable Object SQL)."""

from __future__ import annotations

from typing import Any, TypeAlias

SqlValue: TypeAlias = str | int | float | bytes | None
Row: TypeAlias = dict[str, Any]
