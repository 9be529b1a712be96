"""Every route of the Worker as an `Operation`: method, path, the models it takes and
answers, and how it is authenticated. `worker.openapi` renders this table; the OpenAPI test
checks it against the router, so a route cannot be added without an entry here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from agent_memory.lifecycle import LifecycleUpdate, ReconcileReport
from agent_memory.lifecycle.inspect import EventPage, FactDetail, FactPage
from agent_memory.tiers.episodic import RunPage
from agent_runtime_do.protocol import RunResult
from worker.agents_routes import CandidatesQuery, OutcomeBody, RunBody, RunsQuery, WorkflowsQuery
from worker.api_models import (
    BackfillBody,
    BackfillView,
    EraseView,
    FactDeleted,
    Health,
    LifecycleSettingsView,
    LifecycleView,
    McpMessage,
    McpReply,
    OutcomeResult,
    PackCandidates,
    PruneView,
    RunDetail,
    Workflows,
)
from worker.inspector_routes import (
    EpisodesQuery,
    EpisodesResponse,
    EventsQuery,
    ExplainBody,
    ExplainResponse,
    FactsQuery,
    TenantsResponse,
)
from worker.lifecycle_routes import PruneBody
from worker.memory_models import (
    ArchivePage,
    ArchivePageQuery,
    ArchiveQuery,
    MemoryDeleted,
    MemoryDeleteQuery,
    MemoryPage,
    MemoryQuery,
    MemoryWrite,
    MemoryWritten,
    SubjectArchivePage,
    TieredEpisode,
    TokenRevoked,
)
from worker.memory_tokens import MintedToken, MintRequest
from worker.pack_routes import PackDeprecated, PackList, PackPromoted, PromotePack

ACCESS = "cloudflareAccess"
API_KEY = "apiKey"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    tag: str
    ok: type[BaseModel] | None  # None: the success answer has no fixed JSON shape
    ok_status: int = 200
    body: type[BaseModel] | None = None
    body_required: bool = True
    query: type[BaseModel] | None = None
    security: tuple[str, ...] = ()
    extra_responses: dict[str, dict[str, Any]] = field(default_factory=dict)


OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/healthz", "Which bindings this deployment has", "meta", Health),
    Operation("GET", "/openapi.json", "This document", "meta", None),
    Operation(
        "POST",
        "/api/v1/tools/{tool_name}",
        "Call a proxied tool (the KV-only hot path); the upstream's answer is relayed",
        "gateway",
        None,
        security=(API_KEY,),
    ),
    Operation(
        "POST",
        "/mcp",
        "MCP Streamable HTTP: one JSON-RPC message",
        "gateway",
        McpReply,
        body=McpMessage,
        security=(API_KEY,),
    ),
    # OAuth 2.1 for MCP clients (worker.oauth): RFC 6749 / 7591 / 8414 / 9728 shapes, or HTML.
    *(
        Operation(method, path, summary, "oauth", None)
        for method, path, summary in (
            ("GET", "/.well-known/oauth-authorization-server", "RFC 8414 metadata"),
            ("GET", "/.well-known/oauth-protected-resource", "RFC 9728 metadata (origin)"),
            ("GET", "/.well-known/oauth-protected-resource/mcp", "RFC 9728 metadata (/mcp)"),
            ("GET", "/authorize", "The consent page (behind Cloudflare Access)"),
            ("POST", "/authorize", "The person's decision; redirects to the client"),
            ("POST", "/token", "Authorization code and refresh token grants"),
            ("POST", "/revoke", "RFC 7009 token revocation"),
            ("POST", "/register", "RFC 7591 dynamic client registration"),
        )
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/oauth-clients",
        "A tenant's connected OAuth clients",
        "oauth",
        None,
        security=(ACCESS,),
    ),
    Operation(
        "DELETE",
        "/admin/tenants/{tenant}/oauth-clients/{grant_id}",
        "Revoke a connected client's grant and its tokens",
        "oauth",
        None,
        security=(ACCESS,),
    ),
    Operation("GET", "/mcp", "No SSE stream on this stateless server (405)", "gateway", None),
    Operation("DELETE", "/mcp", "No sessions on this stateless server (405)", "gateway", None),
    Operation(
        "POST",
        "/v1/agents/{tenant}/{agent_type}/run",
        "Run one agent turn",
        "agents",
        RunResult,
        body=RunBody,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/v1/agents/{tenant}/{agent_type}/runs/{run_id}/outcome",
        "Score a run (procedural memory)",
        "agents",
        OutcomeResult,
        body=OutcomeBody,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/agents/{tenant}/runs",
        "List runs",
        "agents",
        RunPage,
        query=RunsQuery,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/agents/{tenant}/runs/{run_id}",
        "A run with its episodes and log",
        "agents",
        RunDetail,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/agents/{tenant}/{agent_type}/workflows",
        "The bandit's workflows",
        "agents",
        Workflows,
        query=WorkflowsQuery,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/agents/{tenant}/{agent_type}/pack-candidates",
        "Workflows ready to pack",
        "agents",
        PackCandidates,
        query=CandidatesQuery,
        security=(ACCESS,),
    ),
    Operation(
        "DELETE",
        "/admin/tenants/{tenant}/facts/{fact_id}",
        "Delete a fact and its vector",
        "memory",
        FactDeleted,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/lifecycle",
        "Lifecycle settings and today's brief",
        "lifecycle",
        LifecycleView,
        security=(ACCESS,),
    ),
    Operation(
        "PUT",
        "/admin/tenants/{tenant}/lifecycle",
        "Override retention or the episode limit",
        "lifecycle",
        LifecycleSettingsView,
        body=LifecycleUpdate,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/prune",
        "Prune the tenant now",
        "lifecycle",
        PruneView,
        body=PruneBody,
        body_required=False,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/namespace-backfill",
        "Copy the tenant's legacy working-memory KV keys to canonical item keys (one bounded "
        "step; repeat with next_cursor). Never deletes a key",
        "lifecycle",
        BackfillView,
        body=BackfillBody,
        body_required=False,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/reconcile",
        "Run the reconciler for the tenant",
        "lifecycle",
        ReconcileReport,
        security=(ACCESS,),
    ),
    Operation(
        "DELETE",
        "/admin/tenants/{tenant}/subjects/{subject}",
        "Erase a subject from every tier",
        "lifecycle",
        EraseView,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants",
        "Tenants that have runs, episodes, facts or events (inspector)",
        "inspector",
        TenantsResponse,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/facts",
        "Facts with their status, filtered by status, subject, agent type or text",
        "inspector",
        FactPage,
        query=FactsQuery,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/facts/{fact_id}",
        "One fact: supersession chain, links, provenance, written and retrieved history",
        "inspector",
        FactDetail,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/events",
        "Memory events by kind, tier, run and time",
        "inspector",
        EventPage,
        query=EventsQuery,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/episodes",
        "Episodes by id (what a run recalled)",
        "inspector",
        EpisodesResponse,
        query=EpisodesQuery,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/recall/explain",
        "Why this recall: ranked results with channel ranks and weighted score parts",
        "inspector",
        ExplainResponse,
        body=ExplainBody,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/api/v1/memory/{agent_id}",
        "List a memory tier, or rank one or every tier for a query (agent memory token)",
        "memory",
        MemoryPage,
        query=MemoryQuery,
        security=(API_KEY,),
    ),
    Operation(
        "POST",
        "/api/v1/memory/{agent_id}",
        "Write working, episodic or semantic memory (agent memory token)",
        "memory",
        MemoryWritten,
        ok_status=201,
        body=MemoryWrite,
        security=(API_KEY,),
    ),
    Operation(
        "DELETE",
        "/api/v1/memory/{agent_id}/{key}",
        "Delete a working or episodic key (agent memory token)",
        "memory",
        MemoryDeleted,
        query=MemoryDeleteQuery,
        security=(API_KEY,),
    ),
    Operation(
        "GET",
        "/api/v1/memory/{agent_id}/episodes/{episode_id}",
        "Read one episode through the hot/warm/cold client: hot, else warm, else cold, "
        "promoting a hit to hot (agent memory token)",
        "memory",
        TieredEpisode,
        security=(API_KEY,),
    ),
    Operation(
        "GET",
        "/api/v1/memory/{agent_id}/archive",
        "The agent's archived (cold) episodes, newest first, optionally for one subject "
        "(agent memory token)",
        "memory",
        ArchivePage,
        query=ArchiveQuery,
        security=(API_KEY,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/subjects/{subject}/archive",
        "A subject's archived (cold) episodes across the tenant's agents, newest first",
        "memory",
        SubjectArchivePage,
        query=ArchivePageQuery,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/memory-tokens",
        "Mint an agent-scoped memory token",
        "memory",
        MintedToken,
        ok_status=201,
        body=MintRequest,
        security=(ACCESS,),
    ),
    Operation(
        "DELETE",
        "/admin/tenants/{tenant}/memory-tokens/{jti}",
        "Revoke a memory token by its jti",
        "memory",
        TokenRevoked,
        security=(ACCESS,),
    ),
    Operation(
        "GET",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs",
        "Every version of every workflow pack of the agent type",
        "agents",
        PackList,
        security=(ACCESS,),
    ),
    Operation(
        "POST",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs",
        "Promote an instance's stable workflow into the next version of a named pack",
        "agents",
        PackPromoted,
        ok_status=201,
        body=PromotePack,
        security=(ACCESS,),
    ),
    Operation(
        "DELETE",
        "/admin/tenants/{tenant}/agents/{agent_type}/packs/{name}",
        "Deprecate the active version of a pack",
        "agents",
        PackDeprecated,
        security=(ACCESS,),
    ),
)
