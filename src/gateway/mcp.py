"""MCP over Streamable HTTP at `POST /mcp`, revisions 2025-06-18, 2025-11-25 and 2026-07-28:
what each answers, and with which HTTP status, is docs/gateway.md, "MCP at `/mcp`" (after the
Python SDK 2.3.0's `classify_inbound_request`). Stateless: each POST carries its bearer and one
message. Bad bearer: HTTP 401 (-32001); missing scope: 403 (-32003); an `Origin` must be in
`MCP_ALLOWED_ORIGINS` (never compared with `Host`). A 2026-07-28 request's checks run in order,
first failure wins: `_meta` (-32602), headers against the body (-32020), version served (-32022).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.credentials import (
    GATEWAY_ERROR_HEADER,
    Principal,
    authenticate_bearer,
    load_tenant,
)
from gateway.json_schema import validate
from gateway.tool_config import load_tools
from gateway.tool_proxy import TOOL_ARGUMENT_LIMITS, GatewayContext, call_tool
from http_messages import (
    STORAGE_LIMITS,
    ApiError,
    Headers,
    HttpRequest,
    HttpResponse,
    JsonLimitError,
    check_value,
    empty_response,
    json_response,
    loads_bounded,
)

log = logging.getLogger(__name__)

HANDSHAKE_VERSIONS = ("2025-06-18", "2025-11-25")
MODERN_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = (*HANDSHAKE_VERSIONS, MODERN_VERSION)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
# Short: an operator may register a tool at any time.
LIST_TTL_MS = 60_000

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
# Server-defined (JSON-RPC leaves -32000..-32099 to implementations; the last two are MCP's).
UNAUTHORIZED = -32001
FORBIDDEN = -32003
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022
# 2026-07-28 HTTP statuses by JSON-RPC code (the SDK's ERROR_CODE_HTTP_STATUS).
MODERN_ERROR_STATUS = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400}
MODERN_ERROR_STATUS |= {UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404}

# The scope each memory tool needs beside API keys' `memory` (OAuth grants split it).
_MEMORY_TOOL_SCOPE = {"recall_memory": "memory:read", "store_memory": "memory:write"}
# Gateway error codes that are failures of the tool itself (a result with isError: true).
_TOOL_FAILURE_CODES = frozenset(
    {"credential_missing", "upstream_forbidden", "upstream_timeout", "upstream_unreachable"}
    | {"upstream_error", "upstream_response_too_large"}
)
_INPUT_ERROR_CODES = ("invalid_tool_input", "tool_input_too_large", "json_too_deep")
_B64_HEADER = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")

RequestId = str | int


class MemoryToolDispatcher(Protocol):
    """ADR-0030's memory tools for a request, built outside the hot path. `call` returns JSON;
    refused input is a `ValueError` with a string `code` (shown), anything else is not shown."""

    def specs(self) -> Sequence[Mapping[str, Any]]: ...

    async def call(
        self, tenant: str, tool_name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class McpContext:
    gateway: GatewayContext
    memory: MemoryToolDispatcher | None = None
    allowed_origins: frozenset[str] = frozenset()


@dataclass(eq=False)  # eq would make the exception unhashable
class JsonRpcError(Exception):
    code: int
    message: str
    data: Any = None
    http_status: int = 200
    headers: dict[str, str] = field(default_factory=dict)

    def response(self, request_id: RequestId | None) -> HttpResponse:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        body = {"jsonrpc": "2.0", "id": request_id, "error": error}
        return json_response(body, status=self.http_status, headers=self.headers)


def _invalid_request(message: str) -> JsonRpcError:
    return JsonRpcError(INVALID_REQUEST, f"Invalid Request: {message}", http_status=400)


async def handle_mcp_post(ctx: McpContext, request: HttpRequest) -> HttpResponse:
    """Answer one Streamable HTTP POST. Never raises."""
    request_id: RequestId | None = None
    version: str | None = None
    try:
        origin = request.headers.get("origin")
        if origin is not None and origin.strip().lower() not in ctx.allowed_origins:
            raise ApiError(403, "origin_not_allowed", "requests from this Origin are not allowed")
        gw = ctx.gateway
        principal = await authenticate_bearer(
            gw.kv, gw.cache, gw.clock, request.headers.get("authorization"), gw.resources
        )
        try:
            message = loads_bounded(request.body, TOOL_ARGUMENT_LIMITS)
        except ValueError as exc:  # JsonLimitError, JSONDecodeError, UnicodeDecodeError
            limit = exc if isinstance(exc, JsonLimitError) else None
            data, status = ({"code": limit.code}, limit.status) if limit else (None, 400)
            raise JsonRpcError(PARSE_ERROR, f"Parse error: {exc}", data, status) from None
        if isinstance(message, list):
            raise _invalid_request(
                "JSON-RPC batches are not supported (MCP 2025-06-18 removed batching); send "
                "one message per POST"
            )
        if not isinstance(message, dict):
            raise _invalid_request("expected a JSON object")
        raw_id = message.get("id")
        # MCP: "the ID MUST NOT be null"; JSON-RPC ids are strings or numbers (not booleans).
        if isinstance(raw_id, str) or (isinstance(raw_id, int) and not isinstance(raw_id, bool)):
            request_id = raw_id
        if message.get("jsonrpc") != "2.0":
            raise _invalid_request('"jsonrpc" must be "2.0"')
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                return empty_response(202)  # a response to a server request; we send none
            raise _invalid_request('no "method"')
        method = message["method"]
        if not isinstance(method, str):
            raise _invalid_request('"method" must be a string')
        if "id" in message and request_id is None:
            raise _invalid_request('"id" must be a string or an integer (not null)')
        if request_id is None:
            return empty_response(202)  # a notification: nothing to do for a stateless server
        params = {} if message.get("params") is None else message["params"]
        version = classify(request.headers, method, params)
        if not isinstance(params, dict):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "params" must be an object')
        result = await _dispatch(ctx, principal, version, method, params)
    except JsonRpcError as exc:
        if version == MODERN_VERSION:
            exc.http_status = MODERN_ERROR_STATUS.get(exc.code, exc.http_status)
        return exc.response(request_id)
    except ApiError as exc:
        # Before the message was read (origin, auth), or a refusal of the caller: HTTP level.
        data = {"code": exc.code}
        if request_id is None or exc.status in (401, 403):
            code = {401: UNAUTHORIZED, 403: FORBIDDEN}.get(exc.status, INTERNAL_ERROR)
            headers = {GATEWAY_ERROR_HEADER: exc.code, **exc.headers}
            return JsonRpcError(code, exc.message, data, exc.status, headers).response(request_id)
        return JsonRpcError(INTERNAL_ERROR, exc.message, data).response(request_id)
    return json_response({"jsonrpc": "2.0", "id": request_id, "result": result})


def _unsupported(requested: Any) -> JsonRpcError:
    data = {"supported": list(SUPPORTED_VERSIONS), "requested": requested}
    return JsonRpcError(UNSUPPORTED_VERSION, "Unsupported protocol version", data, 400)


def classify(headers: Headers, method: str, params: Any) -> str:
    """The protocol version one request is answered in; raises `JsonRpcError`."""
    header = headers.get("mcp-protocol-version")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if (isinstance(meta, dict) and META_VERSION in meta) or header == MODERN_VERSION:
        return _classify_modern(headers, method, params)
    # Any other version named (2024-11-05 and 2025-03-26 too): HTTP 400 as every revision
    # asks, with 2026-07-28's -32022 naming the served ones, so a client retries with one.
    if header is not None and header not in HANDSHAKE_VERSIONS:
        raise _unsupported(header)
    if method == "initialize" or header is None:
        return "2025-06-18"  # initialize negotiates; no header: 2025-06-18's rules
    return header


def _classify_modern(headers: Headers, method: str, params: Any) -> str:
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or not {META_VERSION, META_CAPABILITIES} <= meta.keys():
        message = f"params._meta must be an object carrying {META_VERSION!r} and "
        raise JsonRpcError(INVALID_PARAMS, f"{message}{META_CAPABILITIES!r}", http_status=400)
    version = meta[META_VERSION]
    mismatch = None
    if headers.get("mcp-protocol-version") != version:
        mismatch = "MCP-Protocol-Version header does not match params._meta's version"
    elif headers.get("mcp-method") != method:
        mismatch = "Mcp-Method header does not match the method"
    elif (
        method == "tools/call"
        and params.get("name") is not None
        and decode_header_value(headers.get("mcp-name")) != params["name"]
    ):
        mismatch = "Mcp-Name header does not match the tool name"
    if mismatch:
        raise JsonRpcError(HEADER_MISMATCH, mismatch, http_status=400)
    if not isinstance(version, str):
        raise JsonRpcError(INVALID_PARAMS, "params._meta's version must be a string", None, 400)
    if version != MODERN_VERSION:
        raise _unsupported(version)
    return version


def decode_header_value(value: str | None) -> str | None:
    """A header value as sent, or the UTF-8 inside the SDK's `=?base64?…?=` wrapping."""
    match = _B64_HEADER.fullmatch(value or "")
    if value is None or match is None:
        return value
    try:
        decoded = base64.b64decode(match["payload"], validate=True)
        canonical = base64.b64encode(decoded).decode("ascii") == match["payload"]
        return decoded.decode("utf-8") if canonical else None
    except (binascii.Error, UnicodeDecodeError):
        return None


