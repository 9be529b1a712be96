"""Tenant-scoped operators: which Cloudflare Access identities may operate which tenants.

Contract:

* Grants live in D1 (`operator_grants`, migration 0005): `(tenant, kind, principal)` with
  kind `email` (users, compared lower-cased), `common_name` (service tokens) or `group` (an
  Access group in the token's `groups` claim). Tenant `*` is the platform-admin role.
* `PLATFORM_ADMINS` (a comma list of emails / common names, a Worker var) bootstraps
  platform admins without a row, so the first operator can grant the others.
* `require_tenant_grant(identity, tenant, bindings)` runs in the Access gate
  (`worker.access.operator`) after the token is verified and before the handler: a route
  with `{tenant}` needs a grant for that tenant or `*`; a route without one needs `*`.
  Otherwise 403 `tenant_forbidden` and nothing runs; without D1 the check fails closed
  (503 `grants_unavailable`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from bindings.environment import Bindings
from worker.errors import ApiError

PLATFORM = "*"
PrincipalKind = Literal["email", "common_name", "group"]


class Grant(BaseModel):
    tenant: str
    kind: PrincipalKind
    principal: str
    granted_by: str
    granted_at: int


class Principal(BaseModel):
    """The names one identity is known by, as grants match them."""

    email: str | None = None
    common_name: str | None = None
    groups: tuple[str, ...] = ()

    def pairs(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        if self.email:
            found.append(("email", self.email.lower()))
        if self.common_name:
            found.append(("common_name", self.common_name))
        found.extend(("group", g) for g in self.groups)
        return found


def normalize(kind: PrincipalKind, principal: str) -> str:
    return principal.strip().lower() if kind == "email" else principal.strip()


def _bootstrap_admin(who: Principal, bindings: Bindings) -> bool:
    admins = {a.strip() for a in bindings.settings.platform_admins.split(",") if a.strip()}
    lowered = {a.lower() for a in admins}
    return bool(
        (who.email and who.email.lower() in lowered)
        or (who.common_name and who.common_name in admins)
    )


async def granted(who: Principal, tenant: str | None, bindings: Bindings) -> bool:
    """True when `who` may operate `tenant` (None: a route that names no tenant)."""
    if _bootstrap_admin(who, bindings):
        return True
    pairs = who.pairs()
    if not pairs:
        return False
    if bindings.db is None:
        raise ApiError(503, "grants_unavailable", "operator grants need the D1 binding")
    tenants = [PLATFORM] if tenant is None else [tenant, PLATFORM]
    matches = " OR ".join("(principal_kind = ? AND principal = ?)" for _ in pairs)
    slots = ", ".join("?" for _ in tenants)
    values = [v for pair in pairs for v in pair]
    row = (
        await bindings.db.prepare(
            f"SELECT 1 AS ok FROM operator_grants WHERE tenant_id IN ({slots}) "
            f"AND ({matches}) LIMIT 1"
        )
        .bind(*tenants, *values)
        .first()
    )
    return row is not None


async def require_tenant_grant(who: Principal, tenant: str | None, bindings: Bindings) -> None:
    if not await granted(who, tenant, bindings):
        target = f"tenant {tenant!r}" if tenant is not None else "cross-tenant routes"
        raise ApiError(403, "tenant_forbidden", f"this identity has no grant for {target}")


async def grant(
    bindings: Bindings, tenant: str, kind: PrincipalKind, principal: str, by: str
) -> Grant:
    """Grant `principal` the tenant (`*`: platform admin). Idempotent."""
    if bindings.db is None:
        raise ApiError(503, "grants_unavailable", "operator grants need the D1 binding")
    value = normalize(kind, principal)
    now_ms = int(bindings.clock.now() * 1000)
    await (
        bindings.db.prepare(
            "INSERT INTO operator_grants (tenant_id, principal_kind, principal, granted_by, "
            "granted_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        )
        .bind(tenant, kind, value, by, now_ms)
        .run()
    )
    return Grant(tenant=tenant, kind=kind, principal=value, granted_by=by, granted_at=now_ms)


async def revoke_grant(
    bindings: Bindings, tenant: str, kind: PrincipalKind, principal: str
) -> bool:
    if bindings.db is None:
        raise ApiError(503, "grants_unavailable", "operator grants need the D1 binding")
    result = await (
        bindings.db.prepare(
            "DELETE FROM operator_grants WHERE tenant_id = ? AND principal_kind = ? "
            "AND principal = ?"
        )
        .bind(tenant, kind, normalize(kind, principal))
        .run()
    )
    return bool(result.meta.changes)
