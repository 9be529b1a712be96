"""Operators' tenant grants (`operator_grants`, migration 0007); every statement on the table.

A grant is `(tenant, kind, principal)`, kind `email` (lower-cased), `common_name` (service
tokens) or `group`; tenant `*` is the platform-admin role. `PLATFORM_ADMINS` makes platform
admins without a row, each entry matching only its own kind. Without D1: 503 `grants_unavailable`.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from authorization import oauth_store
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from http_messages import ApiError

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
        named = [("email", (self.email or "").lower()), ("common_name", self.common_name or "")]
        return [(kind, name) for kind, name in named if name] + [("group", g) for g in self.groups]


def normalize(kind: PrincipalKind, principal: str) -> str:
    return principal.strip().lower() if kind == "email" else principal.strip()


def _db(bindings: Bindings) -> D1Database:
    if bindings.db is None:
        raise ApiError(503, "grants_unavailable", "operator grants need the D1 binding")
    return bindings.db


def _bootstrap_admin(who: Principal, bindings: Bindings) -> bool:
    """`PLATFORM_ADMINS` names `who` by the kind it was configured as: an email entry
    matches only the token's email, a common-name entry only a service token's common name
    (`bindings.settings.parse_platform_admins`)."""
    admins = bindings.settings.platform_admin_identities
    return bool(
        (who.email and ("email", who.email.lower()) in admins)
        or (who.common_name and ("common_name", who.common_name) in admins)
    )


def _matching(pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """The SQL condition matching any of `pairs`, and its one bound value.

    The pairs travel as one JSON array read back with `json_each`, so an identity in any
    number of Access groups binds one parameter (D1 allows 100 per statement; binding two
    per group locked out operators in 49 or more groups, issue 26)."""
    condition = (
        "(principal_kind, principal) IN (SELECT json_extract(value, '$[0]'), "
        "json_extract(value, '$[1]') FROM json_each(?))"
    )
    return condition, json.dumps([list(pair) for pair in pairs])


async def granted(who: Principal, tenant: str | None, bindings: Bindings) -> bool:
    """True when `who` may operate `tenant` (None: a route that names no tenant, which
    needs the platform-admin role)."""
    if _bootstrap_admin(who, bindings):
        return True
    pairs = who.pairs()
    if not pairs:
        return False
    condition, value = _matching(pairs)
    sql = f"SELECT 1 AS ok FROM operator_grants WHERE tenant_id IN (?, ?) AND {condition} LIMIT 1"
    own = PLATFORM if tenant is None else tenant
    return await _db(bindings).prepare(sql).bind(own, PLATFORM, value).first() is not None


async def granted_tenants(who: Principal, bindings: Bindings) -> set[str] | None:
    """The tenants `who` holds a grant for; None for a platform admin (every tenant)."""
    if await granted(who, None, bindings):
        return None
    pairs = who.pairs()
    if not pairs:
        return set()
    condition, value = _matching(pairs)
    sql = f"SELECT DISTINCT tenant_id FROM operator_grants WHERE tenant_id != ? AND {condition}"
    result = await _db(bindings).prepare(sql).bind(PLATFORM, value).all()
    return {str(row["tenant_id"]) for row in result.results}


async def grant(
    bindings: Bindings, tenant: str, kind: PrincipalKind, principal: str, by: str
) -> Grant:
    """Grant `principal` the tenant (`*`: platform admin). Idempotent."""
    db = _db(bindings)
    value = normalize(kind, principal)
    now_ms = int(bindings.clock.now() * 1000)
    await db.prepare(_GRANT).bind(tenant, kind, value, by, now_ms).run()
    return Grant(tenant=tenant, kind=kind, principal=value, granted_by=by, granted_at=now_ms)


async def revoke_grant(
    bindings: Bindings, tenant: str, kind: PrincipalKind, principal: str
) -> bool:
    """Take the grant back, and with it the OAuth consents it carried: their grants are
    revoked and their refresh tokens deleted here; their access tokens' KV records are
    the caller's to delete (`worker.oauth.protocol.finish_revocations`)."""
    db = _db(bindings)
    statements = _revocation(tenant, kind, principal, int(bindings.clock.now()))
    results = await db.batch([db.prepare(sql).bind(*values) for sql, values in statements])
    return bool(results[0].meta.changes)


def _revocation(
    tenant: str, kind: PrincipalKind, principal: str, now: int
) -> list[tuple[str, tuple[str | int, ...]]]:
    value = normalize(kind, principal)
    return [
        (_REVOKE, (tenant, kind, value)),
        (oauth_store.END_CONSENTS, (now, tenant, tenant, kind, value)),
        (oauth_store.DROP_REVOKED_REFRESH, ()),
    ]


# Module-level so `literal_statements` renders exactly what runs.
_GRANT = (
    "INSERT INTO operator_grants (tenant_id, principal_kind, principal, granted_by, granted_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_REVOKE = "DELETE FROM operator_grants WHERE tenant_id = ? AND principal_kind = ? AND principal = ?"


def literal_statements(
    action: Literal["grant", "revoke"],
    tenants: list[str],
    kind: PrincipalKind,
    principal: str,
    by: str,
    now_ms: int,
) -> list[str]:
    """What `grant` / `revoke_grant` run, as literal SQL (for `wrangler d1 execute
    --command`, which binds no parameters)."""
    value = normalize(kind, principal)
    statements = [
        pair
        for t in tenants
        for pair in (
            [(_GRANT, (t, kind, value, by, now_ms))]
            if action == "grant"
            else _revocation(t, kind, value, now_ms // 1000)
        )
    ]
    return [
        "".join(p + _literal(v) for p, v in zip(sql.split("?"), row, strict=False))
        + sql.split("?")[-1]
        + ";"
        for sql, row in statements
    ]


def _literal(value: str | int) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"
