"""The memory inspector's read routes (Cloudflare Access gated; docs/inspector.md).

    GET  /admin/tenants                                   tenants that have memory
    GET  /admin/tenants/{tenant}/facts                    facts with status, filters, cursor
    GET  /admin/tenants/{tenant}/facts/{fact_id}          one fact: chain, links, provenance,
                                                          written / retrieved history
    GET  /admin/tenants/{tenant}/events                   memory events by kind, tier, time
    GET  /admin/tenants/{tenant}/episodes?ids=a,b         episodes by id (what a run recalled)
    POST /admin/tenants/{tenant}/recall/explain           "why this recall": ranked results
                                                          with each channel's rank and raw
                                                          score and the weighted score parts

Runs (`/admin/agents/{tenant}/runs[/{run_id}]`) and the brief
(`/admin/tenants/{tenant}/lifecycle`) are the existing routes. Every route here reads only:
the explain runs the recall pipeline with `record=False`, so it updates no recall stats and
writes no `memory_retrieved` event.

Errors (`{"error": {"code", "message"}}`): 401/403 from the Access gate first; 422
`invalid_path` (tenant, fact id), `validation_error` (query string or body) and
`invalid_cursor`; 404 `fact_not_found`; 503 `inspector_unavailable` (no D1) and
`semantic_unavailable` (the explain needs Vectorize and an embedder). The gate checks the
caller's grant for the path's tenant first (403 `tenant_forbidden`); the tenant list,
which names no tenant, is for platform admins only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.events import EventKind, EventTier
from agent_memory.governance.personal_data import PersonalData
from agent_memory.ids import is_ulid
from agent_memory.lifecycle.inspect import (
    MAX_INSPECT_PAGE,
    EventPage,
    FactDetail,
    FactPage,
    InspectStatus,
    MemoryInspector,
)
from agent_memory.lifecycle.retention import known_tenants
from agent_memory.memory import retrieval_config
from agent_memory.scope import AGENT_TYPE_PATTERN
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import (
    MAX_QUERY_CHARS,
    MemoryInputError,
    RecallFilters,
    SemanticTierUnavailable,
)
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from worker.errors import ApiError
from worker.router import Call

MAX_EXPLAIN = 50


class FactsQuery(BaseModel):
    """Query string of `GET …/facts`. `q` is a case-insensitive substring of the content."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    status: InspectStatus | None = None
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    q: str | None = Field(default=None, min_length=1, max_length=MAX_QUERY_CHARS)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=20, ge=1, le=MAX_INSPECT_PAGE)


class EventsQuery(BaseModel):
    """Query string of `GET …/events`; `since` / `until` are epoch milliseconds."""

    model_config = ConfigDict(extra="forbid")

    kind: EventKind | None = None
    tier: EventTier | None = None
    run_id: str | None = Field(default=None, min_length=1, max_length=64)
    since: int | None = Field(default=None, ge=0)
    until: int | None = Field(default=None, ge=0)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    limit: int = Field(default=50, ge=1, le=MAX_INSPECT_PAGE)


class EpisodesQuery(BaseModel):
    """Query string of `GET …/episodes`: `ids` is a comma-separated list of episode ids."""

    model_config = ConfigDict(extra="forbid")

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
    tenants: list[str]


def _db(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise ApiError(503, "inspector_unavailable", "the D1 binding is missing")
    return bindings.db


def _inspector(bindings: Bindings, tenant: str) -> MemoryInspector:
    return MemoryInspector(
        _db(bindings),
        tenant,
        now_ms=int(bindings.clock.now() * 1000),
        personal=PersonalData.from_bindings(bindings, tenant),
    )


async def list_tenants(call: Call[None, None]) -> TenantsResponse:
    tenants = await known_tenants(
        _db(call.bindings), ("agent_runs", "memory_episodes", "semantic_facts", "memory_events")
    )
    return TenantsResponse(tenants=tenants)


async def list_facts(call: Call[None, FactsQuery]) -> FactPage:
    query = call.query
    return await _inspector(call.bindings, call.params["tenant"]).list_facts(
        status=query.status,
        subject=query.subject,
        agent_type=query.agent_type,
        text=query.q,
        cursor=query.cursor,
        limit=query.limit,
    )


async def get_fact(call: Call[None, None]) -> FactDetail:
    tenant, fact_id = call.params["tenant"], call.params["fact_id"]
    if not is_ulid(fact_id):
        raise ApiError(422, "invalid_path", "fact_id must be a 26-character ULID")
    detail = await _inspector(call.bindings, tenant).fact_detail(fact_id)
    if detail is None:
        raise ApiError(404, "fact_not_found", f"tenant {tenant!r} has no fact {fact_id!r}")
    return detail


async def list_events(call: Call[None, EventsQuery]) -> EventPage:
    query = call.query
    return await _inspector(call.bindings, call.params["tenant"]).list_events(
        kind=query.kind,
        tier=query.tier,
        run_id=query.run_id,
        since_ms=query.since,
        until_ms=query.until,
        cursor=query.cursor,
        limit=query.limit,
    )


async def get_episodes(call: Call[None, EpisodesQuery]) -> EpisodesResponse:
    ids = call.query.id_list()
    episodes = await _inspector(call.bindings, call.params["tenant"]).episodes(ids)
    return EpisodesResponse(episodes=episodes)


async def explain_recall(call: Call[ExplainBody, None]) -> ExplainResponse:
    tenant, body, bindings = call.params["tenant"], call.body, call.bindings
    try:
        memory = SemanticMemory.from_bindings(bindings, tenant, config=retrieval_config(bindings))
        if bindings.embedder is None:
            raise SemanticTierUnavailable("the explain needs an embedder")
    except SemanticTierUnavailable as exc:
        raise ApiError(503, "semantic_unavailable", str(exc)) from None
    try:
        ranked = await memory.rank(body.query, body.limit, body.filters, record=False)
    except MemoryInputError as exc:
        raise ApiError(422, exc.code, exc.message, {"problems": exc.problems}) from None
    items: list[ExplainItem] = []
    for position, hit in enumerate(ranked.results, start=1):
        b = hit.breakdown
        values: dict[ScorePart, float] = {
            "relevance": b.relevance,
            "recency": b.recency,
            "confidence": b.confidence,
            "density": b.density,
        }
        parts: dict[ScorePart, ExplainPart] = {
            name: ExplainPart(
                value=value,
                weight=b.weights.get(name, 0.0),
                weighted=value * b.weights.get(name, 0.0),
            )
            for name, value in values.items()
        }
        fact = hit.fact
        items.append(
            ExplainItem(
                rank=position,
                fact_id=fact.fact_id,
                content=fact.content,
                subject=fact.subject,
                predicate=fact.predicate,
                object=fact.object,
                agent_type=fact.agent_type,
                score=hit.score,
                parts=parts,
                channels={
                    name: ExplainChannel(rank=d.rank, raw=d.raw, normalized=d.normalized)
                    for name, d in hit.channels.items()
                },
            )
        )
    return ExplainResponse(
        tenant=tenant, query=body.query, results=items, candidates=ranked.candidates
    )
