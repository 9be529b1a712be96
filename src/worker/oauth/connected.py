"""A tenant's connected OAuth clients: list them (live grants, newest first) and revoke one
with all its tokens; the Access-gated admin routes and the CLI share these."""

from __future__ import annotations

from typing import Any

from authorization import oauth_store
from bindings.environment import Bindings
from http_messages import HttpResponse, json_response
from worker.app import Call
from worker.errors import ApiError
from worker.oauth.protocol import revoke_grant


def _db_kv(bindings: Bindings) -> tuple[Any, Any]:
    if bindings.db is None or bindings.kv is None:
        raise ApiError(503, "oauth_unavailable", "connected clients need the D1 and KV bindings")
    return bindings.db, bindings.kv


async def list_connected(bindings: Bindings, tenant: str) -> list[dict[str, Any]]:
    db, _kv = _db_kv(bindings)
    grants = await oauth_store.list_grants(db, tenant)
    names = await oauth_store.client_names(db, sorted({g.client_id for g in grants}))
    return [
        {
            "grant_id": g.grant_id,
            "client_id": g.client_id,
            "client_name": names.get(g.client_id, ""),
            "principal": g.principal,
            "scopes": list(g.scopes),
            "resource": g.resource,
            "created_at": g.created_at,
            "last_used_at": g.last_used_at,
        }
        for g in grants
    ]


async def revoke_connected(bindings: Bindings, tenant: str, grant_id: str, by: str) -> bool:
    db, kv = _db_kv(bindings)
    now = int(bindings.clock.now())
    return await revoke_grant(db, kv, tenant, grant_id, f"revoked_by:{by}"[:200], now)


async def list_route(call: Call[None, None]) -> HttpResponse:
    """The tenant's connected OAuth clients."""
    tenant = call.params["tenant"]
    clients = await list_connected(call.bindings, tenant)
    return json_response({"tenant": tenant, "clients": clients})


async def revoke_route(call: Call[None, None]) -> HttpResponse:
    """Revoke one connected client's grant: its refresh and access tokens stop working."""
    tenant, grant_id = call.params["tenant"], call.params["grant_id"]
    if not await revoke_connected(call.bindings, tenant, grant_id, call.operator.principal):
        raise ApiError(404, "grant_not_found", f"no live grant {grant_id!r} on tenant {tenant!r}")
    return json_response({"tenant": tenant, "grant_id": grant_id, "revoked": True})
