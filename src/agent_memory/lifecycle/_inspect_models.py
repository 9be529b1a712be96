"""The inspector's vocabulary: statuses, the page and detail models, event rows.

Private to `agent_memory.lifecycle`: other packages import these names from
`agent_memory.lifecycle.inspect`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from agent_memory.governance.events import EventKind, EventTier
from agent_memory.governance.policy import canonical_json
from agent_memory.ids import sha256_hex
from agent_memory.tiers.semantic.models import Fact
from bindings.ports.sql import Row

InspectStatus = Literal["active", "pending", "superseded", "decayed"]
Direction = Literal["outgoing", "incoming"]
MAX_INSPECT_PAGE = 100
MAX_CHAIN = 50
MAX_HISTORY = 50


def inspect_status(fact: Fact, now_ms: int) -> InspectStatus:
    """The inspector's status of a stored fact at `now_ms` (see the module docstring)."""
    if fact.status == "superseded":
        return "superseded"
    if fact.status == "pending_vector":
        return "pending"
    if fact.valid_to is not None and fact.valid_to <= now_ms:
        return "decayed"
    return "active"


class FactView(BaseModel):
    """A fact as the inspector lists it: the stored row plus its inspector status."""

    fact: Fact
    status: InspectStatus


class FactPage(BaseModel):
    facts: list[FactView]
    next_cursor: str | None = None


class FactLink(BaseModel):
    """A link to a related fact (the reconciler's links), with that fact's summary."""

    fact_id: str
    direction: Direction
    score: float
    content: str | None = None
    status: InspectStatus | None = None


class ProvenanceItem(BaseModel):
    """Where a fact came from: a run it was learned in, or an episode / fact / run that the
    reconciler promoted, summarised or merged into it. `content` and `run_id` are filled
    when the source still exists."""

    source_kind: Literal["episode", "fact", "run"]
    source_id: str
    relation: str
    run_id: str | None = None
    content: str | None = None
    created_at: int | None = None


class InspectedEvent(BaseModel):
    """One `memory_events` row. Times are epoch milliseconds."""

    event_id: str
    kind: EventKind
    tier: EventTier
    agent_type: str | None
    run_id: str | None
    content_hash: str | None
    payload: dict[str, Any]
    created_at: int


class EventPage(BaseModel):
    events: list[InspectedEvent]
    next_cursor: str | None = None


class FactDetail(BaseModel):
    """One fact and everything the inspector shows about it.

    `replaced` are the facts this one superseded (transitively, oldest first); `replaced_by`
    the successors after it, in order (the first is `fact.superseded_by`). `timeline` is
    all of them with this fact, ordered by `valid_from`: what was believed when.
    """

    fact: FactView
    replaced: list[FactView]
    replaced_by: list[FactView]
    timeline: list[FactView]
    links: list[FactLink]
    provenance: list[ProvenanceItem]
    written: list[InspectedEvent]
    retrieved: list[InspectedEvent]


def event_from_row(row: Row) -> InspectedEvent:
    return InspectedEvent(
        event_id=str(row["event_id"]),
        kind=row["kind"],
        tier=row["tier"],
        agent_type=row.get("agent_type"),
        run_id=row.get("run_id"),
        content_hash=row.get("content_hash"),
        payload=json.loads(row.get("payload") or "{}"),
        created_at=int(row["created_at"]),
    )


def written_hash(fact: Fact) -> str:
    """The content hash of the `memory_written` event the semantic write path records for
    `fact` (the write proposal's canonical value; `tiers.semantic` write path)."""
    value = {
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object": fact.object,
        "content": fact.content,
        "metadata": fact.metadata,
    }
    return sha256_hex(canonical_json(value))
