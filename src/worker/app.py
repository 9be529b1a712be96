"""The Worker's request handling in plain Python: the route table (`ROUTES`), the router that
serves it, limits and error mapping; `handle` is what the Cloudflare entry and the local runtime
call. A `Route` states everything about one route once, so `Router` and `worker.openapi` cannot
disagree. `Router.dispatch`, before any handler runs: the raw path (404, 405 with `Allow`, 422
`invalid_path`), the route's `auth` gate, the body strictly (DESIGN invariant 7; issue 26) and
the query. Only health, the gateway's hot path and MCP are imported at start-up; every other
route is `lazy("module:attribute")` (docs/pyodide.md "Start-up").
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import logging
import platform
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar, cast
from urllib.parse import unquote

from pydantic import VERSION, AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from agent_memory.cursors import InvalidCursorError
from agent_memory.namespace import TENANT_PATTERN
from bindings.environment import Bindings
from bindings.ports.d1 import met_fence
from bindings.ports.errors import BindingLimitError
from gateway.routes import McpRoute, MemoryDispatcherFactory, mcp_not_allowed_route, tool_call_route
from http_messages import (
    STORAGE_LIMITS,
    ApiError,
    HttpRequest,
    HttpResponse,
    JsonLimitError,
    empty_response,
    internal_error,
    invalid_json,
    json_response,
    loads_bounded,
    method_not_allowed,
    not_found,
    payload_too_large,
    secure_response,
    validation_error,
)

if TYPE_CHECKING:
    from worker.identity import AccessIdentity, MemoryTokenClaims


B = TypeVar("B")
Q = TypeVar("Q")
M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)


# What browser MCP clients read of an answer (Streamable HTTP; the 401's challenge).
CORS_EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"

# No parameter of ours is longer: subjects are capped at 256 characters, ids far below.
MAX_PARAM_CHARS = 256
MAX_METADATA_BYTES = 4096


def has_control(value: str | None) -> bool:
    """Category Cc: C0 controls (NUL, tab, CR, LF...), DEL and the C1 controls."""
    return value is not None and any(unicodedata.category(c) == "Cc" for c in value)


def _subject(value: str) -> str:
    # Subjects are matched, erased and shown as identifiers: no control characters.
    if has_control(value):
        raise ValueError("subject must not contain control characters")
    return value


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
    return value


class StrictModel(BaseModel):
    """A body or query model: an unknown field is a 422, never ignored."""

    model_config = ConfigDict(extra="forbid")


# Field types the edge's body and query models share.
Subject = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_subject)]
Metadata = Annotated[dict[str, Any], AfterValidator(_metadata)]


@dataclass(frozen=True)
class Param:
    """A path parameter: what it is, and the full-match rule it must pass (`None`: only the
    generic checks; the handler answers 404 for a well-formed unknown id)."""

    description: str
    pattern: str | None = None


PATH_PARAMS: dict[str, Param] = {
    "tenant": Param(
        "Tenant id: 1-63 of a-z, 0-9, '_' or '-', starting with a letter or digit",
        TENANT_PATTERN,
    ),
    "agent_type": Param("A registered agent type"),
    "agent_id": Param("The agent (instance) id the memory token is for"),
    "run_id": Param("A run's ULID"),
    "fact_id": Param("A fact's ULID"),
    "event_id": Param("A memory event's ULID"),
    "episode_id": Param("An episode's id"),
    "subject": Param("A subject, percent-encoded (decoded once)"),
    "key": Param("A working or episodic memory key"),
    "jti": Param("A memory token's id (a ULID)"),
    "name": Param("A workflow pack's name"),
    "grant_id": Param("A connected OAuth client's grant id"),
    "tool_name": Param("A tool registered for the API key's tenant"),
    "job_id": Param("An export's id (a ULID)"),
    "part": Param("An export part's number (0: the header)"),
    "endpoint_id": Param("A webhook endpoint's id (a ULID)"),
}

_RULES = {name: re.compile(p.pattern) for name, p in PATH_PARAMS.items() if p.pattern}
_PARAM = re.compile(r"\{([a-z_]+)\}")


def invalid_path(name: str, problem: str) -> ApiError:
    return ApiError(422, "invalid_path", f"path parameter {name!r} {problem}", {"param": name})


def decode_param(name: str, raw: str) -> str:
    """Percent-decode one raw path segment once and check it; raises 422 `invalid_path`."""
    try:
        value = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise invalid_path(name, "is not valid percent-encoded UTF-8") from None
    if not value:
        raise invalid_path(name, "is empty")
    if len(value) > MAX_PARAM_CHARS:
        raise invalid_path(name, f"is longer than {MAX_PARAM_CHARS} characters")
    if has_control(value):
        raise invalid_path(name, "contains a control character")
    rule = _RULES.get(name)
    if rule is not None and rule.fullmatch(value) is None:
        raise invalid_path(name, f"does not match {rule.pattern}")
    return value


def parse_body(request: HttpRequest, model: type[M]) -> M:
    """The body as `model`, strictly. JSON is decoded under the storage limits (depth,
    number and string size, no NUL: these bodies reach storage): 400 `invalid_json` (also
    for an empty body), 413 `json_too_deep` / `number_too_large` / `string_too_long`, 422
    `invalid_character`; then 422 `validation_error` listing each failing field."""
    if not request.body:
        raise invalid_json("request body is empty; expected JSON")
    try:
        data = loads_bounded(request.body, STORAGE_LIMITS)
    except JsonLimitError as exc:  # its status: 400 invalid_json, 422 a character, else 413
        raise ApiError(exc.status, exc.code, exc.message) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise invalid_json(f"request body is not valid JSON: {exc}") from None
    return parse_model(data, model, strict=True)


def parse_model(data: Any, model: type[M], *, strict: bool = False) -> M:
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise validation_error("request body failed validation", {"problems": problems}) from None


@dataclass(frozen=True)
class Call(Generic[B, Q]):
    """What a handler is given: the request, its decoded path parameters, the bindings, what
    the route's gate let in (`auth`), and the parsed body and query (`None` if undeclared)."""

    request: HttpRequest
    params: dict[str, str]
    bindings: Bindings
    auth: Any
    body: B
    query: Q

    @property
    def operator(self) -> AccessIdentity:
        """The Cloudflare Access identity of an `ACCESS` route's caller."""
        assert self.auth is not None, "not an Access-gated route"
        return cast("AccessIdentity", self.auth)

    @property
    def token(self) -> MemoryTokenClaims:
        """The verified claims of a `MEMORY_TOKEN` route's memory token."""
        assert self.auth is not None, "not a memory-token route"
        return cast("MemoryTokenClaims", self.auth)