def _shape(version: str, result: dict[str, Any], cacheable: bool) -> dict[str, Any]:
    """A result as `version` has it (2026-07-28 adds `resultType`, serverInfo, TTL hints)."""
    if version != MODERN_VERSION:
        return result
    shaped = {**result, "resultType": "complete"}
    if cacheable:
        shaped |= {"ttlMs": LIST_TTL_MS, "cacheScope": "private"}
    meta = shaped.get("_meta")
    shaped["_meta"] = {
        **(meta if isinstance(meta, dict) else {}),
        "io.modelcontextprotocol/serverInfo": SERVER_INFO,
    }
    return shaped


async def _dispatch(
    ctx: McpContext, principal: Principal, version: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    modern = version == MODERN_VERSION
    # 2026-07-28 removed initialize and ping; server/discover exists only there.
    if method == "initialize" and not modern:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "protocolVersion" must be a string')
        return {
            "protocolVersion": requested if requested in HANDSHAKE_VERSIONS else "2025-11-25",
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }
    if method == "ping" and not modern:
        return {}
    if method == "server/discover" and modern:
        discover = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": CAPABILITIES}
        return _shape(version, discover | {"instructions": INSTRUCTIONS}, cacheable=True)
    if method == "tools/list":
        gw = ctx.gateway
        tools: list[dict[str, Any]] = []
        if "tools" in principal.scopes:
            configs = await load_tools(gw.kv, gw.cache, gw.clock, principal.tenant)
            tools += [config.mcp_tool() for config in configs]
        if ctx.memory is not None and await _memory_available(ctx, principal):
            specs = ctx.memory.specs()
            tools += [dict(s) for s in specs if _may_use_memory_tool(principal, s["name"])]
        return _shape(version, {"tools": tools}, cacheable=True)
    if method == "tools/call":
        return _shape(version, await _call_tool(ctx, principal, version, params), cacheable=False)
    raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")


def _may_use_memory_tool(principal: Principal, name: str) -> bool:
    scope = _MEMORY_TOOL_SCOPE.get(name, "memory:read")
    return "memory" in principal.scopes or scope in principal.scopes


async def _memory_available(ctx: McpContext, principal: Principal) -> bool:
    """Enabled for the tenant and one memory scope held (callers check the deployment's)."""
    if not any(_may_use_memory_tool(principal, n) for n in _MEMORY_TOOL_SCOPE):
        return False
    gw = ctx.gateway
    tenant = await load_tenant(gw.kv, gw.cache, gw.clock, principal.tenant)
    return tenant is not None and tenant.memory_enabled


def _text_result(text: str, is_error: bool) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


async def _call_tool(
    ctx: McpContext, principal: Principal, version: str, params: dict[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "name" must be a tool name')
    arguments = {} if params.get("arguments") is None else params["arguments"]
    if not isinstance(arguments, dict):
        raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "arguments" must be an object')
    try:
        specs = ctx.memory.specs() if ctx.memory is not None else ()
        spec = next((s for s in specs if s["name"] == name), None)
        if spec is not None:
            return await _call_memory_tool(ctx, principal, spec, arguments)
        return await _call_proxied_tool(ctx, principal, name, arguments)
    except JsonRpcError as exc:
        code = exc.data.get("code") if isinstance(exc.data, dict) else None
        # SEP-1303 (2025-11-25 on): bad arguments are a result the model can read and fix.
        if version != "2025-06-18" and code in _INPUT_ERROR_CODES and exc.code == INVALID_PARAMS:
            return _text_result(json.dumps({"error": exc.data, "message": exc.message}), True)
        raise


async def _call_proxied_tool(
    ctx: McpContext, principal: Principal, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    try:
        reply = await call_tool(ctx.gateway, principal, name, arguments)
    except ApiError as exc:
        if exc.code == "tool_not_found":
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}") from None
        if exc.code in ("invalid_tool_input", "tool_input_too_large"):
            data: dict[str, Any] = {"code": exc.code, **(exc.details or {})}
            raise JsonRpcError(INVALID_PARAMS, f"Invalid arguments: {exc.message}", data) from None
        if exc.code in _TOOL_FAILURE_CODES:
            return _text_result(f"gateway error {exc.code}: {exc.message}", True)
        raise
    text = reply.body.decode("utf-8", errors="replace")
    if reply.status >= 400:
        return _text_result(f"upstream returned HTTP {reply.status}: {text}", True)
    return _text_result(text, False)


async def _call_memory_tool(
    ctx: McpContext, principal: Principal, spec: Mapping[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    name = spec["name"]
    if ctx.memory is None or not await _memory_available(ctx, principal):
        raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}")  # not listed for this caller
    if not _may_use_memory_tool(principal, name):
        scope = _MEMORY_TOOL_SCOPE[name]
        refusal = ApiError(403, "insufficient_scope", f"{name} needs the {scope!r} scope")
        refusal.headers["x-required-scope"] = scope  # for the step-up challenge (oauth_tokens)
        raise refusal
    schema = spec["inputSchema"]
    problems = validate(schema, arguments)
    if problems:
        data = {"code": "invalid_tool_input", "problems": problems}
        raise JsonRpcError(INVALID_PARAMS, f"Invalid arguments for {name}", data)
    try:  # memory arguments reach D1, where a NUL would fail its checks after the answer
        check_value(arguments, STORAGE_LIMITS)
    except JsonLimitError as exc:
        raise JsonRpcError(INVALID_PARAMS, exc.message, {"code": exc.code}) from None
    # The schema's top-level defaults (ADR-0030: recall_memory's top_k 5) for the dispatcher.
    defaults = {
        key: prop["default"]
        for key, prop in schema.get("properties", {}).items()
        if isinstance(prop, dict) and prop.get("default") is not None
    }
    try:
        result = await ctx.memory.call(principal.tenant, name, {**defaults, **arguments})
    except Exception as exc:
        code = getattr(exc, "code", None)
        if isinstance(exc, ValueError) and isinstance(code, str):
            # Refused input (the dispatcher's contract): the reason, as for a schema failure.
            refused = {"error": {"code": code, "message": str(exc)}}
            return _text_result(json.dumps(refused, ensure_ascii=False), True)
        # The type only: the message of a memory failure may quote the stored content.
        log.error(
            "memory tool %s failed (tenant %s): %s", name, principal.tenant, type(exc).__name__
        )
        return _text_result(f"{name} failed with an internal error; try again later", True)
    return _text_result(json.dumps(result, ensure_ascii=False, default=str), False)
