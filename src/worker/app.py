"""The Worker's request handling in plain Python: routing, limits and error mapping.

`handle` is what the Cloudflare entry (`worker.entry.Default.fetch`) and the local runtime
both call, so the same code answers on the edge and on a laptop.

`ROUTES` is the one route table. Importing this module is part of the Worker's start-up
(what the deploy snapshots, under Cloudflare's start-up CPU limit): a handler imported
here loads at start-up, a `lazy("module:attribute")` one on its route's first request.
Only health and the tool gateway (the KV-only hot path, MCP) are imported; a new route
is lazy unless every request may need it (docs/pyodide.md "Start-up";
tests/core/test_startup_imports.py holds the rule).
"""

from __future__ import annotations

import hashlib
import logging

from agent_memory.cursors import InvalidCursorError
from bindings.environment import Bindings
from bindings.ports.errors import BindingLimitError
from gateway.routes import (
    mcp_not_allowed_route,
    mcp_post_route,
    register_memory_dispatcher,
    tool_call_route,
)
from http_messages import HttpRequest, HttpResponse
from worker.errors import ApiError, internal_error, payload_too_large
from worker.health import healthz
from worker.memory_wiring import SemanticDispatcher
from worker.router import Handler, LazyHandler, Router

log = logging.getLogger(__name__)


def lazy(target: str) -> Handler[Bindings]:
    """The handler `"module:attribute"`, imported on its route's first request."""
    return LazyHandler[Bindings](target)


# Every route, in match order. Imported at start-up (what the deploy snapshots): health and
# the tool gateway (the KV-only hot path and MCP). Every other handler is `lazy`: its module
# loads on the route's first request (docs/pyodide.md "Start-up").
ROUTES: tuple[tuple[str, str, Handler[Bindings]], ...] = (
    ("GET", "/healthz", healthz),
    ("GET", "/openapi.json", lazy("worker.openapi:openapi_route")),
    # The tool gateway (src/gateway): the KV-only hot path and MCP (stateless, POST only).
    ("POST", "/api/v1/tools/{tool_name}", tool_call_route),
    ("POST", "/mcp", mcp_post_route),
    ("GET", "/mcp", mcp_not_allowed_route),
    ("DELETE", "/mcp", mcp_not_allowed_route),
    # OAuth 2.1 for MCP clients (src/worker/oauth; docs/gateway.md "OAuth"): metadata, the
    # Access-gated authorization endpoint, token / revocation / registration, and an
    # operator's list / revoke of a tenant's connected clients.
    (
        "GET",
        "/.well-known/oauth-authorization-server",
        lazy("worker.oauth.metadata:authorization_server_route"),
    ),
    (
        "GET",
        "/.well-known/oauth-protected-resource",
        lazy("worker.oauth.metadata:protected_resource_route"),
    ),
    (
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        lazy("worker.oauth.metadata:mcp_protected_resource_route"),
    ),
    ("GET", "/authorize", lazy("worker.oauth.authorize:authorize_get")),
    ("POST", "/authorize", lazy("worker.oauth.authorize:authorize_post")),
    ("POST", "/token", lazy("worker.oauth.token_endpoint:token_route")),
    ("POST", "/revoke", lazy("worker.oauth.token_endpoint:revoke_route")),
    ("POST", "/register", lazy("worker.oauth.token_endpoint:register_route")),
    ("GET", "/admin/tenants/{tenant}/oauth-clients", lazy("worker.oauth.connected:list_route")),
    (
        "DELETE",
        "/admin/tenants/{tenant}/oauth-clients/{grant_id}",
        lazy("worker.oauth.connected:revoke_route"),
    ),
    # The admin agent-run path (Access gated): the only routes that reach a Durable Object.
    ("POST", "/v1/agents/{tenant}/{agent_type}/run", lazy("worker.agents_routes:run_agent")),
    (
        "POST",
        "/v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome",
        lazy("worker.agents_routes:record_outcome"),
    ),
    ("GET", "/admin/agents/{tenant}/runs", lazy("worker.agents_routes:list_runs")),
    ("GET", "/admin/agents/{tenant}/runs/{run_id}", lazy("worker.agents_routes:get_run")),
    (
        "GET",
        "/admin/agents/{tenant}/{agent_type}/workflows",
        lazy("worker.agents_routes:list_workflows"),
    ),
    (
        "GET",
        "/admin/agents/{tenant}/{agent_type}/pack-candidates",
        lazy("worker.agents_routes:pack_candidates"),
    ),
    # Workflow packs (Access gated): promote a proven workflow for every agent of a type.
    (
        "GET",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs",
        lazy("worker.pack_routes:list_packs"),
    ),
    (
        "POST",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs",
        lazy("worker.pack_routes:promote_pack"),
    ),
    (
        "DELETE",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs/{name}",
        lazy("worker.pack_routes:deprecate_pack"),
    ),
    # Semantic memory: admin fact deletion (Access gated).
    (
        "DELETE",
        "/admin/tenants/{tenant}/facts/{fact_id}",
        lazy("worker.facts_routes:delete_fact_route"),
    ),
    # The memory lifecycle (Access gated): retention, prune, reconcile, subject erase.
    (
        "GET",
        "/admin/tenants/{tenant}/lifecycle",
        lazy("worker.lifecycle_routes:get_tenant_lifecycle"),
    ),
    (
        "PUT",
        "/admin/tenants/{tenant}/lifecycle",
        lazy("worker.lifecycle_routes:put_tenant_lifecycle"),
    ),
    ("POST", "/admin/tenants/{tenant}/prune", lazy("worker.lifecycle_routes:prune_tenant")),
    (
        "POST",
        "/admin/tenants/{tenant}/reconcile",
        lazy("worker.lifecycle_routes:reconcile_tenant"),
    ),
    (
        "DELETE",
        "/admin/tenants/{tenant}/subjects/{subject}",
        lazy("worker.lifecycle_routes:erase_subject"),
    ),
    (
        "POST",
        "/admin/tenants/{tenant}/namespace-backfill",
        lazy("worker.lifecycle_routes:backfill_tenant_namespace"),
    ),
    # The memory inspector's read routes (Access gated; docs/inspector.md).
    ("GET", "/admin/tenants", lazy("worker.inspector_routes:list_tenants")),
    ("GET", "/admin/tenants/{tenant}/facts", lazy("worker.inspector_routes:list_facts")),
    ("GET", "/admin/tenants/{tenant}/facts/{fact_id}", lazy("worker.inspector_routes:get_fact")),
    ("GET", "/admin/tenants/{tenant}/events", lazy("worker.inspector_routes:list_events")),
    ("GET", "/admin/tenants/{tenant}/episodes", lazy("worker.inspector_routes:get_episodes")),
    (
        "POST",
        "/admin/tenants/{tenant}/recall/explain",
        lazy("worker.inspector_routes:explain_recall"),
    ),
    # The uniform memory API over the four tiers (agent tokens) and its token routes (ADR-29).
    ("GET", "/api/v1/memory/{agent_id}", lazy("worker.memory_routes:read_memory")),
    ("POST", "/api/v1/memory/{agent_id}", lazy("worker.memory_routes:write_memory")),
    ("DELETE", "/api/v1/memory/{agent_id}/{key}", lazy("worker.memory_routes:delete_memory")),
    (
        "POST",
        "/admin/tenants/{tenant}/memory-tokens",
        lazy("worker.memory_token_routes:mint_route"),
    ),
    (
        "DELETE",
        "/admin/tenants/{tenant}/memory-tokens/{jti}",
        lazy("worker.memory_token_routes:revoke_route"),
    ),
    (
        "GET",
        "/api/v1/memory/{agent_id}/episodes/{episode_id}",
        lazy("worker.memory_archive_routes:read_episode"),
    ),
    (
        "GET",
        "/api/v1/memory/{agent_id}/archive",
        lazy("worker.memory_archive_routes:list_archive"),
    ),
    (
        "GET",
        "/admin/tenants/{tenant}/subjects/{subject}/archive",
        lazy("worker.memory_archive_routes:subject_archive"),
    ),
)


