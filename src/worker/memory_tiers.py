"""The four tiers behind one shape, for the uniform memory API (`worker.memory_routes`).

Every tier answers with `MemoryItem`s: `{tier, key, value, metadata, created_at,
expires_at}` (times in epoch ms), plus `score` and `score_breakdown` when ranked for a query.

* working: `WorkingMemory(kv, tenant, agent_id)` — the instance's KV keys, 1 h TTL at most,
  the 128 KiB budget; listed in key order.
* episodic: `memory_episodes` rows of `(tenant, instance_id = agent_id)`, newest first.
  A keyed write is one `observation` episode (agent type `memory-api`) whose `data` holds
  `memory_key` and `expires_at`; a rewrite inserts the new episode first and then deletes
  the older ones of that key, so a failed write leaves the old value. Episodes written by
  agent runs are listed too, keyed by their episode id (read-only here).
* semantic: the tenant's active facts (shared by every agent of the tenant, ADR-29); a
  write learns `value` as a fact with `subject = key` through the write policy; `query`
  runs the hybrid recall, which records its own `memory_retrieved` event.
* procedural: the agent type's workflows from its Durable Object (read-only).

Ranking a query over working, episodic or procedural memory uses term overlap as the
relevance and the tier's weights from `MEMORY_RETRIEVAL_CONFIG` (`RetrievalConfig`), and
records one `memory_retrieved` event per tier.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_memory.agent.retrieval_events import retrieval_config
from agent_memory.governance.personal_data import PersonalData
from agent_memory.ids import new_ulid
from agent_memory.retrieval.scoring import ScoreBreakdown
from agent_memory.scope import AgentScope
from agent_memory.tiered.deployment import namespace_flags
from agent_memory.tiers.episodic import Episode, EpisodicStore
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import FactInput, RecallFilters, open_facts
from agent_memory.tiers.working import WorkingMemory
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from worker.errors import ApiError

API_AGENT_TYPE = "memory-api"
SEARCH_POOL = 200


class MemoryItem(BaseModel):
    tier: str
    key: str
    value: Any
    metadata: dict[str, Any] = {}
    created_at: int | None = None
    expires_at: int | None = None
    score: float | None = None
    score_breakdown: dict[str, Any] | None = None


def breakdown_view(b: ScoreBreakdown) -> dict[str, Any]:
    return {
        "relevance": round(b.relevance, 6),
        "recency": round(b.recency, 6),
        "confidence": round(b.confidence, 6),
        "density": round(b.density, 6),
        "weights": {k: round(v, 6) for k, v in b.weights.items()},
    }


def json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def database(bindings: Bindings) -> D1Database:
    """The D1 binding, or 503 `episodic_unavailable`."""
    if bindings.db is None:
        raise ApiError(503, "episodic_unavailable", "the D1 binding is missing")
    return bindings.db


def working(bindings: Bindings, tenant: str, agent_id: str, ttl: int = 3600) -> WorkingMemory:
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "the KV binding is missing")
    return WorkingMemory(
        bindings.kv, tenant, agent_id, ttl_seconds=ttl, namespace=namespace_flags(bindings)
    )


async def working_items(bindings: Bindings, tenant: str, agent_id: str) -> list[MemoryItem]:
    """The agent's live working keys with their values, in key order."""
    memory = working(bindings, tenant, agent_id)
    items: list[MemoryItem] = []
    for entry in await memory.entries():
        value = await memory.get(entry.key)
        if value is None:
            continue  # expired between list and get
        expires = None if entry.expiration is None else entry.expiration * 1000
        items.append(MemoryItem(tier="working", key=entry.key, value=value, expires_at=expires))
    return items


_EPISODE_COLUMNS = "episode_id, content, data, created_at, kind"


def _episode_item(row: dict[str, Any]) -> MemoryItem:
    data = json.loads(row.get("data") or "{}")
    key = data.get("memory_key") or row["episode_id"]
    value = data["value"] if "memory_key" in data else row["content"]
    metadata = (
        data.get("metadata", {})
        if "memory_key" in data
        else {"kind": row.get("kind"), "episode_id": row["episode_id"]}
    )
    return MemoryItem(
        tier="episodic",
        key=key,
        value=value,
        metadata=metadata,
        created_at=int(row["created_at"]),
        expires_at=data.get("expires_at"),
    )


