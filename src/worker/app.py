"""The Worker's request handling in plain Python: routing, limits and error mapping.

`handle` is what the Cloudflare entry (`worker.entry.Default.fetch`) and the local runtime
both call, so the same code answers on the edge and on a laptop.
"""

from __future__ import annotations

import hashlib
import logging

from agent_memory.cursors import InvalidCursorError
from bindings.environment import Bindings
from bindings.ports.errors import BindingLimitError
from gateway.routes import mcp_not_allowed_route, mcp_post_route, tool_call_route
from http_messages import HttpRequest, HttpResponse
from worker.agents_routes import add_agent_routes
from worker.errors import ApiError, internal_error, payload_too_large
from worker.facts_routes import add_semantic_memory
from worker.health import healthz
from worker.inspector_routes import add_inspector_routes
from worker.lifecycle_routes import add_lifecycle_routes
from worker.memory_archive_routes import add_archive_routes
from worker.memory_routes import add_memory_routes
from worker.openapi import openapi_route
from worker.pack_routes import add_pack_routes
from worker.router import Router

log = logging.getLogger(__name__)


def build_router() -> Router[Bindings]:
    router: Router[Bindings] = Router()
    router.add("GET", "/healthz", healthz)
    router.add("GET", "/openapi.json", openapi_route)
    # The tool gateway (src/gateway): the KV-only hot path and MCP (stateless, POST only).
    router.add("POST", "/api/v1/tools/{tool_name}", tool_call_route)
    router.add("POST", "/mcp", mcp_post_route)
    router.add("GET", "/mcp", mcp_not_allowed_route)
    router.add("DELETE", "/mcp", mcp_not_allowed_route)
    # The admin agent-run path (Access gated): the only routes that reach a Durable Object.
    add_agent_routes(router)
    # Workflow packs (Access gated): promote a proven workflow for every agent of a type.
    add_pack_routes(router)
    # Semantic memory: admin fact deletion (Access gated) and the memory tools' wiring.
    add_semantic_memory(router)
    # The memory lifecycle (Access gated): retention, prune, reconcile, subject erase.
    add_lifecycle_routes(router)
    # The memory inspector's read routes (Access gated; docs/inspector.md).
    add_inspector_routes(router)
    # The uniform memory API over the four tiers (agent tokens) and its token routes (ADR-29).
    add_memory_routes(router)
    add_archive_routes(router)
    return router


ROUTER = build_router()


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
