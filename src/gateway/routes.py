"""The gateway's routes, its one module that sees `Bindings`: the hot path gets KV, the clock,
a client factory and the outbound policy; MCP also the app's memory tools, if any."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from bindings.environment import Bindings
from gateway.credentials import (
    MCP_PATH,
    add_resource_metadata,
    authenticate_bearer,
    credential_sealer,
    gateway_error_response,
    origin_of,
    resources_for_origin,
)
from gateway.mcp import McpContext, MemoryToolDispatcher, handle_mcp_post
from gateway.outbound import OutboundPolicy
from gateway.tool_proxy import GatewayContext, call_tool
from http_messages import ApiError, HttpRequest, HttpResponse

MemoryDispatcherFactory = Callable[[Bindings], MemoryToolDispatcher]


class RouteCall(Protocol):
    """What the gateway reads of `worker.app.Call` (keys are checked by the hot path)."""

    @property
    def request(self) -> HttpRequest: ...
    @property
    def params(self) -> dict[str, str]: ...
    @property
    def bindings(self) -> Bindings: ...


def issuer_of(bindings: Bindings, request: HttpRequest) -> str:
    """This server's origin: `OAUTH_ISSUER` when set (then the request's Host plays no part),
    else the origin the request reached (the local runtime's, or an unconfigured Worker's)."""
    return bindings.settings.public_origin or origin_of(request.url)


def gateway_context(bindings: Bindings, request: HttpRequest) -> GatewayContext:
    """The hot path's context (503 `kv_unavailable` without KV) for `request`'s resource."""
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "this deployment has no KV namespace bound")
    return GatewayContext(
        kv=bindings.kv,
        clock=bindings.clock,
        client_factory=lambda timeout: bindings.http_client(timeout=timeout),
        outbound=lambda: OutboundPolicy.from_settings(bindings.settings),
        resolver=bindings.resolve_host,
        resources=resources_for_origin(issuer_of(bindings, request), request.path),
        sealer=credential_sealer(bindings.cipher, bindings.settings.pii_keks),
    )


async def tool_call_route(call: RouteCall) -> HttpResponse:
    """`POST /api/v1/tools/{tool_name}`: the whole hot path (`gateway.tool_proxy`)."""
    try:
        ctx = gateway_context(call.bindings, call.request)
        authorization = call.request.headers.get("authorization")
        principal = await authenticate_bearer(
            ctx.kv, ctx.cache, ctx.clock, authorization, ctx.resources
        )
        response = await call_tool(ctx, principal, call.params["tool_name"], call.request.body)
    except ApiError as exc:
        response = gateway_error_response(exc)
    return add_resource_metadata(response, issuer_of(call.bindings, call.request), "")


class McpRoute:
    """`POST /mcp`, offering the memory tools `memory_tools` builds (None: none)."""

    def __init__(self, memory_tools: MemoryDispatcherFactory | None) -> None:
        self.memory_tools = memory_tools

    async def __call__(self, call: RouteCall) -> HttpResponse:
        bindings = call.bindings
        try:
            ctx = gateway_context(bindings, call.request)
        except ApiError as exc:
            return gateway_error_response(exc)
        semantic_tier = all(
            b is not None for b in (bindings.db, bindings.vectors, bindings.embedder)
        )
        memory = self.memory_tools(bindings) if self.memory_tools and semantic_tier else None
        mcp = McpContext(ctx, memory, bindings.settings.mcp_origins)
        response = await handle_mcp_post(mcp, call.request)
        return add_resource_metadata(response, issuer_of(bindings, call.request), MCP_PATH)


async def mcp_not_allowed_route(call: RouteCall) -> HttpResponse:
    """`GET`/`DELETE /mcp`: without valid credentials the 401 challenge (clients probe for
    auth with a GET), else 405 (no SSE stream, no sessions)."""
    try:
        ctx = gateway_context(call.bindings, call.request)
        authorization = call.request.headers.get("authorization")
        await authenticate_bearer(ctx.kv, ctx.cache, ctx.clock, authorization, ctx.resources)
        raise ApiError(
            405,
            "method_not_allowed",
            "this MCP endpoint is stateless and offers no SSE stream: POST one JSON-RPC "
            "message per request",
            headers={"allow": "POST"},
        )
    except ApiError as exc:
        response = gateway_error_response(exc)
    return add_resource_metadata(response, issuer_of(call.bindings, call.request), MCP_PATH)
