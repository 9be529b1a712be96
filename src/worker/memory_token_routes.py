"""Operator routes for agent memory tokens (Cloudflare Access gated).

    POST   /admin/tenants/{tenant}/memory-tokens          {agent_id, tiers?, scopes?, ttl_seconds?}
    DELETE /admin/tenants/{tenant}/memory-tokens/{jti}

Minting answers 201 with the token and its claims (`MintedToken`); revoking puts the `jti`
on the KV deny-list (idempotent, 200). 422 `validation_error` / `invalid_path` for bad
input, 503 `memory_tokens_not_configured` without `MEMORY_TOKEN_KEYS`.
"""

from __future__ import annotations

from pydantic import BaseModel

from worker.memory_tokens import MintedToken, MintRequest, mint_memory_token, revoke
from worker.router import Call


class TokenRevoked(BaseModel):
    tenant: str
    jti: str
    revoked: bool


async def mint(call: Call[MintRequest, None]) -> MintedToken:
    return await mint_memory_token(call.bindings, call.params["tenant"], call.body)


async def revoke_token(call: Call[None, None]) -> TokenRevoked:
    tenant, jti = call.params["tenant"], call.params["jti"]
    await revoke(call.bindings, tenant, jti)
    return TokenRevoked(tenant=tenant, jti=jti, revoked=True)
