"""The memory inspector's routes (Access gated; docs/inspector.md). All but the fact delete only
read (the explain ranks with `record=False`). The delete (ADR-0030) is idempotent; `complete:
false` means the vector delete failed (recall ignores it; repeating the DELETE removes it).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.directory import all_shards
from agent_memory.governance.writes import EventKind, EventTier
from agent_memory.ids import is_ulid
from agent_memory.lifecycle.inspect import (
    MAX_INSPECT_PAGE,
    EventPage,
    FactDetail,
    FactPage,
    InspectStatus,
    MemoryInspector,
)
from agent_memory.lifecycle.retention import TenantTable, known_tenants
from agent_memory.memory import Memory, MemoryUnavailable
from agent_memory.namespace import AGENT_TYPE_PATTERN
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.semantic.models import MAX_QUERY_CHARS, RecallFilters
from authorization.operator_grants import granted_tenants
from http_messages import MAX_EPOCH_MS, ApiError
from worker.routing import Call, StrictModel

MAX_EXPLAIN = 50


class FactsQuery(BaseModel):
    """Query string of `GET …/facts`. `q` is a case-insensitive substring of the content."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    status: InspectStatus | None = None
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    q: str | None = Field(
        default=None, min_length=1, max_length=MAX_QUERY_CHARS, serialization_alias="text"
    )
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=20, ge=1, le=MAX_INSPECT_PAGE)


class EventsQuery(StrictModel):
    """Query string of `GET …/events`; `since` / `until` are epoch milliseconds."""

    kind: EventKind | None = None
    tier: EventTier | None = None
    run_id: str | None = Field(default=None, min_length=1, max_length=64)
    since: int | None = Field(default=None, ge=0, le=MAX_EPOCH_MS, serialization_alias="since_ms")
    until: int | None = Field(default=None, ge=0, le=MAX_EPOCH_MS, serialization_alias="until_ms")
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=50, ge=1, le=MAX_INSPECT_PAGE)


class EpisodesQuery(StrictModel):
    """Query string of `GET …/episodes`: `ids` is a comma-separated list of episode ids."""

    ids: str = Field(min_length=26, max_length=27 * MAX_INSPECT_PAGE)

    def id_list(self) -> list[str]:
        ids = [part.strip() for part in self.ids.split(",") if part.strip()]
        if len(ids) > MAX_INSPECT_PAGE or not all(is_ulid(i) for i in ids):
            raise ApiError(
                422,
                "validation_error",
                f"ids must be 1-{MAX_INSPECT_PAGE} comma-separated 26-character ULIDs",
                {"problems": [{"field": "ids", "problem": "not a list of ULIDs"}]},
            )
        return ids


class EpisodesResponse(BaseModel):
    episodes: list[Episode]


class ExplainBody(BaseModel):
    """Body of `POST …/recall/explain`: the query a recall would get, and how many results."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=10, ge=1, le=MAX_EXPLAIN)
    filters: RecallFilters | None = None


ScorePart = Literal["relevance", "recency", "confidence", "density"]


class ExplainPart(BaseModel):
    """One score component: its value in [0, 1], its normalised weight, and their product
    (`weighted`). The parts' `weighted` values add up to the result's `score`."""

    value: float
    weight: float
    weighted: float


class ExplainChannel(BaseModel):
    """How one retrieval channel saw the fact: 1-based rank (0: scored as a feature, not
    listed by the channel), raw score and normalised score."""

    rank: int
    raw: float
    normalized: float


class ExplainItem(BaseModel):
    rank: int
    fact_id: str
    content: str
    subject: str
    predicate: str
    object: str
    agent_type: str
    score: float
    parts: dict[ScorePart, ExplainPart]
    channels: dict[str, ExplainChannel]


class ExplainResponse(BaseModel):
    tenant: str
    query: str
    results: list[ExplainItem]
    candidates: dict[str, int]
    recorded: bool = False


class TenantsResponse(BaseModel):
    """`platform`: every tenant with data (a platform admin); `granted`: the caller's grants."""

    tenants: list[str]
    scope: Literal["platform", "granted"]