_LIVE = "(json_extract(data, '$.expires_at') IS NULL OR json_extract(data, '$.expires_at') > ?)"


async def episodic_items(
    bindings: Bindings, tenant: str, agent_id: str, *, limit: int, offset: int
) -> list[MemoryItem]:
    """The agent's live episodes, newest first (`limit` from `offset`)."""
    now_ms = int(bindings.clock.now() * 1000)
    result = (
        await database(bindings)
        .prepare(
            f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes WHERE tenant_id = ? "
            f"AND instance_id = ? AND {_LIVE} ORDER BY created_at DESC, episode_id DESC "
            "LIMIT ? OFFSET ?"
        )
        .bind(tenant, agent_id, now_ms, limit, offset)
        .all()
    )
    return [_episode_item(row) for row in result.results]


async def episodic_get(
    bindings: Bindings, tenant: str, agent_id: str, key: str
) -> MemoryItem | None:
    now_ms = int(bindings.clock.now() * 1000)
    row = (
        await database(bindings)
        .prepare(
            f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes WHERE tenant_id = ? "
            "AND instance_id = ? AND (json_extract(data, '$.memory_key') = ? OR "
            f"(episode_id = ? AND json_extract(data, '$.memory_key') IS NULL)) AND {_LIVE} "
            "ORDER BY created_at DESC, episode_id DESC LIMIT 1"
        )
        .bind(tenant, agent_id, key, key, now_ms)
        .first()
    )
    return None if row is None else _episode_item(row)


async def episodic_put(
    bindings: Bindings,
    tenant: str,
    agent_id: str,
    key: str,
    value: Any,
    metadata: dict[str, Any],
    expires_at_ms: int,
) -> MemoryItem:
    """Write `key` as a new episode, then drop its older versions (see module docstring)."""
    now = bindings.clock.now()
    episode = Episode(
        episode_id=new_ulid(now),
        run_id=new_ulid(now),
        agent_type=API_AGENT_TYPE,
        instance_id=agent_id,
        kind="observation",
        content=json_text(value),
        data={
            "memory_key": key,
            "value": value,
            "metadata": metadata,
            "expires_at": expires_at_ms,
        },
        created_at=int(now * 1000),
    )
    store = EpisodicStore(
        database(bindings), tenant, personal=PersonalData.from_bindings(bindings, tenant)
    )
    await store.append_episode(episode)
    await episodic_delete(bindings, tenant, agent_id, key, keep=episode.episode_id)
    return _episode_item(
        {
            "episode_id": episode.episode_id,
            "content": episode.content,
            "data": json.dumps(episode.data),
            "created_at": episode.created_at,
            "kind": episode.kind,
        }
    )


async def episodic_delete(
    bindings: Bindings, tenant: str, agent_id: str, key: str, *, keep: str = ""
) -> int:
    """Delete the agent's keyed episodes named `key` (but `keep`); how many went."""
    result = (
        await database(bindings)
        .prepare(
            "DELETE FROM memory_episodes WHERE tenant_id = ? AND instance_id = ? "
            "AND json_extract(data, '$.memory_key') = ? AND episode_id != ?"
        )
        .bind(tenant, agent_id, key, keep)
        .run()
    )
    return int(result.meta.changes or 0)


def semantic(bindings: Bindings, tenant: str) -> SemanticMemory:
    try:
        return SemanticMemory.from_bindings(bindings, tenant, config=retrieval_config(bindings))
    except Exception as exc:  # SemanticTierUnavailable
        raise ApiError(503, "semantic_unavailable", str(exc)) from None


