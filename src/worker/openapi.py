"""The OpenAPI 3.1 document of every route, generated from the pydantic models.

`GET /openapi.json` serves it. Request bodies and query parameters are the models the
handlers validate with (`RunBody`, `LifecycleUpdate`, ...), responses the models they
answer with (`RunResult`, `RunPage`, `EraseReport`, ...), and every error the one shape of
`worker.errors` (`{"error": {"code", "message", "details"?}}`). `OPERATIONS` lists one entry
per route; `tests/hardening/test_openapi.py` checks it against the router, so a route
cannot be added without being documented, and fuzzes the local server with schemathesis
against this document.

The local dev server adds its scheduled-handler endpoints (`build_document(local=True)`).

Size: one table of every route next to the response models it names, and the few lines
that render them; split, a route and the schema a client relies on would live apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.lifecycle import EraseReport, LifecycleUpdate, ReconcileReport, TenantLifecycle
from agent_memory.tiers.episodic import Episode, RunPage, RunRecord
from agent_runtime_do.protocol import RunResult
from bindings.environment import Bindings
from http_messages import HttpRequest, HttpResponse, json_response
from worker.agents_routes import CandidatesQuery, OutcomeBody, RunBody, RunsQuery, WorkflowsQuery
from worker.lifecycle_routes import PruneBody
from worker.router import MAX_PARAM_CHARS

API_VERSION = "0.1.0"


# --- response models (what the handlers answer; extra keys are allowed to evolve) -------


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(_Open):
    code: str = Field(description="Stable identifier clients may branch on")
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(BaseModel):
    """Every error the Worker answers (outside MCP's JSON-RPC envelope)."""

    error: ErrorDetail


class Health(_Open):
    status: Literal["ok"]
    environment: str
    bindings: dict[str, bool]
    embedding: dict[str, Any] | None


class OutcomeResult(_Open):
    run_id: str
    workflow: dict[str, Any] | None


class FailedWriteView(_Open):
    op: str
    payload: dict[str, Any]
    error: str
    attempts: int
    created_at: float


class RunDetail(_Open):
    run: RunRecord
    episodes: list[Episode]
    run_log: list[Any]
    workflow: dict[str, Any] | None
    failed_writes: list[FailedWriteView]


class Workflows(_Open):
    instance_id: str
    workflows: list[dict[str, Any]]


class PackCandidates(_Open):
    instance_id: str
    min_pulls: int
    min_mean: float
    candidates: list[dict[str, Any]]


class FactDeleted(_Open):
    tenant: str
    fact_id: str
    deleted: bool
    vector_deleted: bool
    complete: bool


class LifecycleView(_Open):
    settings: TenantLifecycle
    brief: dict[str, Any]


class LifecycleSettingsView(_Open):
    settings: TenantLifecycle


class PruneView(_Open):
    prune: dict[str, Any]
    tenants: list[dict[str, Any]]


class EraseView(EraseReport):
    model_config = ConfigDict(extra="allow")
    erased_by: str


class ScheduledResult(_Open):
    """What the scheduled handler reports (local dev endpoint only)."""


class McpMessage(_Open):
    """One JSON-RPC 2.0 message (MCP 2025-06-18 Streamable HTTP: one message per POST)."""

    jsonrpc: Literal["2.0"]
    method: str | None = None
    id: str | int | None = None
    params: dict[str, Any] | None = None


class McpReply(_Open):
    """A JSON-RPC response: `result` or `error` (whose `code` is a JSON-RPC integer)."""

    jsonrpc: Literal["2.0"]
    id: str | int | None = None


# --- operations -------------------------------------------------------------------------

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
)

SCHEDULED_PATHS = ("/cdn-cgi/handler/scheduled", "/cdn-cgi/local/scheduled")

_PARAM_DESCRIPTIONS = {
    "tenant": "Tenant id: 1-63 of a-z, 0-9, '_' or '-', starting with a letter or digit",
    "agent_type": "A registered agent type",
    "run_id": "A run's ULID",
    "fact_id": "A fact's ULID",
    "subject": "The subject to erase, percent-encoded (decoded once)",
    "tool_name": "A tool registered for the API key's tenant",
}
_PARAM_PATTERNS = {
    "tenant": "^[a-z0-9][a-z0-9_-]{0,62}$",
}


