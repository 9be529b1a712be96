"""MCP over Streamable HTTP at `POST /mcp` (revisions 2025-06-18, 2025-11-25, 2026-07-28).

Spec: modelcontextprotocol.io/specification/2025-06-18 — basic/transports.mdx (Streamable
HTTP), basic/lifecycle.mdx (initialize), server/tools.mdx (tools/list, tools/call, error
handling), basic/authorization.mdx (401/403); what differs per revision, and how a request's
revision is read, is `gateway.mcp_revisions`.

What this server does, and why:

* **Stateless.** Every POST carries the API key and is answered on its own; no
  `Mcp-Session-Id` is issued (sessions are optional, §Session Management), so any isolate
  can answer any message. `GET /mcp` and `DELETE /mcp` answer 405: no server-initiated SSE
  stream is offered (§Listening for Messages: "or else return HTTP 405") and there is no
  session to delete. Every request is answered with one `application/json` object.
* **One message per POST.** 2025-06-18 removed JSON-RPC batching (changelog; the POST body
  "MUST be a single JSON-RPC request, notification, or response"), so a JSON array is an
  Invalid Request (-32600, HTTP 400).
* **Notifications and client responses** (messages without `id`, or with `result`/`error`)
  are accepted with 202 and no body.
* **Version negotiation.** Per request (`gateway.mcp_revisions.classify`): `initialize`
  echoes 2025-06-18 / 2025-11-25, else offers 2025-11-25; a 2026-07-28 request carries its
  version in `_meta` and needs no handshake (`server/discover` describes the server).
* **Auth.** The same `Authorization: Bearer` as the HTTP tool route, on every POST: an API
  key or an OAuth access token (`gateway.oauth_tokens`). A missing or bad one is HTTP 401
  (authorization.mdx: "Invalid or expired tokens MUST receive a HTTP 401"; the route adds
  the RFC 9728 `resource_metadata` challenge); a caller without the needed scope is HTTP
  403 (`insufficient_scope`). The body is a JSON-RPC error object either way.
* **Origin.** The transport spec requires validating `Origin` (DNS rebinding). Requests
  without `Origin` (CLI and IDE clients) pass; any `Origin` must be in `MCP_ALLOWED_ORIGINS`
  (empty by default), else 403; never compared with `Host` (DNS rebinding matches it).
* **Errors.** Unknown tool and invalid arguments are JSON-RPC -32602 (tools.mdx "Protocol
  Errors"); upstream failures (timeout, unreachable, non-2xx status, missing credential)
  are tool results with `isError: true` ("Tool Execution Errors") so the model can react.

Size: one JSON-RPC dispatcher serving three revisions (their differences are in
`gateway.mcp_revisions`); the memory tools' part shrinks when they get one pydantic definition.

Proxied tool calls run the same hot path as `POST /api/v1/tools/{name}`
(`gateway.tool_proxy.call_tool`). Memory tools are handed to the injected
`MemoryToolDispatcher`; this module never imports the memory code.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from gateway import mcp_revisions as revisions
from gateway.api_keys import Principal
from gateway.errors import GATEWAY_ERROR_HEADER, forbidden, gateway_error_response
from gateway.json_schema import validate
from gateway.mcp_revisions import Revision, RevisionError
from gateway.memory_tools import MemoryToolDispatcher
from gateway.oauth_tokens import authenticate_bearer
from gateway.tenants import load_tenant
from gateway.tool_config import load_tools
from gateway.tool_proxy import TOOL_ARGUMENT_LIMITS, GatewayContext, UpstreamReply, call_tool
from http_messages import HttpRequest, HttpResponse, empty_response, json_response
from http_messages.bounded_json import STORAGE_LIMITS, JsonLimitError, check_value, loads_bounded
from http_messages.errors import ApiError

log = logging.getLogger(__name__)

LATEST_PROTOCOL_VERSION = revisions.LATEST_HANDSHAKE_VERSION
SUPPORTED_PROTOCOL_VERSIONS: tuple[str, ...] = revisions.SUPPORTED_VERSIONS
CAPABILITIES = {"tools": {"listChanged": False}}
SERVER_INFO = {
    "name": "agent-memory-gateway",
    "title": "Agent memory tool gateway",
    "version": "0.1.0",
}
INSTRUCTIONS = (
    "Tools proxied by the agent-memory gateway for this API key's tenant. recall_memory and "
    "store_memory, when listed, read and write the tenant's long-term memory."
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Server-defined codes (JSON-RPC reserves -32000..-32099 for implementations).
UNAUTHORIZED = -32001
FORBIDDEN = -32003

# The scope each memory tool needs (OAuth grants split API keys' `memory`).
_MEMORY_TOOL_SCOPE = {"recall_memory": "memory:read", "store_memory": "memory:write"}

# Gateway error codes that are the caller's fault in the arguments (-32602), and those that
# are failures of the tool itself (a result with isError: true).
_INVALID_PARAMS_CODES = frozenset({"tool_not_found", "invalid_tool_input", "tool_input_too_large"})
_TOOL_FAILURE_CODES = frozenset(
    {"credential_missing", "upstream_forbidden", "upstream_timeout", "upstream_unreachable"}
    | {"upstream_error", "upstream_response_too_large"}
)


@dataclass(frozen=True)
class McpContext:
    """The hot-path context plus what MCP adds: the memory dispatcher (None when the
    deployment lacks the semantic tier) and the browser origins allowed to call."""

    gateway: GatewayContext
    memory: MemoryToolDispatcher | None = None
    allowed_origins: frozenset[str] = frozenset()


class JsonRpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None, http_status: int = 200) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status


RequestId = str | int


def _error_body(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _error_response(
    request_id: RequestId | None, exc: JsonRpcError | RevisionError
) -> HttpResponse:
    return json_response(
        _error_body(request_id, exc.code, exc.message, exc.data), status=exc.http_status
    )


def _gateway_error_response(request_id: RequestId | None, exc: ApiError) -> HttpResponse:
    """An auth or store failure at the HTTP level, with a JSON-RPC error body."""
    code = {401: UNAUTHORIZED, 403: FORBIDDEN}.get(exc.status, INTERNAL_ERROR)
    headers = {GATEWAY_ERROR_HEADER: exc.code, **exc.headers}
    body = _error_body(request_id, code, exc.message, {"code": exc.code})
    return json_response(body, status=exc.status, headers=headers)


def method_not_allowed() -> HttpResponse:
    """`GET`/`DELETE /mcp`: no SSE stream and no sessions on this stateless server."""
    return gateway_error_response(
        ApiError(
            405,
            "method_not_allowed",
            "this MCP endpoint is stateless and offers no SSE stream: POST one JSON-RPC "
            "message per request",
            headers={"allow": "POST"},
        )
    )


def _origin_allowed(ctx: McpContext, request: HttpRequest) -> bool:
    """No Origin (a non-browser client) passes; otherwise only a configured origin."""
    origin = request.headers.get("origin")
    return origin is None or origin.strip().lower() in ctx.allowed_origins


def _valid_id(value: Any) -> bool:
    # MCP: "the ID MUST NOT be null"; JSON-RPC ids are strings or numbers (not booleans).
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


async def handle_mcp_post(ctx: McpContext, request: HttpRequest) -> HttpResponse:
    """Answer one Streamable HTTP POST. Never raises."""
    if not _origin_allowed(ctx, request):
        return _gateway_error_response(
            None,
            ApiError(403, "origin_not_allowed", "requests from this Origin are not allowed"),
        )
    gw = ctx.gateway
    try:
        principal = await authenticate_bearer(
            gw.kv, gw.cache, gw.clock, request.headers.get("authorization"), gw.resources
        )
    except ApiError as exc:
        return _gateway_error_response(None, exc)

    try:
        message = loads_bounded(request.body, TOOL_ARGUMENT_LIMITS)
    except ValueError as exc:  # a JsonLimitError, or JSONDecodeError / UnicodeDecodeError
        limit = exc if isinstance(exc, JsonLimitError) else None
        data = {"code": limit.code} if limit else None
        error = JsonRpcError(
            PARSE_ERROR, f"Parse error: {exc}", data, limit.status if limit else 400
        )
        return _error_response(None, error)
    if isinstance(message, list):
        return _error_response(
            None,
            JsonRpcError(
                INVALID_REQUEST,
                "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 removed "
                "batching); send one message per POST",
                http_status=400,
            ),
        )
    if not isinstance(message, dict):
        return _error_response(
            None,
            JsonRpcError(
                INVALID_REQUEST, "Invalid Request: expected a JSON object", http_status=400
            ),
        )

    raw_id = message.get("id")
    request_id = raw_id if _valid_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        return _error_response(
            request_id,
            JsonRpcError(
                INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', http_status=400
            ),
        )
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return empty_response(202)  # a response to a server request; we send none, so ignore
        return _error_response(
            request_id,
            JsonRpcError(INVALID_REQUEST, 'Invalid Request: no "method"', http_status=400),
        )
    method = message["method"]
    if not isinstance(method, str):
        return _error_response(
            request_id,
            JsonRpcError(
                INVALID_REQUEST, 'Invalid Request: "method" must be a string', http_status=400
            ),
        )
    if "id" in message and request_id is None:
        return _error_response(
            None,
            JsonRpcError(
                INVALID_REQUEST,
                'Invalid Request: "id" must be a string or an integer (not null)',
                http_status=400,
            ),
        )
    params = message.get("params", {})
    if params is None:
        params = {}

    if request_id is None:
        # A notification (initialized, cancelled, ...): nothing to do for a stateless server.
        return empty_response(202)
    try:
        revision = revisions.classify(request.headers, method, params)
    except RevisionError as exc:
        return _error_response(request_id, exc)

    try:
        if not isinstance(params, dict):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "params" must be an object')
        result = await _dispatch(ctx, principal, revision, method, params)
    except JsonRpcError as exc:
        if revision.modern:
            exc.http_status = revisions.MODERN_ERROR_STATUS.get(exc.code, exc.http_status)
        return _error_response(request_id, exc)
    except ApiError as exc:
        if exc.status in (401, 403):
            return _gateway_error_response(request_id, exc)
        return _error_response(
            request_id, JsonRpcError(INTERNAL_ERROR, exc.message, {"code": exc.code})
        )
    return json_response({"jsonrpc": "2.0", "id": request_id, "result": result})


async def _dispatch(
    ctx: McpContext, principal: Principal, revision: Revision, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    # 2026-07-28 removed initialize and ping; server/discover exists only there.
    if method == "initialize" and not revision.modern:
        return _initialize(params)
    if method == "ping" and not revision.modern:
        return {}
    if method == "server/discover" and revision.modern:
        result = revisions.discover_result(CAPABILITIES, INSTRUCTIONS)
        return revisions.shape_result(revision, result, SERVER_INFO, cacheable=True)
    if method == "tools/list":
        tools = {"tools": await _list_tools(ctx, principal)}
        return revisions.shape_result(revision, tools, SERVER_INFO, cacheable=True)
    if method == "tools/call":
        called = await _call_tool(ctx, principal, revision, params)
        return revisions.shape_result(revision, called, SERVER_INFO, cacheable=False)
    raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "protocolVersion" must be a string')
    return {
        "protocolVersion": revisions.negotiate_handshake(requested),
        "capabilities": CAPABILITIES,
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }


async def _memory_available(ctx: McpContext, principal: Principal) -> bool:
    """Memory tools exist for this caller: semantic tier deployed, tenant enabled, a memory
    scope held (which of the two tools, `_memory_tool_allowed` says)."""
    if ctx.memory is None or not (principal.may_read_memory() or principal.may_write_memory()):
        return False
    gw = ctx.gateway
    tenant = await load_tenant(gw.kv, gw.cache, gw.clock, principal.tenant)
    return tenant is not None and tenant.memory_enabled


async def _list_tools(ctx: McpContext, principal: Principal) -> list[dict[str, Any]]:
    gw = ctx.gateway
    tools: list[dict[str, Any]] = []
    if "tools" in principal.scopes:
        tools.extend(
            c.mcp_tool() for c in await load_tools(gw.kv, gw.cache, gw.clock, principal.tenant)
        )
    if ctx.memory is not None and await _memory_available(ctx, principal):
        tools.extend(
            dict(spec)
            for spec in ctx.memory.specs()
            if _memory_tool_allowed(principal, spec["name"])
        )
    return tools


def _memory_tool_allowed(principal: Principal, name: str) -> bool:
    if name == "store_memory":
        return principal.may_write_memory()
    return principal.may_read_memory()


def _text_result(text: str, is_error: bool) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _reply_result(reply: UpstreamReply) -> dict[str, Any]:
    if reply.status >= 400:
        return _text_result(f"upstream returned HTTP {reply.status}: {reply.text()}", True)
    return _text_result(reply.text(), False)


async def _call_tool(
    ctx: McpContext, principal: Principal, revision: Revision, params: dict[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "name" must be a tool name')
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "arguments" must be an object')

    try:
        memory_spec = _memory_spec(ctx, name)
        if memory_spec is not None:
            return await _call_memory_tool(ctx, principal, memory_spec, arguments)
        return await _call_proxied_tool(ctx, principal, name, arguments)
    except JsonRpcError as exc:
        if exc.code == INVALID_PARAMS and revision.input_errors_are_tool_results:
            code = exc.data.get("code") if isinstance(exc.data, dict) else None
            if code in ("invalid_tool_input", "tool_input_too_large", "json_too_deep"):
                return _text_result(json.dumps({"error": exc.data, "message": exc.message}), True)
        raise


async def _call_proxied_tool(
    ctx: McpContext, principal: Principal, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:

    input_bytes = len(json.dumps(arguments, separators=(",", ":"), ensure_ascii=False).encode())
    try:
        reply = await call_tool(ctx.gateway, principal, name, arguments, input_bytes)
    except ApiError as exc:
        if exc.code == "tool_not_found":
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}") from None
        if exc.code in _INVALID_PARAMS_CODES:
            data: dict[str, Any] = {"code": exc.code, **(exc.details or {})}
            raise JsonRpcError(INVALID_PARAMS, f"Invalid arguments: {exc.message}", data) from None
        if exc.code in _TOOL_FAILURE_CODES:
            return _text_result(f"gateway error {exc.code}: {exc.message}", True)
        raise
    return _reply_result(reply)


def _memory_spec(ctx: McpContext, name: str) -> dict[str, Any] | None:
    """The memory tool `name` as the dispatcher describes it, if it is one."""
    if ctx.memory is None:
        return None
    return next((dict(s) for s in ctx.memory.specs() if s["name"] == name), None)


async def _call_memory_tool(
    ctx: McpContext, principal: Principal, spec: dict[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    name = spec["name"]
    if not await _memory_available(ctx, principal) or ctx.memory is None:
        # Not listed for this caller, so unknown to it.
        raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}")
    if not _memory_tool_allowed(principal, name):
        scope = _MEMORY_TOOL_SCOPE[name]
        refusal = forbidden("insufficient_scope", f"{name} needs the {scope!r} scope")
        refusal.headers["x-required-scope"] = scope
        raise refusal
    schema = spec["inputSchema"]
    problems = validate(schema, arguments)
    if problems:
        raise JsonRpcError(
            INVALID_PARAMS,
            f"Invalid arguments for {name}",
            {"code": "invalid_tool_input", "problems": [p.as_dict() for p in problems]},
        )
    try:  # memory arguments reach D1, where a NUL would fail its checks after the answer
        check_value(arguments, STORAGE_LIMITS)
    except JsonLimitError as exc:
        raise JsonRpcError(INVALID_PARAMS, exc.message, {"code": exc.code}) from None
    # The schema's top-level defaults (recall_memory's top_k: 5, ADR-0030), applied so the
    # dispatcher always gets them.
    defaults = {
        key: prop["default"]
        for key, prop in schema.get("properties", {}).items()
        if isinstance(prop, dict) and prop.get("default") is not None
    }
    arguments = {**defaults, **arguments}
    try:
        result = await ctx.memory.call(principal.tenant, name, arguments)
    except Exception as exc:
        code = getattr(exc, "code", None)
        if isinstance(exc, ValueError) and isinstance(code, str):
            # Refused input (the dispatcher's contract: a ValueError with a stable `code`):
            # the client gets the reason, as for a schema failure; nothing was written.
            refused = {"error": {"code": code, "message": str(exc)}}
            return _text_result(json.dumps(refused, ensure_ascii=False), True)
        # The type only: the message of a memory failure may quote the stored content.
        log.error(
            "memory tool %s failed (tenant %s): %s", name, principal.tenant, type(exc).__name__
        )
        return _text_result(f"{name} failed with an internal error; try again later", True)
    return _text_result(json.dumps(result, ensure_ascii=False, default=str), False)