async def semantic_items(
    bindings: Bindings, tenant: str, *, limit: int, offset: int
) -> list[MemoryItem]:
    """The tenant's active facts, newest first."""
    result = (
        await database(bindings)
        .prepare(
            "SELECT * FROM semantic_facts WHERE tenant_id = ? AND status = 'active' "
            "ORDER BY created_at DESC, fact_id DESC LIMIT ? OFFSET ?"
        )
        .bind(tenant, limit, offset)
        .all()
    )
    # Through the one row -> fact mapping, which opens sealed personal fields.
    facts = await open_facts(result.results, PersonalData.from_bindings(bindings, tenant))
    return [
        MemoryItem(
            tier="semantic",
            key=fact.subject,
            value=fact.content,
            metadata={**fact.metadata, "fact_id": fact.fact_id, "confidence": fact.confidence},
            created_at=fact.created_at,
        )
        for fact in facts
    ]


async def semantic_search(
    bindings: Bindings,
    tenant: str,
    query: str,
    limit: int,
    window: dict[str, float | None] | None = None,
) -> list[MemoryItem]:
    """Hybrid recall (vector + keyword + exact), best first; records `memory_retrieved`.
    `window`: the `valid_from_after` / `valid_from_before` time filter (epoch seconds)."""
    filters = RecallFilters.model_validate({k: v for k, v in (window or {}).items() if v})
    ranked = await semantic(bindings, tenant).rank(query, min(limit, 1000), filters, record=True)
    return [
        MemoryItem(
            tier="semantic",
            key=r.fact.subject,
            value=r.fact.content,
            metadata={**r.fact.metadata, "fact_id": r.fact.fact_id},
            created_at=r.fact.created_at,
            score=round(r.score, 6),
            score_breakdown={
                **breakdown_view(r.breakdown),
                "channels": {
                    n: {"rank": d.rank, "raw": round(d.raw, 6)} for n, d in r.channels.items()
                },
            },
        )
        for r in ranked.results
    ]


async def semantic_put(
    bindings: Bindings,
    tenant: str,
    agent_id: str,
    key: str,
    value: Any,
    metadata: dict[str, Any],
    ttl: int | None,
) -> MemoryItem:
    """Learn `value` (plain text) as a fact about `key`, through the write policy."""
    if not isinstance(value, str) or not value.strip():
        raise ApiError(422, "validation_error", "semantic values are non-blank plain text")
    now = bindings.clock.now()
    try:
        fact = FactInput(
            content=value,
            subject=key,
            metadata=metadata,
            source="memory_api",
            valid_from=now,
            valid_to=None if ttl is None else now + ttl,
        )
    except ValidationError as exc:
        raise ApiError(422, "validation_error", str(exc.errors()[0]["msg"])) from None
    learned = await semantic(bindings, tenant).learn(fact)
    if learned.error is not None:
        raise ApiError(502, "semantic_write_failed", learned.error)
    return MemoryItem(
        tier="semantic",
        key=key,
        value=value,
        metadata={
            **metadata,
            "fact_id": learned.fact_id,
            "status": learned.status,
            "created": learned.created,
        },
    )


async def procedural_items(
    bindings: Bindings, tenant: str, agent_id: str, agent_type: str
) -> list[MemoryItem]:
    """The workflows of `agent_type` as seen by instance `agent_id` (its Durable Object)."""
    if bindings.agents is None:
        raise ApiError(503, "agent_runtime_unavailable", "the AgentRuntime binding is missing")
    scope = AgentScope(tenant=tenant, agent_type=agent_type, instance_id=agent_id)
    stub = bindings.agents.get_by_name(scope.object_name)
    result = await stub.call(
        "workflows",
        {"tenant": tenant, "agent_type": agent_type, "instance_id": agent_id, "task_type": None},
    )
    error = result.get("error")
    if isinstance(error, dict):
        raise ApiError(
            int(error.get("status", 500)), str(error.get("code")), str(error.get("message"))
        )
    items = []
    for workflow in result.get("workflows", []):
        items.append(
            MemoryItem(
                tier="procedural",
                key=str(workflow["workflow_id"]),
                value=workflow,
                metadata={"posterior_mean": workflow.get("posterior_mean")},
                created_at=workflow.get("created_at"),
            )
        )
    return items
