"""The memory API over the hot/warm/cold client (the hot/warm/cold ADR; docs/memory-api.md):

    GET /api/v1/memory/{agent_id}/episodes/{episode_id}     one episode, from whichever tier
    GET /api/v1/memory/{agent_id}/archive?subject=&limit=&cursor=
                                                             the agent's archived (cold) episodes
    GET /admin/tenants/{tenant}/subjects/{subject}/archive?limit=&cursor=
                                                             a subject's archived episodes across
                                                             the tenant's agents (Access, operator)

The first two need a memory token for `agent_id` with scope `read` and the `episodic` tier (the same
checks as `worker.memory_routes`, before anything is read). The item key is built from the
token's tenant and the path's agent, so a caller can only ever name its own namespace
(`<service>:<tenant>:<agent_id>`); another tenant's episode with the same id is a 404.

The episode read goes through `MemoryClient.get`: hot (KV) → warm (D1) → cold (the archive
and its index), promoting a warm or cold hit to hot (never an item marked personal); the
answer says where it was found (`found_in`) and where it was copied (`promoted_to`). Every
tier's text becomes the model through one mapping (`agent_memory.hot_warm_cold.open_episode_item`,
which also opens sealed personal fields).
The archive listing pages the cold index newest first, optionally for one `subject`, and
reads each episode from its archive object.

Errors: 404 `episode_not_found`; 422 `invalid_namespace_key` (an id outside the key
grammar), `invalid_cursor`; 503 `episodic_unavailable` (no D1), `cold_unavailable` (no R2).
"""

from __future__ import annotations

from agent_memory.cursors import InvalidCursorError
from agent_memory.hot_warm_cold import open_episode_item
from agent_memory.memory import Memory, MemoryUnavailable
from agent_memory.namespace import SERVICE, InvalidNamespaceKey, ItemKey, NamespaceKey
from agent_memory.tiers.working import ReadCounts
from bindings.environment import Bindings
from worker.errors import ApiError
from worker.memory_models import (
    ArchivedEpisode,
    ArchivePage,
    ArchivePageQuery,
    ArchiveQuery,
    SubjectArchivePage,
    TieredEpisode,
)
from worker.memory_routes import authorize
from worker.router import Call


def _item(tenant: str, agent_id: str, episode_id: str) -> ItemKey:
    try:
        return ItemKey.build(tenant, agent_id, "episode", episode_id)
    except InvalidNamespaceKey as exc:
        raise ApiError(422, exc.code, str(exc)) from None


async def read_episode(call: Call[None, None]) -> TieredEpisode:
    claims, bindings, agent_id = call.token, call.bindings, call.params["agent_id"]
    authorize(claims, agent_id, "episodic", "read")
    item = _item(claims.tenant, agent_id, call.params["episode_id"])
    memory = Memory(bindings, claims.tenant, read_counts=ReadCounts())
    if bindings.db is None:
        raise MemoryUnavailable("episodic_unavailable", "the D1 binding is missing")
    found = await memory.placement_client().get(item.key)
    await memory.flush_read_counts()
    if found is None:
        raise ApiError(404, "episode_not_found", "no episode with this id for this agent")
    return TieredEpisode(
        tenant=claims.tenant,
        agent_id=agent_id,
        item_key=item.key,
        namespace_key=item.namespace_key,
        found_in=found.tier,
        promoted_to=[t for t in found.promoted_to if t != "cold"],
        episode=await open_episode_item(found.value, memory.personal),
    )


async def list_archive(call: Call[None, ArchiveQuery]) -> ArchivePage:
    claims, query, agent_id = call.token, call.query, call.params["agent_id"]
    authorize(claims, agent_id, "episodic", "read")
    namespace = NamespaceKey(SERVICE, claims.tenant, agent_id)
    items, next_cursor = await _archived(
        call.bindings, claims.tenant, query, namespace=namespace, subject=query.subject
    )
    return ArchivePage(
        tenant=claims.tenant,
        agent_id=agent_id,
        namespace_key=namespace.key,
        subject=query.subject,
        items=items,
        next_cursor=next_cursor,
    )


async def _archived(
    bindings: Bindings,
    tenant: str,
    query: ArchivePageQuery,
    *,
    namespace: NamespaceKey | None,
    subject: str | None,
) -> tuple[list[ArchivedEpisode], str | None]:
    """One page of the cold index, each episode read from its archive object."""
    memory = Memory(bindings, tenant)
    cold = memory.cold_archive()
    try:
        page = await cold.history(
            tenant, namespace=namespace, subject=subject, limit=query.limit, cursor=query.cursor
        )
    except InvalidCursorError:
        raise ApiError(422, "invalid_cursor", "cursor is not one this API issued") from None
    items = []
    personal = memory.personal
    for entry in page.items:
        text = await cold.download_text(entry.item_key)
        if text is not None:  # erased between the index read and the object read
            items.append(
                ArchivedEpisode(
                    item_key=entry.item_key,
                    archived_at=entry.archived_at,
                    episode=await open_episode_item(text, personal),
                )
            )
    return items, page.next_cursor


async def subject_archive(call: Call[None, ArchivePageQuery]) -> SubjectArchivePage:
    """An operator's view of one subject's archived history across the tenant's agents."""
    tenant, subject = call.params["tenant"], call.params["subject"]
    items, next_cursor = await _archived(
        call.bindings, tenant, call.query, namespace=None, subject=subject
    )
    return SubjectArchivePage(tenant=tenant, subject=subject, items=items, next_cursor=next_cursor)
