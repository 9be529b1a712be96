"""The data-placement table of the hot/warm/cold ADR, as configuration: per memory kind, the
tier it is written to (hot KV, warm D1, cold R2), its TTL there, how long it stays, and where it
goes next (docs/tiered-memory.md, "The placement table"). `retention_days` None means the
tenant's retention for kinds the prune demotes, else "until deleted". `cold_promotes_to_warm`
is False for episodes: a cold hit is past the warm retention, so a copy in D1 would only be
archived again by the next prune; it is promoted to hot instead.

`MEMORY_PLACEMENT` overrides only what the code honours (`cold_retention_days`,
`cold_promotes_to_warm`), as a JSON object by kind; anything else is refused rather than
silently ignored. Stdlib dataclasses: read in every runtime.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Tier = Literal["hot", "warm", "cold"]
KINDS = ("working", "episode", "fact", "log")
_CHANGEABLE = ("cold_retention_days", "cold_promotes_to_warm")


class PlacementError(ValueError):
    """`MEMORY_PLACEMENT` is not a valid override of the placement table."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one memory kind lives."""

    kind: str
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


def _changed(base: Placement, fields: dict[str, Any]) -> Placement:
    kind = base.kind
    unknown = sorted(set(fields) - set(_CHANGEABLE))
    if unknown:
        raise PlacementError(
            f"MEMORY_PLACEMENT {kind}: {', '.join(unknown)} cannot be changed "
            f"(changeable: {', '.join(_CHANGEABLE)})"
        )
    days = fields.get("cold_retention_days")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or days < 1):
        raise PlacementError(
            f"MEMORY_PLACEMENT {kind}.cold_retention_days must be a positive integer"
        )
    if not isinstance(fields.get("cold_promotes_to_warm", False), bool):
        raise PlacementError(f"MEMORY_PLACEMENT {kind}.cold_promotes_to_warm must be a bool")
    return replace(base, **fields)


def parse_placement(raw: str) -> PlacementTable:
    """The default table with the `MEMORY_PLACEMENT` override applied (empty: the default).
    Raises `PlacementError` naming the bad entry."""
    if not raw.strip():
        return DEFAULT_TABLE
    try:
        override = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PlacementError(f"MEMORY_PLACEMENT is not JSON: {exc}") from None
    if not isinstance(override, dict):
        raise PlacementError("MEMORY_PLACEMENT must be a JSON object by memory kind")
    unknown = sorted(set(override) - set(KINDS))
    if unknown:
        raise PlacementError(
            f"MEMORY_PLACEMENT names unknown kind(s) {', '.join(unknown)} "
            f"(kinds: {', '.join(KINDS)})"
        )
    for kind, fields in override.items():
        if fields is not None and not isinstance(fields, dict):
            raise PlacementError(f"MEMORY_PLACEMENT {kind} must be a JSON object")
    return PlacementTable(
        tuple(
            base if override.get(base.kind) is None else _changed(base, override[base.kind])
            for base in DEFAULT_PLACEMENTS
        )
    )
