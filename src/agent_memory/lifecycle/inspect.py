"""Read-only views of one tenant's memory for the inspector (docs/inspector.md). Nothing here
writes; the tenant is bound once, at `MemoryInspector(db, tenant)`. A fact is `decayed` when
stored active but past its `valid_to` (recall no longer returns it). Cursors are the episodic
tier's keyset cursors over (created_at, id); a foreign one raises `InvalidCursorError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel

from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.writes import (
    EventKind,
    EventLog,
    EventTier,
    fact_proposal,
    loaded_payload,
    written_payload,
)
from agent_memory.tiers.episodic import Episode, EpisodicStore, decode_cursor, encode_cursor
from agent_memory.tiers.semantic.memory import FactHistory
from agent_memory.tiers.semantic.models import Fact, open_facts
from bindings.ports.d1 import D1Database
from bindings.ports.sql import Row, SqlValue

InspectStatus = Literal["active", "pending", "superseded", "decayed"]

Direction = Literal["outgoing", "incoming"]

MAX_INSPECT_PAGE = 100
MAX_CHAIN = 50
MAX_HISTORY = 50


def inspect_status(status: Any, valid_to: Any, now_ms: int) -> InspectStatus | None:
    """The inspector's status of a stored status and `valid_to` at `now_ms`."""
    if status == "superseded":
        return "superseded"
    if status == "pending_vector":
        return "pending"
    if status != "active":
        return None
    return "decayed" if valid_to is not None and int(valid_to) <= now_ms else "active"


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
    `supersessions` are the events of the supersessions and merges naming it (both ids,
    the rule or judge that decided) and of their undos and replays (who), newest first.
    """

    fact: FactView
    replaced: list[FactView]
    replaced_by: list[FactView]
    timeline: list[FactView]
    links: list[FactLink]
    provenance: list[ProvenanceItem]
    written: list[InspectedEvent]
    retrieved: list[InspectedEvent]
    supersessions: list[InspectedEvent]


# The WHERE clause of each status, at `now_ms`.
_STATUS_WHERE: dict[str, Callable[[int], tuple[str, list[SqlValue]]]] = {
    "pending": lambda now: ("status = 'pending_vector'", []),
    "superseded": lambda now: ("status = 'superseded'", []),
    "active": lambda now: ("status = 'active' AND (valid_to IS NULL OR valid_to > ?)", [now]),
    "decayed": lambda now: ("status = 'active' AND valid_to IS NOT NULL AND valid_to <= ?", [now]),
}


_EVENT_FILTERS = ("kind = ?", "tier = ?", "run_id = ?", "created_at >= ?", "created_at < ?")


def event_from_row(row: Row) -> InspectedEvent:
    return InspectedEvent.model_validate(row | {"payload": loaded_payload(row.get("payload"))})


def filled_in(event: InspectedEvent, fact: Fact) -> InspectedEvent:
    """The compact event row of the write that created `fact` (a fact with personal fields
    keeps one: its id, no hash, only the marked fields) with the hash and payload a full one
    carries, from the opened fact (`WriteGate.event`, `in_row`)."""
    if event.content_hash is not None or event.event_id != fact.fact_id:
        return event
    proposal = fact_proposal(dict(fact))
    payload = {**written_payload(proposal), **event.payload}
    return event.model_copy(update={"content_hash": proposal.content_hash, "payload": payload})


class MemoryInspector:
    def __init__(
        self, db: D1Database, tenant: str, *, now_ms: int, personal: PersonalData | None = None
    ) -> None:
        self._db = db
        self.tenant = tenant
        self.now_ms = now_ms
        self._events = EventLog(tenant, db)
        self._facts = FactHistory(db, tenant)
        # Opens sealed personal fields for display (docs/personal-data.md).
        self._personal = personal or PersonalData(tenant, None, None)

    async def _views(self, rows: Sequence[Row]) -> list[FactView]:
        facts = await open_facts(rows, self._personal)
        return [
            FactView(fact=f, status=inspect_status(f.status, f.valid_to, self.now_ms) or "active")
            for f in facts
        ]

    async def list_facts(
        self,
        *,
        status: InspectStatus | None = None,
        subject: str | None = None,
        agent_type: str | None = None,
        text: str | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> FactPage:
        """Facts newest first, `limit` (1-100) per page; `next_cursor` fetches the next."""
        limit = max(1, min(limit, MAX_INSPECT_PAGE))
        where: list[tuple[str, list[SqlValue]]] = []
        if status is not None:
            where.append(_STATUS_WHERE[status](self.now_ms))
        if subject is not None:
            where.append(("subject = ?", [subject]))
        if agent_type is not None:
            where.append(("agent_type = ?", [agent_type]))
        if text:
            where.append(("instr(lower(content), lower(?)) > 0", [text]))
        after = decode_cursor(cursor) if cursor is not None else None
        rows = await self._facts.fact_rows(where=where, after=after, limit=limit + 1)
        views = await self._views(rows[:limit])
        last = views[-1].fact if len(rows) > limit else None
        cursor = None if last is None else encode_cursor(last.created_at, last.fact_id)
        return FactPage(facts=views, next_cursor=cursor)

    async def _fact(self, fact_id: str) -> FactView | None:
        views = await self._views(
            await self._facts.fact_rows(where=[("fact_id = ?", [fact_id])], limit=1)
        )
        return views[0] if views else None

    async def fact_detail(self, fact_id: str) -> FactDetail | None:
        """Everything about one fact, or None when the tenant has no such fact."""
        view = await self._fact(fact_id)
        if view is None:
            return None
        replaced_by = await self._successors(view)
        replaced = await self._predecessors(view)
        timeline = sorted(
            [*replaced, view, *replaced_by], key=lambda v: (v.fact.valid_from, v.fact.created_at)
        )
        return FactDetail(
            fact=view,
            replaced=replaced,
            replaced_by=replaced_by,
            timeline=timeline,
            links=await self._links(fact_id),
            provenance=await self._provenance(view.fact),
            written=[
                filled_in(event_from_row(row), view.fact)
                for row in await self._events.written(
                    fact_id, fact_proposal(dict(view.fact)).content_hash, MAX_HISTORY
                )
            ],
            retrieved=[
                event_from_row(row) for row in await self._events.retrieving(fact_id, MAX_HISTORY)
            ],
            supersessions=[
                event_from_row(row)
                for row in await self._events.supersessions(fact_id, MAX_HISTORY)
            ],
        )

    async def _successors(self, view: FactView) -> list[FactView]:
        chain: list[FactView] = []
        seen = {view.fact.fact_id}
        next_id = view.fact.superseded_by
        while next_id and next_id not in seen and len(chain) < MAX_CHAIN:
            seen.add(next_id)
            successor = await self._fact(next_id)
            if successor is None:
                break
            chain.append(successor)
            next_id = successor.fact.superseded_by
        return chain

    async def _predecessors(self, view: FactView) -> list[FactView]:
        found: list[FactView] = []
        seen = {view.fact.fact_id}
        frontier = [view.fact.fact_id]
        while frontier and len(found) < MAX_CHAIN:
            rows = await self._facts.superseded_by_any(frontier, MAX_CHAIN)
            frontier = []
            for older in await self._views(rows):
                if older.fact.fact_id not in seen:
                    seen.add(older.fact.fact_id)
                    found.append(older)
                    frontier.append(older.fact.fact_id)
        return sorted(found[:MAX_CHAIN], key=lambda v: (v.fact.valid_from, v.fact.created_at))

    async def _links(self, fact_id: str) -> list[FactLink]:
        links: list[FactLink] = []
        for direction in get_args(Direction):
            for row in await self._facts.links_of(fact_id, direction == "outgoing", MAX_HISTORY):
                status = inspect_status(row["status"], row["valid_to"], self.now_ms)
                of = {"fact_id": row["other_id"], "direction": direction, "status": status}
                links.append(FactLink.model_validate(row | of))
        return links

    async def _provenance(self, fact: Fact) -> list[ProvenanceItem]:
        items: list[ProvenanceItem] = []
        if fact.learned_from_run_id:
            items.append(
                ProvenanceItem(
                    source_kind="run",
                    source_id=fact.learned_from_run_id,
                    relation="learned_in",
                    run_id=fact.learned_from_run_id,
                    created_at=fact.created_at,
                )
            )
        for row in await self._facts.provenance_of(fact.fact_id, MAX_HISTORY):
            run = row["run_id"] or (row["source_id"] if row["source_kind"] == "run" else None)
            items.append(ProvenanceItem.model_validate(row | {"run_id": run}))
        return items

    async def episodes(self, episode_ids: Sequence[str]) -> list[Episode]:
        """The episodes among `episode_ids` (at most `MAX_INSPECT_PAGE`) that still exist,
        in the order given."""
        wanted = list(dict.fromkeys(episode_ids))[:MAX_INSPECT_PAGE]
        store = EpisodicStore(self._db, self.tenant, personal=self._personal)
        return await store.episodes_by_id(wanted)

    async def list_events(
        self,
        *,
        kind: EventKind | None = None,
        tier: EventTier | None = None,
        run_id: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> EventPage:
        """Events newest first with `since_ms <= created_at < until_ms`; keyset-paginated."""
        limit = max(1, min(limit, MAX_INSPECT_PAGE))
        filters = zip(_EVENT_FILTERS, (kind, tier, run_id, since_ms, until_ms), strict=True)
        given = [(clause, value) for clause, value in filters if value is not None]
        clauses, params = ["1", *(c for c, _ in given)], [v for _, v in given]
        if cursor is not None:
            created_at, event_id = decode_cursor(cursor)
            clauses.append("(created_at < ? OR (created_at = ? AND event_id < ?))")
            params.extend([created_at, created_at, event_id])
        rows = await self._events.rows(" AND ".join(clauses), *params, limit=limit + 1)
        events = [event_from_row(row) for row in rows[:limit]]
        last = events[-1] if len(rows) > limit else None
        cursor = None if last is None else encode_cursor(last.created_at, last.event_id)
        return EventPage(events=events, next_cursor=cursor)
