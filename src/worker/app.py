"""The Worker's route table (`ROUTES`: reading it is reading the API) and `handle`, what the
Cloudflare entry and the local runtime call. Only health, the gateway's hot path and MCP are
imported at start-up; every other route is `lazy("module:attribute")` (docs/pyodide.md
"Start-up"). The machinery is `worker.routing`.
"""

from __future__ import annotations

import dataclasses
import platform
from typing import Any, Literal

from pydantic import VERSION, BaseModel

from bindings.environment import Bindings
from gateway.mcp import MemoryToolDispatcher
from gateway.routes import McpRoute, MemoryDispatcherFactory, mcp_not_allowed_route, tool_call_route
from http_messages import HttpResponse, json_response
from worker.routing import API_KEY, Auth, Call, Route, Router, lazy

ACCESS = Auth(
    "cloudflareAccess",
    {"type": "apiKey", "in": "header", "name": "Cf-Access-Jwt-Assertion"},
    lazy("worker.identity:operator"),
)

# Any verified Access caller; the handler answers with what the caller's grants allow.
ACCESS_SIGNED_IN = dataclasses.replace(ACCESS, gate=lazy("worker.identity:signed_in"))

MEMORY_TOKEN = Auth(
    "memoryToken",
    {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
    lazy("worker.identity:agent_token"),
)


class Health(BaseModel):
    status: Literal["ok"]
    environment: str
    bindings: dict[str, bool]
    embedding: dict[str, Any] | None
    runtime: dict[str, str]  # what the deploy runs: `agent-memory smoke` compares it


async def healthz(call: Call[None, None]) -> Health:
    """Which bindings this deployment has, and the embedding config."""
    bindings = call.bindings
    embedding = dataclasses.asdict(bindings.embedder.config) if bindings.embedder else None
    return Health(
        status="ok",
        environment=bindings.settings.environment,
        bindings=bindings.present(),
        embedding=embedding,
        runtime={"python": platform.python_version(), "pydantic": VERSION},
    )


async def openapi_route(call: Call[None, None]) -> HttpResponse:
    """This API's OpenAPI document, from the route table (`worker.openapi`, imported on
    first use)."""
    from worker.openapi import document

    return json_response(document(ROUTES))


def semantic_dispatcher(bindings: Bindings) -> MemoryToolDispatcher:
    """MCP's memory tools (`agent_memory.agent.memory_tools`), imported on the first MCP
    request so they stay out of the start-up; the gateway never imports the core."""
    from agent_memory.agent.memory_tools import McpMemoryTools

    return McpMemoryTools(bindings)


# fmt: off
def routes(memory_tools: MemoryDispatcherFactory | None = semantic_dispatcher) -> tuple[Route, ...]:
    """Every route, in match order (model names are looked up in the handler's module);
    `memory_tools` builds the dispatcher of MCP's memory tools."""
    mcp_post_route = McpRoute(memory_tools)
    return (
        Route("GET", "/healthz", healthz,
              "Which bindings this deployment has", "meta", response=Health),
        Route("GET", "/openapi.json", openapi_route,
              "This document (OpenAPI 3.1)", "meta"),
        # The tool gateway (src/gateway): the KV-only hot path and MCP (stateless, POST only).
        # API keys are the gateway's own business, checked on the hot path.
        Route("POST", "/api/v1/tools/{tool_name}", tool_call_route,
              "Call a proxied tool (the KV-only hot path) with arguments its input_schema accepts: "
              "the upstream's status and body (x-upstream-status), or a gateway error "
              "(x-gateway-error)", "gateway", auth=API_KEY),
        Route("POST", "/mcp", mcp_post_route,
              "MCP Streamable HTTP (revisions 2025-06-18, 2025-11-25, 2026-07-28): one JSON-RPC "
              "message per POST, answered in JSON-RPC form (202 for a notification); API key or "
              "OAuth access token", "gateway", auth=API_KEY, cors=True),
        Route("GET", "/mcp", mcp_not_allowed_route,
              "No SSE stream on this stateless server: 405, or 401 without credentials",
              "gateway", cors=True),
        Route("DELETE", "/mcp", mcp_not_allowed_route,
              "No sessions on this stateless server: 405, or 401 without credentials",
              "gateway", cors=True),
        # OAuth 2.1 for MCP clients (docs/gateway.md "OAuth"): /authorize checks Cloudflare
        # Access itself (anyone with an Access login may consent, for a tenant of their grants).
        Route("GET", "/.well-known/oauth-authorization-server",
              lazy("worker.oauth.protocol:authorization_server_route"),
              "OAuth 2.0 authorization server metadata (RFC 8414)", "oauth", cors=True),
        Route("GET", "/.well-known/oauth-protected-resource",
              lazy("worker.oauth.protocol:protected_resource_route"),
              "Protected resource metadata (RFC 9728)", "oauth", cors=True),
        Route("GET", "/.well-known/oauth-protected-resource/mcp",
              lazy("worker.oauth.protocol:protected_resource_route"),
              "Protected resource metadata of /mcp (RFC 9728)", "oauth", cors=True),
        Route("GET", "/authorize", lazy("worker.oauth.endpoints:authorize_get"),
              "Authorization endpoint (Cloudflare Access): the consent page", "oauth"),
        Route("POST", "/authorize", lazy("worker.oauth.endpoints:authorize_post"),
              "The consent page's answer", "oauth"),
        Route("POST", "/token", lazy("worker.oauth.endpoints:token_route"),
              "Token endpoint: authorization_code (PKCE S256) and refresh_token", "oauth",
              cors=True),
        Route("POST", "/revoke", lazy("worker.oauth.endpoints:revoke_route"),
              "Token revocation (RFC 7009)", "oauth", cors=True),
        Route("POST", "/register", lazy("worker.oauth.endpoints:register_route"),
              "Dynamic client registration (RFC 7591): 429 past 10 a minute per address",
              "oauth", cors=True),
        Route("GET", "/admin/tenants/{tenant}/oauth-clients",
              lazy("worker.oauth.protocol:connected_clients_route"),
              "The tenant's connected OAuth clients", "oauth", auth=ACCESS),
        Route("DELETE", "/admin/tenants/{tenant}/oauth-clients/{grant_id}",
              lazy("worker.oauth.protocol:revoke_client_route"),
              "Revoke a connected client's grant", "oauth", auth=ACCESS),
        # The admin agent-run path: the only routes that reach a Durable Object.
        Route("POST", "/v1/agents/{tenant}/{agent_type}/run",
              lazy("worker.agents_routes:run_agent"),
              "Run one agent turn", "agents", auth=ACCESS, body="RunBody", response="RunResult"),
        Route("POST", "/v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome",
              lazy("worker.agents_routes:record_outcome"),
              "Score a run (procedural memory)", "agents", auth=ACCESS, body="OutcomeBody",
              response="OutcomeResult"),
        Route("GET", "/admin/agents/{tenant}/runs", lazy("worker.agents_routes:list_runs"),
              "List runs", "agents", auth=ACCESS, query="RunsQuery", response="RunPage"),
        Route("GET", "/admin/agents/{tenant}/runs/{run_id}", lazy("worker.agents_routes:get_run"),
              "A run with its episodes and log", "agents", auth=ACCESS, response="RunDetail"),
        Route("GET", "/admin/agents/{tenant}/{agent_type}/workflows",
              lazy("worker.agents_routes:list_workflows"),
              "The bandit's workflows", "agents", auth=ACCESS, query="WorkflowsQuery",
              response="Workflows"),
        Route("GET", "/admin/agents/{tenant}/{agent_type}/pack-candidates",
              lazy("worker.agents_routes:pack_candidates"),
              "Workflows ready to pack", "agents", auth=ACCESS, query="CandidatesQuery",
              response="PackCandidates"),
        # Workflow packs: promote a proven workflow for every agent of a type.
        Route("GET", "/admin/tenants/{tenant}/agents/{agent_type}/packs",
              lazy("worker.agents_routes:list_packs"),
              "Every version of every workflow pack of the agent type", "agents", auth=ACCESS,
              response="PackList"),
        Route("POST", "/admin/tenants/{tenant}/agents/{agent_type}/packs",
              lazy("worker.agents_routes:promote_pack"),
              "Promote an instance's stable workflow into the next version of a named pack",
              "agents", auth=ACCESS, body="PromotePack", response="PackPromoted", status=201),
        Route("DELETE", "/admin/tenants/{tenant}/agents/{agent_type}/packs/{name}",
              lazy("worker.agents_routes:deprecate_pack"),
              "Deprecate the active version of a pack", "agents", auth=ACCESS,
              response="PackDeprecated"),
        # Semantic memory: admin fact deletion.
        Route("DELETE", "/admin/tenants/{tenant}/facts/{fact_id}",
              lazy("worker.inspector_routes:delete_fact"),
              "Delete a fact and its vector", "memory", auth=ACCESS, response="FactDeleted"),
        # The memory lifecycle: retention, prune, reconcile, subject erase, namespace backfill.
        Route("GET", "/admin/tenants/{tenant}/lifecycle",
              lazy("worker.lifecycle_jobs:get_tenant_lifecycle"),
              "Lifecycle settings and today's brief", "lifecycle", auth=ACCESS,
              response="LifecycleView"),
        Route("PUT", "/admin/tenants/{tenant}/lifecycle",
              lazy("worker.lifecycle_jobs:put_tenant_lifecycle"),
              "Override retention or the episode limit", "lifecycle", auth=ACCESS,
              body="LifecycleUpdate", response="LifecycleSettingsView"),
        Route("POST", "/admin/tenants/{tenant}/prune", lazy("worker.lifecycle_jobs:prune_tenant"),
              "Prune the tenant now", "lifecycle", auth=ACCESS, body="PruneBody",
              body_required=False, response="PruneView"),
        Route("POST", "/admin/tenants/{tenant}/reconcile",
              lazy("worker.lifecycle_jobs:reconcile_tenant"),
              "Run the reconciler for the tenant", "lifecycle", auth=ACCESS, body="EmptyBody",
              body_required=False, response="ReconcileReport"),
        Route("POST", "/admin/tenants/{tenant}/facts/{fact_id}/restore",
              lazy("worker.lifecycle_jobs:restore_fact"),
              "Undo a fact's supersession or merge: it is live again (the event names who)",
              "lifecycle", auth=ACCESS, body="EmptyBody", body_required=False,
              response="SupersessionView"),
        Route("POST", "/admin/tenants/{tenant}/events/{event_id}/replay",
              lazy("worker.lifecycle_jobs:replay_supersession"),
              "Apply again the supersession a memory_written event records", "lifecycle",
              auth=ACCESS, body="EmptyBody", body_required=False, response="SupersessionView"),
        Route("DELETE", "/admin/tenants/{tenant}/subjects/{subject}",
              lazy("worker.lifecycle_jobs:erase_subject"),
              "Erase a subject from every tier", "lifecycle", auth=ACCESS, response="EraseView"),
        Route("POST", "/admin/tenants/{tenant}/namespace-backfill",
              lazy("worker.lifecycle_jobs:backfill_tenant_namespace"),
              "Copy the tenant's legacy working-memory KV keys to canonical item keys (one bounded "
              "step; repeat with next_cursor). Never deletes a key", "lifecycle", auth=ACCESS,
              body="BackfillBody", body_required=False, response="BackfillView"),
        # Memory that leaves and arrives, and the change feed (docs/portability.md).
        Route("POST", "/admin/tenants/{tenant}/exports",
              lazy("worker.portability_routes:start_export"),
              "Export the tenant as a background job writing JSON Lines parts to R2 (personal "
              "data sealed unless asked opened, which is an event)", "portability", auth=ACCESS,
              body="ExportBody", body_required=False, response="PortabilityJob", status=202),
        Route("GET", "/admin/tenants/{tenant}/exports",
              lazy("worker.portability_routes:list_exports"),
              "The tenant's exports and their progress", "portability", auth=ACCESS,
              response="ExportList"),
        Route("GET", "/admin/tenants/{tenant}/exports/{job_id}",
              lazy("worker.portability_routes:get_export"),
              "One export and its progress", "portability", auth=ACCESS,
              response="PortabilityJob"),
        Route("GET", "/admin/tenants/{tenant}/exports/{job_id}/parts/{part}",
              lazy("worker.portability_routes:export_part"),
              "One part of a finished export (gzip JSON Lines; part 0 is the header)",
              "portability", auth=ACCESS),
        Route("GET", "/admin/tenants/{tenant}/subjects/{subject}/export",
              lazy("worker.portability_routes:export_subject"),
              "Everything about one subject across tiers and archives, as JSON Lines "
              "(?personal=opened: sealed fields opened, an event)", "portability", auth=ACCESS),
        Route("POST", "/admin/tenants/{tenant}/imports",
              lazy("worker.portability_routes:import_records"),
              "Import JSON Lines (this format, mem0's or plain texts) through the write gate; "
              "dry_run reports what would be written, merged or refused", "portability",
              auth=ACCESS, query="ImportQuery", response="ImportReport"),
        Route("GET", "/admin/tenants/{tenant}/webhooks",
              lazy("worker.portability_routes:list_webhooks"),
              "The change feed's endpoints and their latest deliveries", "portability",
              auth=ACCESS, response="WebhooksView"),
        Route("POST", "/admin/tenants/{tenant}/webhooks",
              lazy("worker.portability_routes:add_webhook"),
              "Register a webhook endpoint (its secret is shown once)", "portability",
              auth=ACCESS, body="EndpointBody", response="EndpointSaved", status=201),
        Route("PATCH", "/admin/tenants/{tenant}/webhooks/{endpoint_id}",
              lazy("worker.portability_routes:change_webhook"),
              "Pause or resume an endpoint, or rotate its secret", "portability", auth=ACCESS,
              body="EndpointChange", response="EndpointSaved"),
        Route("POST", "/admin/tenants/{tenant}/webhooks/{endpoint_id}/test",
              lazy("worker.portability_routes:test_webhook"),
              "Deliver a signed memory.test change now", "portability", auth=ACCESS,
              response="TestDelivery"),
        # Tenant placement across databases (docs/placement.md): platform admins.
        Route("GET", "/admin/shards", lazy("worker.lifecycle_jobs:list_shards"),
              "Each shard's database size and vector count against their limits, and its "
              "tenants", "placement", auth=ACCESS, response="ShardsView"),
        Route("GET", "/admin/moves", lazy("worker.lifecycle_jobs:list_tenant_moves"),
              "Every tenant move and where it stands", "placement", auth=ACCESS,
              response="MoveList"),
        Route("POST", "/admin/moves", lazy("worker.lifecycle_jobs:start_tenant_move"),
              "Move a tenant to another shard online (its first bounded step runs now)",
              "placement", auth=ACCESS, body="MoveBody", response="MoveStatus", status=202),
        Route("POST", "/admin/moves/advance", lazy("worker.lifecycle_jobs:advance_tenant_move"),
              "Carry a tenant's move forward one bounded step (resumes after a crash)",
              "placement", auth=ACCESS, body="MoveTenant", response="MoveStatus"),
        Route("POST", "/admin/moves/cancel", lazy("worker.lifecycle_jobs:cancel_tenant_move"),
              "Cancel a tenant's move before its switch: the source takes writes again at once, "
              "the target's copy is deleted in bounded steps (advance finishes it)",
              "placement", auth=ACCESS, body="MoveTenant", response="MoveStatus"),
        Route("POST", "/admin/moves/recheck", lazy("worker.lifecycle_jobs:recheck_tenant_move"),
              "Run again the check of a switched move that found rows differing between the "
              "frozen source and the target (after repairing them); its first step runs now",
              "placement", auth=ACCESS, body="MoveTenant", response="MoveStatus"),
        # The memory inspector's read routes (docs/inspector.md).
        Route("GET", "/admin/tenants", lazy("worker.inspector_routes:list_tenants"),
              "The tenants the caller may operate: for a platform admin every tenant that has "
              "runs, episodes, facts or events; for anyone else the tenants of its grants",
              "inspector", auth=ACCESS_SIGNED_IN, response="TenantsResponse"),
        Route("GET", "/admin/tenants/{tenant}/facts", lazy("worker.inspector_routes:list_facts"),
              "Facts with their status, filtered by status, subject, agent type or text",
              "inspector", auth=ACCESS, query="FactsQuery", response="FactPage"),
        Route("GET", "/admin/tenants/{tenant}/facts/{fact_id}",
              lazy("worker.inspector_routes:get_fact"),
              "One fact: supersession chain, links, provenance, written and retrieved history",
              "inspector", auth=ACCESS, response="FactDetail"),
        Route("GET", "/admin/tenants/{tenant}/events", lazy("worker.inspector_routes:list_events"),
              "Memory events by kind, tier, run and time", "inspector", auth=ACCESS,
              query="EventsQuery", response="EventPage"),
        Route("GET", "/admin/tenants/{tenant}/episodes",
              lazy("worker.inspector_routes:get_episodes"),
              "Episodes by id (what a run recalled)", "inspector", auth=ACCESS,
              query="EpisodesQuery", response="EpisodesResponse"),
        Route("POST", "/admin/tenants/{tenant}/recall/explain",
              lazy("worker.inspector_routes:explain_recall"),
              "Why this recall: ranked results with channel ranks and weighted score parts",
              "inspector", auth=ACCESS, body="ExplainBody", response="ExplainResponse"),
        # The uniform memory API over the four tiers (ADR-29), and its tokens.
        Route("GET", "/api/v1/memory/{agent_id}", lazy("worker.memory_routes:read_memory"),
              "List a memory tier, or rank one or every tier for a query", "memory",
              auth=MEMORY_TOKEN, query="MemoryQuery", response="MemoryPage", overlap_auth=True),
        Route("POST", "/api/v1/memory/{agent_id}", lazy("worker.memory_routes:write_memory"),
              "Write working, episodic or semantic memory", "memory", auth=MEMORY_TOKEN,
              body="MemoryWrite", response="MemoryWritten", status=201, overlap_auth=True),
        Route("DELETE", "/api/v1/memory/{agent_id}/{key}",
              lazy("worker.memory_routes:delete_memory"),
              "Delete a working or episodic key", "memory", auth=MEMORY_TOKEN,
              query="MemoryDeleteQuery", response="MemoryDeleted"),
        Route("POST", "/admin/tenants/{tenant}/memory-tokens",
              lazy("worker.identity:mint"),
              "Mint an agent-scoped memory token", "memory", auth=ACCESS, body="MintRequest",
              response="MintedToken", status=201),
        Route("DELETE", "/admin/tenants/{tenant}/memory-tokens/{jti}",
              lazy("worker.identity:revoke_token"),
              "Revoke a memory token by its jti", "memory", auth=ACCESS, response="TokenRevoked"),
        # The hot/warm/cold client (docs/tiered-memory.md).
        Route("GET", "/api/v1/memory/{agent_id}/episodes/{episode_id}",
              lazy("worker.memory_routes:read_episode"),
              "Read one episode through the hot/warm/cold client: hot, else warm, else cold, "
              "promoting a hit to hot", "memory", auth=MEMORY_TOKEN, response="TieredEpisode"),
        Route("GET", "/api/v1/memory/{agent_id}/archive",
              lazy("worker.memory_routes:list_archive"),
              "The agent's archived (cold) episodes, newest first, optionally for one subject",
              "memory", auth=MEMORY_TOKEN, query="ArchiveQuery", response="ArchivePage"),
        Route("GET", "/admin/tenants/{tenant}/subjects/{subject}/archive",
              lazy("worker.memory_routes:subject_archive"),
              "A subject's archived (cold) episodes across the tenant's agents, newest first",
              "memory", auth=ACCESS, query="ArchivePageQuery", response="SubjectArchivePage"),
    )

# fmt: on


ROUTES = routes()
APP = Router(ROUTES)
handle = APP.handle
