"""The data-placement table of the hot/warm/cold ADR, as configuration: per memory kind, the
tier it is written to (hot KV, warm D1, cold R2), its TTL there, how long it stays, and where it
goes next (docs/tiered-memory.md, "The placement table"). `retention_days` None means the
tenant's retention for kinds the prune demotes, else "until deleted". `cold_promotes_to_warm`
is False for episodes: a cold hit is past the warm retention, so a copy in D1 would only be
archived again by the next prune; it is promoted to hot instead.

`MEMORY_PLACEMENT` overrides only what the code honours (`cold_retention_days`,
`cold_promotes_to_warm`), as a JSON object by kind; anything else is refused rather than
silently ignored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, TypeAdapter, ValidationError

Tier = Literal["hot", "warm", "cold"]
Kind = Literal["working", "episode", "fact", "log"]


class PlacementError(ValueError):
    """`MEMORY_PLACEMENT` is not a valid override of the placement table."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one memory kind lives."""

    kind: Kind
    tier: Tier
    ttl_seconds: int | None = None
    retention_days: int | None = None
    demote_to_cold: bool = False
    cold_retention_days: int | None = None
    cold_promotes_to_warm: bool = False


DEFAULT_PLACEMENTS: tuple[Placement, ...] = (
    Placement("working", "hot", ttl_seconds=3600),
    Placement("episode", "warm", demote_to_cold=True),
    Placement("fact", "warm"),
    Placement("log", "warm", demote_to_cold=True, cold_retention_days=90),
)


@dataclass(frozen=True, slots=True)
class PlacementTable:
    """The placement of every kind; `placement(kind)` raises `KeyError` for an unknown one."""

    placements: tuple[Placement, ...] = DEFAULT_PLACEMENTS

    def placement(self, kind: str) -> Placement:
        for item in self.placements:
            if item.kind == kind:
                return item
        raise KeyError(f"memory kind {kind!r} has no placement")

    def knows(self, kind: str) -> bool:
        return any(item.kind == kind for item in self.placements)

    def rows(self) -> list[dict[str, Any]]:
        """The table as JSON-able rows (for docs, the brief and the CLI)."""
        return [asdict(p) for p in self.placements]


DEFAULT_TABLE = PlacementTable()


class _Override(BaseModel):
    """What `MEMORY_PLACEMENT` may change of one kind's placement; anything else is refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cold_retention_days: PositiveInt | None = None
    cold_promotes_to_warm: bool = False


_OVERRIDES = TypeAdapter(dict[Kind, _Override | None])


def parse_placement(raw: str) -> PlacementTable:
    """The default table with the `MEMORY_PLACEMENT` override applied (empty: the default).
    Raises `PlacementError` naming the bad entry."""
    if not raw.strip():
        return DEFAULT_TABLE
    try:
        override = _OVERRIDES.validate_json(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f" {part}" for part in error["loc"][:2] if part != "[key]")
        raise PlacementError(f"MEMORY_PLACEMENT{where}: {error['msg']}") from None
    return PlacementTable(
        tuple(
            base
            if (fields := override.get(base.kind)) is None
            else replace(base, **fields.model_dump(exclude_unset=True))
            for base in DEFAULT_PLACEMENTS
        )
    )
