"""The uniform memory API over the four tiers (ADR-29), behind agent-scoped tokens.

    GET    /api/v1/memory/{agent_id}?tier=&query=&limit=&cursor=&agent_type=
    POST   /api/v1/memory/{agent_id}            {tier, key, value, ttl?, metadata?}
    DELETE /api/v1/memory/{agent_id}/{key}?tier=
    POST   /admin/tenants/{tenant}/memory-tokens          mint (Cloudflare Access)
    DELETE /admin/tenants/{tenant}/memory-tokens/{jti}    revoke (Cloudflare Access)

Every `/api/v1/memory` route is declared `auth=MEMORY_TOKEN`, so the router verifies its
Bearer token first (`worker.memory_tokens.agent_token`); the tenant is the token's, and the
path's `agent_id` must be the token's (403 `agent_forbidden`), the tier one of its `tiers`
(403 `tier_forbidden`) and the operation in its `scopes` (403 `scope_forbidden`). Nothing
is read or written before those checks.

GET with `tier` lists that tier (working in key order, episodic and semantic newest first,
procedural by workflow), or ranks it for `query`. GET with `query` and no `tier` ranks every
tier the token may read (procedural only when `agent_type` names the agent's type) into one
list, each item with its tier, score and breakdown; one `memory_retrieved` event per tier.
Pages are `limit` items (1-100); `next_cursor` continues the same listing (422
`invalid_cursor` for a cursor from another listing).

Writes: working TTL 60-3600 s (default 3600) and the 128 KiB budget (413
`working_memory_budget_exceeded`); episodic TTL 60 s up to the retention (default it);
semantic values are plain text learned as facts (`ttl` sets the fact's `valid_to`);
procedural is read-only (405 `procedural_read_only` naming the promotion route, `Allow:
GET`). Semantic deletes are admin-only (405 `semantic_delete_admin_only` naming the admin
route, `Allow: GET, POST`). Keys
follow the working-memory key rule (`agent_memory.tiers.working.validate_key`): 422
`invalid_key`. A refused write writes nothing.
"""

from __future__ import annotations

import hashlib
import json

from agent_memory.cursors import InvalidCursorError, decode_cursor_value, encode_cursor_value
from agent_memory.governance.policy import WriteDenied
from agent_memory.memory import Memory, json_text
from agent_memory.scope import is_instance
from agent_memory.tiers.episodic import EpisodeLimitReached
from agent_memory.tiers.working import (
    WORKING_MEMORY_TTL_SECONDS,
    WorkingMemoryBudgetExceeded,
    WorkingMemoryError,
    WorkingMemoryWriteDenied,
    validate_key,
)
from bindings.environment import Bindings
from worker.errors import ApiError
from worker.memory_models import (
    MemoryDeleted,
    MemoryDeleteQuery,
    MemoryPage,
    MemoryQuery,
    MemoryWrite,
    MemoryWritten,
)
from worker.memory_tokens import MemoryTier, MemoryTokenClaims, Scope
from worker.router import Call

PROMOTION_ROUTE = "POST /admin/tenants/{tenant}/agents/{agent_type}/packs"
MAX_VALUE_CHARS = 32_768


# --- authorization ----------------------------------------------------------------------


def authorize(claims: MemoryTokenClaims, agent_id: str, tier: str | None, scope: Scope) -> None:
    if not is_instance(agent_id) or agent_id != claims.agent_id:
        raise ApiError(403, "agent_forbidden", "this token is for another agent")
    if scope not in claims.scopes:
        raise ApiError(403, "scope_forbidden", f"this token may not {scope}")
    if tier is not None and tier not in claims.tiers:
        raise ApiError(403, "tier_forbidden", f"this token may not use the {tier} tier")


def _key(raw: str) -> str:
    try:
        return validate_key(raw)
    except WorkingMemoryError as exc:
        raise ApiError(422, "invalid_key", str(exc)) from None


# --- cursors: an offset bound to the listing it came from -------------------------------


