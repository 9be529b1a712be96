"""The uniform memory API over the four tiers (ADR-29; docs/memory-api.md), behind memory tokens:
each handler checks the token (`authorize`: its agent, 403 `agent_forbidden`; tiers,
`tier_forbidden`; scopes, `scope_forbidden`), makes one call into `Memory`, which decides what
is allowed, and shapes the answer. A `next_cursor` is bound to its listing (422
`invalid_cursor`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from agent_memory.cursors import InvalidCursorError, decode_cursor_value, encode_cursor_value
from agent_memory.memory import ArchivedEpisode, Memory, MemoryItem
from agent_memory.namespace import AGENT_TYPE_PATTERN, SERVICE, NamespaceKey, is_instance
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.semantic.models import TimeWindow
from http_messages import ApiError
from worker.identity import MemoryTier, MemoryTokenClaims, Scope, confirmed_bindings
from worker.routing import Call, Metadata, StrictModel, Subject, has_control

MIN_TTL_SECONDS = 60
# A semantic fact's validity may run up to a century (working and episodic TTLs are
# bounded tighter below); an expiry stays far inside what storage binds.
MAX_TTL_SECONDS = 100 * 365 * 86_400


class MemoryQuery(StrictModel, TimeWindow):
    tier: MemoryTier | None = None
    query: str | None = Field(default=None, min_length=1, max_length=1024)
    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    # The procedural tier is read only when named: the token's own agent type (403 otherwise).
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)

    @field_validator("query")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or has_control(value)):
            raise ValueError("query must be non-blank text without control characters")
        return value


class MemoryDeleteQuery(StrictModel):
    tier: MemoryTier


class MemoryWrite(StrictModel):
    tier: MemoryTier
    key: str = Field(min_length=1, max_length=128)
    value: Any
    ttl: int | None = Field(default=None, ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS)
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("value")
    @classmethod
    def _present(cls, value: Any) -> Any:
        # null would read back as "missing" (working) or an empty episode: refuse it.
        if value is None:
            raise ValueError("value must not be null; DELETE the key instead")
        return value


class MemoryPage(BaseModel):
    tenant: str
    agent_id: str
    tier: MemoryTier | None
    query: str | None
    tiers_searched: list[MemoryTier]
    items: list[MemoryItem]
    next_cursor: str | None


class MemoryWritten(BaseModel):
    tenant: str
    agent_id: str
    item: MemoryItem


class MemoryDeleted(BaseModel):
    tenant: str
    agent_id: str
    tier: MemoryTier
    key: str
    deleted: bool


class ArchivePageQuery(StrictModel):
    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)


class ArchiveQuery(ArchivePageQuery):
    subject: Subject | None = None


class TieredEpisode(BaseModel):
    """An episode read through the hot/warm/cold client, with where it was found."""

    tenant: str
    agent_id: str
    item_key: str
    namespace_key: str
    found_in: Literal["hot", "warm", "cold"]
    promoted_to: list[Literal["hot", "warm"]]
    episode: Episode


class ArchivePage(BaseModel):
    tenant: str
    agent_id: str
    namespace_key: str
    subject: str | None
    items: list[ArchivedEpisode]
    next_cursor: str | None


class SubjectArchivePage(BaseModel):
    tenant: str
    subject: str
    items: list[ArchivedEpisode]
    next_cursor: str | None


def authorize(
    claims: MemoryTokenClaims,
    agent_id: str,
    tier: str | None,
    scope: Scope,
    agent_type: str | None = None,
) -> None:
    """Refuse (403) unless the token is for this agent (its id and, when the call names
    one, its type), may use `tier` and may `scope`."""
    if not is_instance(agent_id) or agent_id != claims.agent_id:
        raise ApiError(403, "agent_forbidden", "this token is for another agent")
    if agent_type is not None and agent_type != claims.agent_type:
        raise ApiError(403, "agent_forbidden", "this token is for another agent type")
    if scope not in claims.scopes:
        raise ApiError(403, "scope_forbidden", f"this token may not {scope}")
    if tier is not None and tier not in claims.tiers:
        raise ApiError(403, "tier_forbidden", f"this token may not use the {tier} tier")


def _listing_id(agent_id: str, q: MemoryQuery) -> str:
    """What a cursor is bound to: an offset is only good for the listing it came from."""
    fields = [agent_id, q.tier, q.query, q.agent_type, q.valid_from_after, q.valid_from_before]
    fields.append(q.reference_date)
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]


def _offset(query: MemoryQuery, listing: str) -> int:
    if query.cursor is None:
        return 0
    try:
        data = decode_cursor_value(query.cursor)
        offset, owner = data["o"], data["l"]
    except (InvalidCursorError, TypeError, KeyError):
        raise ApiError(422, "invalid_cursor", "cursor is not one this API issued") from None
    if owner != listing or not isinstance(offset, int) or not 0 <= offset <= 100_000:
        raise ApiError(422, "invalid_cursor", "cursor belongs to another listing")
    return offset


async def read_memory(call: Call[None, MemoryQuery]) -> MemoryPage:
    # Runs beside the token's deny-list lookup (`overlap_auth`): what it leaves for after
    # the response (events, recall statistics) waits for the token's confirmation.
    claims: MemoryTokenClaims = call.auth
    query = call.query
    bindings = confirmed_bindings(call.bindings, claims)
    agent_id = call.params["agent_id"]
    authorize(claims, agent_id, query.tier, "read", query.agent_type)
    if query.tier is None and query.query is None:
        raise ApiError(422, "tier_or_query_required", "give a tier to list, or a query to search")
    if query.tier == "procedural" and query.agent_type is None:
        raise ApiError(422, "agent_type_required", "the procedural tier needs ?agent_type=")
    listing = _listing_id(agent_id, query)
    offset = _offset(query, listing)
    if query.tier is not None:
        searched: list[MemoryTier] = [query.tier]
    else:
        searched = [t for t in claims.tiers if t != "procedural" or query.agent_type is not None]
    memory = await Memory.open(bindings, claims.tenant)
    if query.query is None:
        assert query.tier is not None
        page = await memory.listing(
            query.tier, agent_id, agent_type=claims.agent_type, limit=query.limit + 1, offset=offset
        )
        more = len(page) > query.limit  # one more read: is there a next page?
    else:
        window = query.model_dump(
            include={"valid_from_after", "valid_from_before", "reference_date"}
        )
        page, more = await memory.search(
            query.query,
            searched,
            agent_id,
            agent_type=claims.agent_type,
            limit=query.limit,
            offset=offset,
            window=window,
        )
    return MemoryPage(
        tenant=claims.tenant,
        agent_id=agent_id,
        tier=query.tier,
        query=query.query,
        tiers_searched=searched,
        items=page[: query.limit],
        next_cursor=encode_cursor_value({"o": offset + query.limit, "l": listing})
        if more
        else None,
    )


async def write_memory(call: Call[MemoryWrite, None]) -> MemoryWritten:
    # Runs beside the token's deny-list lookup (`overlap_auth`): working and semantic
    # writes make their reads meanwhile and write once it is confirmed (`WriteGate.admitted`);
    # an episode is written only after it.
    claims: MemoryTokenClaims = call.auth
    body, agent_id = call.body, call.params["agent_id"]
    authorize(claims, agent_id, body.tier, "write")
    if body.tier not in ("working", "semantic"):
        await claims.confirm()
    bindings = confirmed_bindings(call.bindings, claims)
    memory = await Memory.open(bindings, claims.tenant, admitted=claims.confirm)
    item = await memory.put(
        body.tier,
        agent_id,
        body.key,
        body.value,
        agent_type=claims.agent_type,
        metadata=body.metadata,
        ttl=body.ttl,
    )
    return MemoryWritten(tenant=claims.tenant, agent_id=agent_id, item=item)


async def delete_memory(call: Call[None, MemoryDeleteQuery]) -> MemoryDeleted:
    claims: MemoryTokenClaims = call.auth
    query, agent_id, key = call.query, call.params["agent_id"], call.params["key"]
    authorize(claims, agent_id, query.tier, "write")
    memory = await Memory.open(call.bindings, claims.tenant)
    deleted = await memory.delete(query.tier, agent_id, key, agent_type=claims.agent_type)
    return MemoryDeleted(
        tenant=claims.tenant, agent_id=agent_id, tier=query.tier, key=key, deleted=deleted
    )


async def read_episode(call: Call[None, None]) -> TieredEpisode:
    claims: MemoryTokenClaims = call.auth
    agent_id = call.params["agent_id"]
    authorize(claims, agent_id, "episodic", "read")
    memory = await Memory.open(call.bindings, claims.tenant)
    item, found, episode = await memory.episode(
        claims.agent_type, agent_id, call.params["episode_id"]
    )
    return TieredEpisode(
        tenant=claims.tenant,
        agent_id=agent_id,
        item_key=item.key,
        namespace_key=item.namespace_key,
        found_in=found.tier,
        promoted_to=[t for t in found.promoted_to if t != "cold"],
        episode=episode,
    )


async def list_archive(call: Call[None, ArchiveQuery]) -> ArchivePage:
    claims: MemoryTokenClaims = call.auth
    query, agent_id = call.query, call.params["agent_id"]
    authorize(claims, agent_id, "episodic", "read")
    ns = NamespaceKey(SERVICE, claims.tenant, agent_id)
    memory = await Memory.open(call.bindings, claims.tenant)
    items, cursor = await memory.archived(
        ns, query.subject, limit=query.limit, cursor=query.cursor, agent_type=claims.agent_type
    )
    return ArchivePage(
        tenant=claims.tenant,
        agent_id=agent_id,
        namespace_key=ns.key,
        subject=query.subject,
        items=items,
        next_cursor=cursor,
    )


async def subject_archive(call: Call[None, ArchivePageQuery]) -> SubjectArchivePage:
    tenant, subject, query = call.params["tenant"], call.params["subject"], call.query
    memory = await Memory.open(call.bindings, tenant)
    items, cursor = await memory.archived(None, subject, limit=query.limit, cursor=query.cursor)
    return SubjectArchivePage(tenant=tenant, subject=subject, items=items, next_cursor=cursor)