class FactDeleted(BaseModel):
    tenant: str
    fact_id: str
    deleted: bool
    vector_deleted: bool
    complete: bool


async def _inspector(call: Call[Any, Any]) -> MemoryInspector:
    return (await Memory.open(call.bindings, call.params["tenant"])).inspector()


async def list_tenants(call: Call[None, None]) -> TenantsResponse:
    """The tenants the caller may operate (issue 26: a tenant-scoped operator's inspector
    had none to pick): its grants, or for a platform admin every tenant with data."""
    if call.bindings.db is None:
        raise MemoryUnavailable("episodic_unavailable", "the D1 binding is missing")
    mine = await granted_tenants(call.auth, call.bindings)
    if mine is not None:
        return TenantsResponse(tenants=sorted(mine), scope="granted")
    found: set[str] = set()
    tables: tuple[TenantTable, ...] = (
        "agent_runs",
        "memory_episodes",
        "semantic_facts",
        "memory_events",
    )
    for shard in all_shards(call.bindings):  # every database holds some of the tenants
        if shard.db is not None:
            found.update(await known_tenants(shard.db, tables))
    return TenantsResponse(tenants=sorted(found), scope="platform")


async def list_facts(call: Call[None, FactsQuery]) -> FactPage:
    # The query's fields are the inspector's arguments (their serialization aliases).
    return await (await _inspector(call)).list_facts(**call.query.model_dump(by_alias=True))


async def get_fact(call: Call[None, None]) -> FactDetail:
    fact_id = call.params["fact_id"]
    detail = await (await _inspector(call)).fact_detail(fact_id)
    if detail is None:
        tenant = call.params["tenant"]
        raise ApiError(404, "fact_not_found", f"tenant {tenant!r} has no fact {fact_id!r}")
    return detail


async def delete_fact(call: Call[None, None]) -> FactDeleted:
    fact_id = call.params["fact_id"]
    memory = await Memory.open(call.bindings, call.params["tenant"])
    result = await memory.semantic().delete(fact_id)
    return FactDeleted(
        tenant=call.params["tenant"],
        fact_id=fact_id,
        deleted=result.row_deleted,
        vector_deleted=result.vector_deleted,
        complete=result.complete,
    )


async def list_events(call: Call[None, EventsQuery]) -> EventPage:
    return await (await _inspector(call)).list_events(**call.query.model_dump(by_alias=True))


async def get_episodes(call: Call[None, EpisodesQuery]) -> EpisodesResponse:
    ids = call.query.id_list()
    episodes = await (await _inspector(call)).episodes(ids)
    return EpisodesResponse(episodes=episodes)


async def explain_recall(call: Call[ExplainBody, None]) -> ExplainResponse:
    tenant, body = call.params["tenant"], call.body
    memory = (await Memory.open(call.bindings, tenant)).semantic()
    if call.bindings.embedder is None:
        raise MemoryUnavailable("semantic_unavailable", "the explain needs an embedder")
    ranked = await memory.rank(body.query, body.limit, body.filters, record=False)
    items: list[ExplainItem] = []
    fields = {"fact_id", "content", "subject", "predicate", "object", "agent_type"}
    for position, hit in enumerate(ranked.results, start=1):
        b = hit.breakdown
        parts = {
            name: ExplainPart(value=v, weight=w, weighted=v * w)
            for name in get_args(ScorePart)
            for v, w in [(getattr(b, name), b.weights.get(name, 0.0))]
        }
        channels = {
            name: ExplainChannel(rank=d.rank, raw=d.raw, normalized=d.normalized)
            for name, d in hit.channels.items()
        }
        fact = {name: getattr(hit.fact, name) for name in fields}
        items.append(
            ExplainItem(rank=position, score=hit.score, parts=parts, channels=channels, **fact)
        )
    return ExplainResponse(
        tenant=tenant, query=body.query, results=items, candidates=ranked.candidates
    )