def _listing_id(agent_id: str, query: MemoryQuery) -> str:
    text = json.dumps(
        [
            agent_id,
            query.tier,
            query.query,
            query.agent_type,
            query.valid_from_after,
            query.valid_from_before,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def _cursor(offset: int, listing: str) -> str:
    return encode_cursor_value({"o": offset, "l": listing})


# --- reads -------------------------------------------------------------------------------


class RateLimited(ApiError):
    """429 with `Retry-After` (the binding's period: it reports no reset time)."""

    def __init__(self, tenant: str, period: int) -> None:
        super().__init__(
            429,
            "embedding_rate_limited",
            f"tenant {tenant!r} used its embedding budget; retry in {period} s",
            {"retry_after": period},
            headers={"retry-after": str(period)},
        )
        self.period = period


async def _embedding_budget(bindings: Bindings, tenant: str) -> None:
    """Count one embedding call for `tenant`; 429 when over budget (before any work)."""
    limiter = bindings.embed_rate_limiter
    if limiter is not None and not await limiter.limit(f"embed:{tenant}"):
        raise RateLimited(tenant, limiter.period_seconds)


async def read_memory(call: Call[None, MemoryQuery]) -> MemoryPage:
    claims, query, bindings = call.token, call.query, call.bindings
    agent_id = call.params["agent_id"]
    authorize(claims, agent_id, query.tier, "read")
    if query.tier is None and query.query is None:
        raise ApiError(422, "tier_or_query_required", "give a tier to list, or a query to search")
    if query.tier == "procedural" and query.agent_type is None:
        raise ApiError(422, "agent_type_required", "the procedural tier needs ?agent_type=")
    listing = _listing_id(agent_id, query)
    offset = _offset(query, listing)
    want = offset + query.limit + 1  # one more: is there a next page?
    if query.tier is not None:
        searched: list[MemoryTier] = [query.tier]
    else:
        searched = [t for t in claims.tiers if t != "procedural" or query.agent_type is not None]
    if query.query is not None and "semantic" in searched:
        await _embedding_budget(bindings, claims.tenant)  # the query is embedded once
    memory = Memory(bindings, claims.tenant)
    if query.query is None:
        assert query.tier is not None
        page = await memory.listing(
            query.tier, agent_id, limit=query.limit + 1, offset=offset, agent_type=query.agent_type
        )
    else:
        window = {
            "valid_from_after": query.valid_from_after,
            "valid_from_before": query.valid_from_before,
        }
        found = await memory.search(
            query.query, searched, agent_id, limit=want, agent_type=query.agent_type, window=window
        )
        page = found[offset:want]
    more = len(page) > query.limit
    return MemoryPage(
        tenant=claims.tenant,
        agent_id=agent_id,
        tier=query.tier,
        query=query.query,
        tiers_searched=searched,
        items=page[: query.limit],
        next_cursor=_cursor(offset + query.limit, listing) if more else None,
    )


# --- writes ------------------------------------------------------------------------------


def _read_only(tier: str) -> ApiError:
    return ApiError(
        405,
        "procedural_read_only",
        f"the procedural tier is read-only here; promote a stable workflow with {PROMOTION_ROUTE}",
        {"allowed": ["GET"], "promotion_route": PROMOTION_ROUTE, "tier": tier},
        headers={"allow": "GET"},
    )


async def _ttl(body: MemoryWrite, memory: Memory) -> int | None:
    if body.tier == "working":
        ttl = body.ttl or WORKING_MEMORY_TTL_SECONDS
        if ttl > WORKING_MEMORY_TTL_SECONDS:
            raise ApiError(422, "invalid_ttl", "working memory lives at most 3600 seconds")
        return ttl
    if body.tier == "episodic":
        # The tenant's retention (its override, else EPISODE_RETENTION_DAYS) bounds the TTL.
        lifecycle = await memory.lifecycle()
        retention = lifecycle.episode_retention_days * 86_400
        ttl = body.ttl or retention
        if ttl > retention:
            raise ApiError(422, "invalid_ttl", f"episodes live at most {retention} seconds")
        return ttl
    return body.ttl


async def write_memory(call: Call[MemoryWrite, None]) -> MemoryWritten:
    claims, body, bindings = call.token, call.body, call.bindings
    agent_id = call.params["agent_id"]
    authorize(claims, agent_id, body.tier, "write")
    if body.tier == "procedural":
        raise _read_only(body.tier)
    memory = Memory(bindings, claims.tenant)
    key, ttl = _key(body.key), await _ttl(body, memory)
    if len(json_text(body.value)) > MAX_VALUE_CHARS:
        raise ApiError(413, "value_too_large", f"value is over {MAX_VALUE_CHARS} characters")
    if body.tier == "semantic":
        await _embedding_budget(bindings, claims.tenant)
    try:
        item = await memory.put(
            body.tier, agent_id, key, body.value, metadata=body.metadata, ttl=ttl
        )
    except WorkingMemoryBudgetExceeded as exc:
        raise ApiError(
            413,
            "working_memory_budget_exceeded",
            str(exc),
            {"needed": exc.needed, "used": exc.used, "budget": exc.budget},
        ) from None
    except WorkingMemoryWriteDenied as exc:
        raise ApiError(422, "memory_write_denied", str(exc.denied)) from None
    except WriteDenied as exc:
        raise ApiError(422, "memory_write_denied", str(exc)) from None
    except EpisodeLimitReached as exc:
        raise ApiError(409, "episode_limit_reached", str(exc)) from None
    return MemoryWritten(tenant=claims.tenant, agent_id=agent_id, item=item)


async def delete_memory(call: Call[None, MemoryDeleteQuery]) -> MemoryDeleted:
    claims, query, bindings = call.token, call.query, call.bindings
    agent_id = call.params["agent_id"]
    authorize(claims, agent_id, query.tier, "write")
    if query.tier == "procedural":
        raise _read_only(query.tier)
    if query.tier == "semantic":
        raise ApiError(
            405,
            "semantic_delete_admin_only",
            "semantic facts are shared by the tenant; an operator deletes them with "
            "DELETE /admin/tenants/{tenant}/facts/{fact_id}",
            {
                "allowed": ["GET", "POST"],
                "admin_route": "DELETE /admin/tenants/{tenant}/facts/{fact_id}",
            },
            headers={"allow": "GET, POST"},
        )
    key = _key(call.params["key"])
    deleted = await Memory(bindings, claims.tenant).delete(query.tier, agent_id, key)
    return MemoryDeleted(
        tenant=claims.tenant, agent_id=agent_id, tier=query.tier, key=key, deleted=deleted
    )
