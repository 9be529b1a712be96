"""The gateway's routes: adapt the request's `Bindings` to what the hot path may touch.

This is the only gateway module that sees `Bindings` (and so, through its type, the D1,
Vectorize and Durable Object ports). It hands the hot path a `KVNamespace`, the clock and
an httpx client factory, and MCP an optional `MemoryToolDispatcher`.

Memory tools: the app hands `McpRoute` a factory of the memory tools' dispatcher when it
builds its routes (outside the hot-path modules: `worker.app.routes`). Without one, or when
the deployment lacks the semantic tier (D1 + Vectorize + embedder), `recall_memory` /
`store_memory` are not offered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import httpx

from bindings.environment import Bindings
from gateway.errors import gateway_error_response
from gateway.mcp import McpContext, handle_mcp_post, method_not_allowed
from gateway.memory_tools import MemoryToolDispatcher
from gateway.oauth_tokens import add_resource_metadata, origin_of, resources_for_origin
from gateway.outbound import OutboundPolicy
from gateway.tool_proxy import GatewayContext, handle_tool_call
from http_messages import HttpRequest, HttpResponse
from http_messages.errors import ApiError

MemoryDispatcherFactory = Callable[[Bindings], MemoryToolDispatcher]


class RouteCall(Protocol):
    """What the edge's router hands a handler (`worker.router.Call`), as far as the gateway
    reads it: the request, its path parameters and the bindings. API keys are checked here,
    on the hot path, not by the router."""

    @property
    def request(self) -> HttpRequest: ...
    @property
    def params(self) -> dict[str, str]: ...
    @property
    def bindings(self) -> Bindings: ...


def has_semantic_tier(bindings: Bindings) -> bool:
    return (
        bindings.db is not None and bindings.vectors is not None and bindings.embedder is not None
    )


def gateway_context(bindings: Bindings, request: HttpRequest | None = None) -> GatewayContext:
    """KV, clock and client factory from the request's bindings (503 when KV is absent);
    with the request, the OAuth resources its origin answers for."""
    if bindings.kv is None:
        raise ApiError(503, "kv_unavailable", "this deployment has no KV namespace bound")

    def client_factory(timeout: float) -> httpx.AsyncClient:
        return bindings.http_client(timeout=timeout)

    return GatewayContext(
        kv=bindings.kv,
        clock=bindings.clock,
        client_factory=client_factory,
        outbound=OutboundPolicy.from_settings(bindings.settings),
        resolver=bindings.resolve_host,
        resources=resources_for_origin(origin_of(request.url)) if request else frozenset(),
    )


def mcp_context(
    bindings: Bindings,
    request: HttpRequest | None = None,
    memory_tools: MemoryDispatcherFactory | None = None,
) -> McpContext:
    memory = None
    if memory_tools is not None and has_semantic_tier(bindings):
        memory = memory_tools(bindings)
    return McpContext(
        gateway=gateway_context(bindings, request),
        memory=memory,
        allowed_origins=bindings.settings.mcp_origins,
    )


async def tool_call_route(call: RouteCall) -> HttpResponse:
    """`POST /api/v1/tools/{tool_name}`."""
    try:
        ctx = gateway_context(call.bindings, call.request)
    except ApiError as exc:
        return gateway_error_response(exc)
    response = await handle_tool_call(ctx, call.request, call.params["tool_name"])
    return add_resource_metadata(response, call.request.url)


class McpRoute:
    """`POST /mcp`, offering the memory tools `memory_tools` builds (None: none)."""

    def __init__(self, memory_tools: MemoryDispatcherFactory | None) -> None:
        self.memory_tools = memory_tools

    async def __call__(self, call: RouteCall) -> HttpResponse:
        try:
            ctx = mcp_context(call.bindings, call.request, self.memory_tools)
        except ApiError as exc:
            return gateway_error_response(exc)
        return add_resource_metadata(await handle_mcp_post(ctx, call.request), call.request.url)


async def mcp_not_allowed_route(call: RouteCall) -> HttpResponse:
    """`GET /mcp` and `DELETE /mcp`: 405, no SSE stream and no sessions."""
    return method_not_allowed()