def build_router() -> Router[Bindings]:
    router: Router[Bindings] = Router()
    for method, pattern, handler in ROUTES:
        router.add(method, pattern, handler)
    return router


ROUTER = build_router()
# MCP's recall_memory / store_memory: a cheap factory that imports the semantic memory on
# the first MCP request of a deployment with the semantic tier (worker.memory_wiring).
register_memory_dispatcher(SemanticDispatcher)


async def handle(request: HttpRequest, bindings: Bindings) -> HttpResponse:
    """Answer one request. Never raises: every failure is a JSON error response."""
    try:
        if len(request.body) > bindings.settings.max_body_bytes:
            raise payload_too_large(bindings.settings.max_body_bytes)
        handler, params = ROUTER.resolve(request.method, request.path)
        return await handler(request, params, bindings)
    except ApiError as exc:
        return exc.to_response()
    except BindingLimitError as exc:
        return ApiError(422, "limit_exceeded", str(exc)).to_response()
    except InvalidCursorError as exc:
        # Every paginated listing: a cursor the API did not hand out.
        return ApiError(422, "invalid_cursor", str(exc)).to_response()
    except Exception:
        # The path can carry a subject (the erase route): log its hash and size, not it.
        digest = hashlib.sha256(request.path.encode()).hexdigest()[:16]
        log.exception(
            "unhandled error on %s path sha256=%s (%d bytes)",
            request.method,
            digest,
            len(request.path),
        )
        return internal_error().to_response()
