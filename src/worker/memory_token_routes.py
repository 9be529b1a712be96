"""Operator routes for agent memory tokens (Cloudflare Access gated).

    POST   /admin/tenants/{tenant}/memory-tokens          {agent_id, tiers?, scopes?, ttl_seconds?}
    DELETE /admin/tenants/{tenant}/memory-tokens/{jti}

Minting answers 201 with the token and its claims (`MintedToken`); revoking puts the `jti`
on the KV deny-list (idempotent, 200). 422 `validation_error` / `invalid_path` for bad
input, 503 `memory_tokens_not_configured` without `MEMORY_TOKEN_KEYS`.
"""

from __future__ import annotations

from bindings.environment import Bindings
from http_messages import HttpRequest, HttpResponse, json_response
from worker.access import AccessIdentity, access_gated
from worker.body import parse_body
from worker.memory_models import TokenRevoked
from worker.memory_tokens import MintedToken, MintRequest, mint_memory_token, revoke
from worker.path_params import tenant_param


async def _mint(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    body = parse_body(request, MintRequest)
    minted: MintedToken = await mint_memory_token(bindings, tenant, body)
    return json_response(minted.model_dump(mode="json"), status=201)


async def _revoke(
    request: HttpRequest, params: dict[str, str], bindings: Bindings, identity: AccessIdentity
) -> HttpResponse:
    tenant = tenant_param(params)
    await revoke(bindings, tenant, params["jti"])
    return json_response(TokenRevoked(tenant=tenant, jti=params["jti"], revoked=True).model_dump())


mint_route = access_gated(_mint)
revoke_route = access_gated(_revoke)