class _Schemas:
    """Collects component schemas from pydantic models (refs into #/components/schemas)."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def ref(self, model: type[BaseModel], mode: Literal["validation", "serialization"]) -> Any:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)
        for name, definition in schema.pop("$defs", {}).items():
            self.components.setdefault(name, definition)
        name = model.__name__
        self.components.setdefault(name, schema)
        return {"$ref": f"#/components/schemas/{name}"}


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")
    return f"{method.lower()}_{words}"


def _json_content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _path_parameters(path: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    parameters = []
    for name in names:
        schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_PARAM_CHARS}
        if name in _PARAM_PATTERNS:
            schema["pattern"] = _PARAM_PATTERNS[name]
        parameters.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _PARAM_DESCRIPTIONS.get(name, name),
                "schema": schema,
            }
        )
    return parameters


def _query_parameters(model: type[BaseModel], schemas: _Schemas) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        schemas.components.setdefault(name, definition)
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _operation(op: Operation, schemas: _Schemas) -> dict[str, Any]:
    error = {
        "description": "A JSON error",
        "content": _json_content(schemas.ref(ErrorBody, "serialization")),
    }
    responses: dict[str, Any] = {}
    if op.ok is not None:
        responses[str(op.ok_status)] = {
            "description": "Success",
            "content": _json_content(schemas.ref(op.ok, "serialization")),
        }
    if op.path == "/mcp" and op.method == "POST":
        responses["202"] = {"description": "A notification or response was accepted"}
        # MCP answers every failure in JSON-RPC form (HTTP 4xx with a JSON-RPC error body).
        responses["default"] = {
            "description": "A JSON-RPC error",
            "content": _json_content(schemas.ref(McpReply, "serialization")),
        }
    elif op.ok is None and op.path.startswith("/api/v1/tools/"):
        responses["default"] = {
            "description": "The upstream's status and body (marked x-upstream-status), or a "
            "gateway error (marked x-gateway-error) in the JSON error shape",
            "content": {"*/*": {"schema": {}}},
        }
    elif op.ok is None and op.path == "/openapi.json":
        responses["200"] = {
            "description": "OpenAPI 3.1",
            "content": _json_content({"type": "object"}),
        }
        responses["default"] = error
    else:
        responses["default"] = error
    operation: dict[str, Any] = {
        "operationId": _operation_id(op.method, op.path),
        "summary": op.summary,
        "tags": [op.tag],
        "responses": responses,
    }
    parameters = _path_parameters(op.path)
    if op.query is not None:
        parameters.extend(_query_parameters(op.query, schemas))
    if parameters:
        operation["parameters"] = parameters
    if op.body is not None:
        operation["requestBody"] = {
            "required": op.body_required,
            "content": _json_content(schemas.ref(op.body, "validation")),
        }
    elif op.path.startswith("/api/v1/tools/"):
        operation["requestBody"] = {
            "required": False,
            "description": "The tool's arguments (checked against its input_schema)",
            "content": _json_content({"type": "object"}),
        }
    if op.security:
        operation["security"] = [{name: []} for name in op.security]
    return operation


def build_document(*, local: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document; `local=True` adds the dev server's scheduled endpoints."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schemas)
    if local:
        for path in SCHEDULED_PATHS:
            paths[path] = {
                "get": {
                    "operationId": "scheduled" + path.replace("/", "_").replace("-", "_"),
                    "summary": "Run the scheduled handler now (local dev server only)",
                    "tags": ["local"],
                    "parameters": [
                        {
                            "name": "cron",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "time",
                            "in": "query",
                            "required": False,
                            "description": "Epoch milliseconds",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "The job's report",
                            "content": _json_content(schemas.ref(ScheduledResult, "serialization")),
                        },
                        "default": {
                            "description": "A JSON error",
                            "content": _json_content(schemas.ref(ErrorBody, "serialization")),
                        },
                    },
                }
            }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agent-memory Worker",
            "version": API_VERSION,
            "description": "Tool gateway and agent runtime with tiered memory. Errors are "
            '`{"error": {"code", "message"}}` with stable codes; input limits are in '
            "docs/architecture.md.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {
                ACCESS: {"type": "apiKey", "in": "header", "name": "Cf-Access-Jwt-Assertion"},
                API_KEY: {"type": "http", "scheme": "bearer"},
            },
        },
    }


_DOCUMENTS: dict[bool, dict[str, Any]] = {}


def document(*, local: bool = False) -> dict[str, Any]:
    """`build_document`, built once per isolate (the models do not change at runtime)."""
    if local not in _DOCUMENTS:
        _DOCUMENTS[local] = build_document(local=local)
    return _DOCUMENTS[local]


async def openapi_route(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> HttpResponse:
    """`GET /openapi.json`."""
    return json_response(document())
