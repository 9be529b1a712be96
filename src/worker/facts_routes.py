"""Semantic memory at the edge: the admin delete route, and wiring the memory tools.

    DELETE /admin/tenants/{tenant}/facts/{fact_id}

Cloudflare Access gated (401/403 before anything else runs). Deletes the fact's D1 row
and its Vectorize vector; idempotent — deleting an absent fact answers 200 with
`"deleted": false`, and also removes a vector a failed earlier delete left behind.
Deletion is admin-only (ADR-0030: agents store corrections, they do not delete).

    200 {"tenant", "fact_id", "deleted": bool, "vector_deleted": bool, "complete": bool}
    422 invalid_path            tenant or fact_id malformed
    503 semantic_unavailable    D1 or Vectorize not bound

`complete: false` means the row is gone but the vector delete failed: recall already
ignores that vector (it has no row), and repeating the DELETE removes it.

`add_semantic_memory(router)` adds the route and installs the tools: `recall_memory` /
`store_memory` for `long_term_enabled` agents, the context-assembly prefetch, and the
gateway's memory dispatcher for MCP clients.
"""

from __future__ import annotations

from agent_memory.agent.memory_tools import (
    SemanticMemoryDispatcher,
    install,
    register_write_observer,
)
from agent_memory.ids import is_ulid
from agent_memory.tiers.semantic import SemanticMemory, SemanticTierUnavailable
from bindings.environment import Bindings
from gateway.routes import register_memory_dispatcher
from http_messages import HttpRequest, HttpResponse, json_response
from worker.access import AccessIdentity, access_gated
from worker.errors import ApiError
from worker.lifecycle_jobs import reconcile_after_writes
from worker.path_params import tenant_param
from worker.router import Router

FACT_ROUTE = "/admin/tenants/{tenant}/facts/{fact_id}"


async def _delete_fact(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant, fact_id = tenant_param(params), params["fact_id"]
    if not is_ulid(fact_id):
        raise ApiError(422, "invalid_path", "fact_id must be a 26-character ULID")
    try:
        memory = SemanticMemory.from_bindings(bindings, tenant)
    except SemanticTierUnavailable as exc:
        raise ApiError(503, "semantic_unavailable", str(exc)) from None
    result = await memory.delete(fact_id)
    return json_response(
        {
            "tenant": tenant,
            "fact_id": fact_id,
            "deleted": result.row_deleted,
            "vector_deleted": result.vector_deleted,
            "complete": result.complete,
        }
    )


delete_fact_route = access_gated(_delete_fact)


def add_semantic_memory(router: Router[Bindings]) -> None:
    """Add the admin route and install the memory tools (agents, prefetch, MCP)."""
    router.add("DELETE", FACT_ROUTE, delete_fact_route)
    install()
    register_memory_dispatcher(SemanticMemoryDispatcher)
    # New facts count towards the tenant's next background reconcile (issue 16).
    register_write_observer(reconcile_after_writes)
