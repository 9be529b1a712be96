"""Semantic memory at the edge: the admin delete route.

    DELETE /admin/tenants/{tenant}/facts/{fact_id}

Cloudflare Access gated (the router's gate answers 401/403 before anything else runs).
Deletes the fact's D1 row and its Vectorize vector; idempotent — deleting an absent fact
answers 200 with `"deleted": false`, and also removes a vector a failed earlier delete
left behind.
Deletion is admin-only (ADR-0030: agents store corrections, they do not delete).

    200 {"tenant", "fact_id", "deleted": bool, "vector_deleted": bool, "complete": bool}
    422 invalid_path            tenant or fact_id malformed
    503 semantic_unavailable    D1 or Vectorize not bound

`complete: false` means the row is gone but the vector delete failed: recall already
ignores that vector (it has no row), and repeating the DELETE removes it.

The memory tools (`recall_memory` / `store_memory` for agents and MCP clients, the
context-assembly prefetch) are wired by `worker.memory_wiring`.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent_memory.ids import is_ulid
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import SemanticTierUnavailable
from worker.errors import ApiError
from worker.router import Call


class FactDeleted(BaseModel):
    tenant: str
    fact_id: str
    deleted: bool
    vector_deleted: bool
    complete: bool


async def delete_fact(call: Call[None, None]) -> FactDeleted:
    tenant, fact_id = call.params["tenant"], call.params["fact_id"]
    if not is_ulid(fact_id):
        raise ApiError(422, "invalid_path", "fact_id must be a 26-character ULID")
    try:
        memory = SemanticMemory.from_bindings(call.bindings, tenant)
    except SemanticTierUnavailable as exc:
        raise ApiError(503, "semantic_unavailable", str(exc)) from None
    result = await memory.delete(fact_id)
    return FactDeleted(
        tenant=tenant,
        fact_id=fact_id,
        deleted=result.row_deleted,
        vector_deleted=result.vector_deleted,
        complete=result.complete,
    )