Handler = Callable[[Call[Any, Any]], Awaitable[BaseModel | HttpResponse]]


class LazyHandler:
    """A handler (or gate) named `"package.module:attribute"`, imported on its first call and
    cached for the isolate's life, so its module stays out of the start-up snapshot
    (docs/pyodide.md "Start-up")."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.module, _, self._attribute = target.partition(":")
        self._resolved: Any = None

    def resolve(self) -> Any:
        if self._resolved is None:
            self._resolved = getattr(importlib.import_module(self.module), self._attribute)
        return self._resolved


lazy = LazyHandler


@dataclass(frozen=True)
class Auth:
    """Who may call a route: the OpenAPI security scheme it is documented with, and the
    gate the router runs before anything else (`None`: nothing to check here, or the
    handler's own business, as the tool gateway's API keys on the KV-only hot path)."""

    scheme: str
    spec: dict[str, str] = field(default_factory=dict)
    gate: LazyHandler | None = None


PUBLIC = Auth("")
API_KEY = Auth("apiKey", {"type": "http", "scheme": "bearer"})

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


ModelRef = type[BaseModel] | str | None


@dataclass(frozen=True)
class Route:
    """One route, stated once. Model references are classes or names in the handler's
    module; `response=None` means no fixed JSON shape (the handler answers an
    `HttpResponse`: the relayed tool call, MCP, this API's document)."""

    method: str
    path: str
    handler: Handler | LazyHandler
    summary: str
    tag: str
    auth: Auth = PUBLIC
    body: ModelRef = None
    body_required: bool = True
    query: ModelRef = None
    response: ModelRef = None
    status: int = 200
    # The handler runs while the token's deny-list lookup is in flight (one round trip fewer)
    # and writes only once it is confirmed.
    overlap_auth: bool = False
    # Browsers may call it from the origins in MCP_ALLOWED_ORIGINS (`Router.handle`).
    cors: bool = False

    def model(self, ref: ModelRef) -> type[BaseModel] | None:
        """The model `ref` names (imports the handler's module for a name)."""
        if not isinstance(ref, str):
            return ref
        handler = self.handler
        module = handler.module if isinstance(handler, LazyHandler) else handler.__module__
        return cast("type[BaseModel]", getattr(importlib.import_module(module), ref))

    def regex(self) -> re.Pattern[str]:
        # A parameter matches one non-empty path segment.
        body = _PARAM.sub(
            lambda m: f"(?P<{m.group(1)}>[^/]+)",
            re.escape(self.path).replace(r"\{", "{").replace(r"\}", "}"),
        )
        return re.compile(body)  # used with fullmatch: `^...$` would pass a trailing newline


class Router:
    """The Worker's request handling over a route table (`routes()`): the one the entry and
    the local runtime serve is `APP`; a test may build one with other wiring."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = tuple(routes)
        self._compiled = [(route.regex(), route) for route in self.routes]
        self._cors: dict[str, list[str]] = {}
        for route in self.routes:
            if route.cors:
                self._cors.setdefault(route.path, []).append(route.method)

    def resolve(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        """The route and its decoded, checked path parameters for the raw (percent-encoded)
        `path`. Raises `ApiError`: 404 for no route, 405 (with `Allow`) for a wrong method,
        422 `invalid_path` for a bad parameter."""
        allowed: list[str] = []
        for regex, route in self._compiled:
            match = regex.fullmatch(path)
            if match is None:
                continue
            if route.method == method.upper():
                params = {name: decode_param(name, raw) for name, raw in match.groupdict().items()}
                return route, params
            allowed.append(route.method)
        if allowed:
            raise method_not_allowed(sorted(set(allowed)))
        raise not_found(f"no route for {path}")

    async def dispatch(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        """Serve `request`: path, auth, body and query, handler, response (module doc)."""
        route, params = self.resolve(request.method, request.path)
        gate = route.auth.gate
        auth = None if gate is None else await gate.resolve()(request, params, bindings)
        # A memory token's deny-list lookup is in flight: confirmed before the handler, or
        # after it for an `overlap_auth` route; whatever it answered, a revoked token gets 401.
        confirm = getattr(auth, "confirm", None)
        if confirm is not None and not route.overlap_auth:
            await confirm()
        try:
            body: BaseModel | None = None
            if (body_model := route.model(route.body)) is not None:
                empty = not request.body and not route.body_required
                body = body_model() if empty else parse_body(request, body_model)
            query_model = route.model(route.query)
            query = None if query_model is None else parse_model(request.query, query_model)
            handler = route.handler
            if isinstance(handler, LazyHandler):
                handler = handler.resolve()
            answer = await handler(Call(request, params, bindings, auth, body, query))
        finally:
            if confirm is not None:  # raising here (revoked) replaces the handler's answer
                await confirm()
        expected = route.model(route.response) or HttpResponse
        if not isinstance(answer, expected):
            raise TypeError(f"{route.method} {route.path} answered {type(answer).__name__}")
        if isinstance(answer, HttpResponse):
            return answer
        return json_response(answer.model_dump(mode="json"), status=route.status)

    async def handle(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        """Answer one request. Never raises: every failure is a JSON error response. Every
        answer carries the security headers, and admin and memory answers `no-store`
        (`http_messages.secure_response`). On a `cors` route a browser's preflight is
        answered, and answers name the `Origin`, for origins in `MCP_ALLOWED_ORIGINS` only
        (never `*`: no credentials, and bearer tokens are not cookies)."""
        methods = self._cors.get(request.path)
        origin = (request.headers.get("origin") or "").strip().lower()
        allowed = methods is not None and origin in bindings.settings.mcp_origins
        if methods is not None and request.method == "OPTIONS" and origin:  # a preflight
            refusal = ApiError(403, "origin_not_allowed", "this Origin may not call this route")
            asked = request.headers.get("access-control-request-headers") or ""
            preflight = {
                "access-control-allow-methods": ", ".join(methods),
                "access-control-allow-headers": asked,
                "access-control-max-age": "600",
            }
            response = empty_response(204, preflight) if allowed else refusal.to_response()
        else:
            response = await self._answer(request, bindings)
        if methods is not None:
            response.headers.set("vary", "Origin")
        if allowed:
            response.headers.set("access-control-allow-origin", origin)
            response.headers.set("access-control-expose-headers", CORS_EXPOSED)
        return secure_response(request, response)

    async def _answer(self, request: HttpRequest, bindings: Bindings) -> HttpResponse:
        try:
            if len(request.body) > bindings.settings.max_body_bytes:
                raise payload_too_large(bindings.settings.max_body_bytes)
            return await self.dispatch(request, bindings)
        except ApiError as exc:
            return exc.to_response()
        except BindingLimitError as exc:
            return ApiError(422, "limit_exceeded", str(exc)).to_response()
        except InvalidCursorError as exc:
            # Every paginated listing: a cursor the API did not hand out.
            return ApiError(422, "invalid_cursor", str(exc)).to_response()
        except Exception as exc:
            if met_fence(exc):  # the tenant is moving: 503, and re-read its home (directory)
                from agent_memory.directory import note_fenced

                return note_fenced(bindings.clock.now()).to_response()
            # The path can carry a subject (the erase route): log its hash and size, not it.
            digest = hashlib.sha256(request.path.encode()).hexdigest()[:16]
            log.exception(
                "unhandled error on %s path sha256=%s (%d bytes)",
                request.method,
                digest,
                len(request.path),
            )
            return internal_error().to_response()


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


class SemanticDispatcher:
    """MCP's memory tools (the gateway's `MemoryToolDispatcher`): `agent_memory.agent.memory_tools`,
    imported on first use so it stays out of the start-up; the gateway never imports the core."""

    def __init__(self, bindings: Bindings) -> None:
        self._bindings = bindings

    def specs(self) -> Sequence[Mapping[str, Any]]:
        from agent_memory.agent.memory_tools import McpMemoryTools

        return McpMemoryTools(self._bindings).specs()

    async def call(self, tenant: str, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from agent_memory.agent.memory_tools import McpMemoryTools

        return await McpMemoryTools(self._bindings).call(tenant, tool_name, arguments)


# fmt: off
def routes(memory_tools: MemoryDispatcherFactory | None = SemanticDispatcher) -> tuple[Route, ...]:
    """Every route, in match order (model names are looked up in the handler's module);
    `memory_tools` builds the dispatcher of MCP's memory tools."""
    mcp_post_route = McpRoute(memory_tools)
    return (
        Route("GET", "/healthz", healthz,
              "Which bindings this deployment has", "meta", response=Health),
        Route("GET", "/openapi.json", lazy("worker.openapi:openapi_route"),
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
