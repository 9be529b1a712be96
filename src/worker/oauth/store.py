"""The authorization server's state: D1 rows (migration 0014) and KV access-token records.

Every secret is stored as its SHA-256 (`hash_token`). Single use is enforced by D1 itself:
a code, consent ticket or refresh token is taken by one `UPDATE ... WHERE used IS NULL`
whose `changes` must be 1, so two concurrent redemptions cannot both succeed.

Revoking a grant marks its row, deletes its refresh tokens, and deletes its access-token
records from KV (listed in `oauth_access_tokens`); this isolate's read cache forgets them at
once, other isolates within the gateway's 30 s bound (docs/gateway.md "Caching").

Size: all of the server's persistence (the six tables of migration 0014 and the KV records)
in one module, so the single-use and revocation rules are read side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from bindings.ports.d1 import D1Database
from bindings.ports.kv import KVNamespace
from gateway.kv_cache import ISOLATE_CACHE
from gateway.oauth_tokens import AccessTokenRecord, access_token_key, hash_token
from worker.oauth.protocol import (
    ACCESS_TOKEN_TTL,
    CODE_PREFIX,
    CODE_TTL,
    CONSENT_TTL,
    KV_TTL_MARGIN,
    REFRESH_TOKEN_PREFIX,
    REFRESH_TOKEN_TTL,
    new_access_token,
    new_id,
    new_secret,
)


class ClientInfo(BaseModel):
    """What the server knows of a client."""

    model_config = ConfigDict(frozen=True)

    client_id: str
    kind: str
    client_name: str
    redirect_uris: tuple[str, ...]
    auth_method: str = "none"
    secret_hash: str | None = None

    @property
    def host(self) -> str:
        """The host a person can check: the document's for CIMD, the redirect's for DCR."""
        source = self.client_id if self.kind == "cimd" else self.redirect_uris[0]
        parts = urlsplit(source)
        return parts.hostname or parts.scheme

    @property
    def display_name(self) -> str:
        return self.client_name or self.host


@dataclass(frozen=True)
class Grant:
    """One consent: a person let a client act on a tenant with these scopes, for a resource."""

    tenant: str
    grant_id: str
    client_id: str
    principal: str
    scopes: tuple[str, ...]
    resource: str
    created_at: int = 0
    last_used_at: int = 0
    revoked_at: int | None = None


@dataclass(frozen=True)
class CodeRow:
    grant: Grant
    redirect_uri: str
    code_challenge: str
    expires_at: int
    grant_id: str | None


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str
    expires_in: int


# --- clients ------------------------------------------------------------------------------


async def save_client(
    db: D1Database, client: ClientInfo, metadata: dict[str, Any], now: int, fetched_at: int
) -> None:
    await (
        db.prepare(
            "INSERT INTO oauth_clients (client_id, kind, client_name, redirect_uris, metadata, "
            "secret_hash, created_at, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, "
            "redirect_uris = excluded.redirect_uris, metadata = excluded.metadata, "
            "fetched_at = excluded.fetched_at"
        )
        .bind(
            client.client_id,
            client.kind,
            client.client_name,
            json.dumps(list(client.redirect_uris)),
            json.dumps({**metadata, "token_endpoint_auth_method": client.auth_method}),
            client.secret_hash,
            max(now, 1),
            fetched_at,
        )
        .run()
    )


async def load_client(db: D1Database, client_id: str) -> tuple[ClientInfo, int] | None:
    """The stored client and when its document was fetched (0 for DCR)."""
    row = (
        await db.prepare("SELECT * FROM oauth_clients WHERE client_id = ?").bind(client_id).first()
    )
    if row is None:
        return None
    metadata = json.loads(str(row["metadata"]))
    client = ClientInfo(
        client_id=str(row["client_id"]),
        kind=str(row["kind"]),
        client_name=str(row["client_name"]),
        redirect_uris=tuple(json.loads(str(row["redirect_uris"]))),
        auth_method=str(metadata.get("token_endpoint_auth_method", "none")),
        secret_hash=row["secret_hash"] if isinstance(row["secret_hash"], str) else None,
    )
    return client, int(row["fetched_at"] or 0)


async def client_names(db: D1Database, client_ids: list[str]) -> dict[str, str]:
    if not client_ids:
        return {}
    slots = ", ".join("?" for _ in client_ids)
    result = await (
        db.prepare(f"SELECT client_id, client_name FROM oauth_clients WHERE client_id IN ({slots})")
        .bind(*client_ids)
        .all()
    )
    return {str(r["client_id"]): str(r["client_name"]) for r in result.results}


# --- consent tickets ----------------------------------------------------------------------


async def create_consent(db: D1Database, principal: str, request: dict[str, Any], now: int) -> str:
    ticket = new_secret("amt_")
    await (
        db.prepare(
            "INSERT INTO oauth_consents (ticket_hash, principal, request, expires_at) "
            "VALUES (?, ?, ?, ?)"
        )
        .bind(hash_token(ticket), principal, json.dumps(request), now + CONSENT_TTL)
        .run()
    )
    return ticket


async def take_consent(
    db: D1Database, ticket: str, principal: str, now: int
) -> dict[str, Any] | None:
    """The pending request behind `ticket`, once, for the identity that was shown it."""
    digest = hash_token(ticket)
    taken = await (
        db.prepare(
            "UPDATE oauth_consents SET used_at = ? WHERE ticket_hash = ? AND principal = ? "
            "AND used_at IS NULL AND expires_at > ?"
        )
        .bind(now, digest, principal, now)
        .run()
    )
    if taken.meta.changes != 1:
        return None
    row = (
        await db.prepare("SELECT request FROM oauth_consents WHERE ticket_hash = ?")
        .bind(digest)
        .first()
    )
    return json.loads(str(row["request"])) if row else None


# --- codes --------------------------------------------------------------------------------


async def create_code(
    db: D1Database, grant: Grant, redirect_uri: str, challenge: str, now: int
) -> str:
    code = new_secret(CODE_PREFIX)
    await (
        db.prepare(
            "INSERT INTO oauth_codes (code_hash, tenant_id, client_id, principal, scopes, "
            "resource, redirect_uri, code_challenge, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        .bind(
            hash_token(code),
            grant.tenant,
            grant.client_id,
            grant.principal,
            " ".join(grant.scopes),
            grant.resource,
            redirect_uri,
            challenge,
            now + CODE_TTL,
        )
        .run()
    )
    return code


def _code_row(row: dict[str, Any]) -> CodeRow:
    grant = Grant(
        tenant=str(row["tenant_id"]),
        grant_id="",
        client_id=str(row["client_id"]),
        principal=str(row["principal"]),
        scopes=tuple(str(row["scopes"]).split()),
        resource=str(row["resource"]),
    )
    return CodeRow(
        grant=grant,
        redirect_uri=str(row["redirect_uri"]),
        code_challenge=str(row["code_challenge"]),
        expires_at=int(row["expires_at"]),
        grant_id=row["grant_id"] if isinstance(row["grant_id"], str) else None,
    )


async def redeem_code(db: D1Database, code: str, now: int) -> tuple[CodeRow | None, bool]:
    """`(row, first_use)`: the code's row, and whether this call took it. A code seen for the
    second time returns `(row, False)` so the caller can revoke what it issued."""
    digest = hash_token(code)
    taken = await (
        db.prepare("UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL")
        .bind(now, digest)
        .run()
    )
    row = await db.prepare("SELECT * FROM oauth_codes WHERE code_hash = ?").bind(digest).first()
    if row is None:
        return None, False
    return _code_row(row), taken.meta.changes == 1


async def bind_code_to_grant(db: D1Database, code: str, grant_id: str) -> None:
    await (
        db.prepare("UPDATE oauth_codes SET grant_id = ? WHERE code_hash = ?")
        .bind(grant_id, hash_token(code))
        .run()
    )


# --- grants and tokens --------------------------------------------------------------------


async def create_grant(db: D1Database, grant: Grant, now: int) -> Grant:
    grant_id = new_id("g_")
    await (
        db.prepare(
            "INSERT INTO oauth_grants (tenant_id, grant_id, client_id, principal, scopes, "
            "resource, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        .bind(
            grant.tenant,
            grant_id,
            grant.client_id,
            grant.principal,
            " ".join(grant.scopes),
            grant.resource,
            now,
            now,
        )
        .run()
    )
    return Grant(**{**grant.__dict__, "grant_id": grant_id, "created_at": now, "last_used_at": now})


def _grant(row: dict[str, Any]) -> Grant:
    return Grant(
        tenant=str(row["tenant_id"]),
        grant_id=str(row["grant_id"]),
        client_id=str(row["client_id"]),
        principal=str(row["principal"]),
        scopes=tuple(str(row["scopes"]).split()),
        resource=str(row["resource"]),
        created_at=int(row["created_at"]),
        last_used_at=int(row["last_used_at"]),
        revoked_at=int(row["revoked_at"]) if row["revoked_at"] is not None else None,
    )


async def load_grant(db: D1Database, tenant: str, grant_id: str) -> Grant | None:
    row = await (
        db.prepare("SELECT * FROM oauth_grants WHERE tenant_id = ? AND grant_id = ?")
        .bind(tenant, grant_id)
        .first()
    )
    return _grant(row) if row else None


async def list_grants(db: D1Database, tenant: str) -> list[Grant]:
    result = await (
        db.prepare(
            "SELECT * FROM oauth_grants WHERE tenant_id = ? AND revoked_at IS NULL "
            "ORDER BY created_at DESC, grant_id LIMIT 500"
        )
        .bind(tenant)
        .all()
    )
    return [_grant(r) for r in result.results]


async def issue_tokens(db: D1Database, kv: KVNamespace, grant: Grant, now: int) -> Tokens:
    """A fresh access token (KV record + D1 index row) and refresh token (D1) for `grant`."""
    access, refresh = new_access_token(), new_secret(REFRESH_TOKEN_PREFIX)
    access_hash = hash_token(access)
    record = AccessTokenRecord(
        tenant=grant.tenant,
        principal=grant.principal,
        client_id=grant.client_id,
        grant_id=grant.grant_id,
        scopes=grant.scopes,
        resource=grant.resource,
        issued_at=now,
        expires_at=now + ACCESS_TOKEN_TTL,
    )
    await db.batch(
        [
            db.prepare(
                "INSERT INTO oauth_access_tokens (tenant_id, grant_id, token_hash, expires_at) "
                "VALUES (?, ?, ?, ?)"
            ).bind(grant.tenant, grant.grant_id, access_hash, now + ACCESS_TOKEN_TTL),
            db.prepare(
                "INSERT INTO oauth_refresh_tokens (token_hash, tenant_id, grant_id, expires_at) "
                "VALUES (?, ?, ?, ?)"
            ).bind(hash_token(refresh), grant.tenant, grant.grant_id, now + REFRESH_TOKEN_TTL),
            db.prepare(
                "DELETE FROM oauth_access_tokens WHERE tenant_id = ? AND grant_id = ? "
                "AND expires_at < ?"
            ).bind(grant.tenant, grant.grant_id, now),
        ]
    )
    await kv.put(
        access_token_key(access_hash),
        record.model_dump_json(),
        expiration_ttl=ACCESS_TOKEN_TTL + KV_TTL_MARGIN,
    )
    return Tokens(access_token=access, refresh_token=refresh, expires_in=ACCESS_TOKEN_TTL)


async def refresh_token_grant(db: D1Database, refresh_token: str) -> Grant | None:
    row = await (
        db.prepare(
            "SELECT g.* FROM oauth_refresh_tokens r JOIN oauth_grants g "
            "ON g.tenant_id = r.tenant_id AND g.grant_id = r.grant_id WHERE r.token_hash = ?"
        )
        .bind(hash_token(refresh_token))
        .first()
    )
    return _grant(row) if row else None


async def rotate_refresh_token(
    db: D1Database, refresh_token: str, now: int
) -> tuple[Grant | None, str]:
    """`(grant, status)` for a presented refresh token: status `ok` (this call rotated it),
    `reused` (it was rotated before: the caller revokes the grant) or `expired`."""
    digest = hash_token(refresh_token)
    row = await (
        db.prepare("SELECT rotated_at, expires_at FROM oauth_refresh_tokens WHERE token_hash = ?")
        .bind(digest)
        .first()
    )
    grant = await refresh_token_grant(db, refresh_token)
    if row is None or grant is None:
        return None, "unknown"
    if row["rotated_at"] is not None:
        return grant, "reused"
    if int(row["expires_at"]) <= now:
        return grant, "expired"
    taken = await (
        db.prepare(
            "UPDATE oauth_refresh_tokens SET rotated_at = ? WHERE token_hash = ? "
            "AND rotated_at IS NULL"
        )
        .bind(now, digest)
        .run()
    )
    return grant, "ok" if taken.meta.changes == 1 else "reused"


async def touch_grant(db: D1Database, grant: Grant, now: int) -> None:
    await (
        db.prepare("UPDATE oauth_grants SET last_used_at = ? WHERE tenant_id = ? AND grant_id = ?")
        .bind(now, grant.tenant, grant.grant_id)
        .run()
    )


async def revoke_grant(
    db: D1Database, kv: KVNamespace, tenant: str, grant_id: str, reason: str, now: int
) -> bool:
    """End a grant and every token it holds; False when there was no such live grant."""
    marked = await (
        db.prepare(
            "UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ? WHERE tenant_id = ? "
            "AND grant_id = ? AND revoked_at IS NULL"
        )
        .bind(now, reason, tenant, grant_id)
        .run()
    )
    hashes = await (
        db.prepare(
            "SELECT token_hash FROM oauth_access_tokens WHERE tenant_id = ? AND grant_id = ?"
        )
        .bind(tenant, grant_id)
        .all()
    )
    for row in hashes.results:
        await forget_access_token(kv, str(row["token_hash"]))
    await db.batch(
        [
            db.prepare("DELETE FROM oauth_access_tokens WHERE tenant_id = ? AND grant_id = ?").bind(
                tenant, grant_id
            ),
            db.prepare(
                "DELETE FROM oauth_refresh_tokens WHERE tenant_id = ? AND grant_id = ?"
            ).bind(tenant, grant_id),
        ]
    )
    return marked.meta.changes == 1


async def forget_access_token(kv: KVNamespace, token_hash: str) -> None:
    key = access_token_key(token_hash)
    await kv.delete(key)
    ISOLATE_CACHE.forget(key)


async def access_token_grant(kv: KVNamespace, access_token: str) -> AccessTokenRecord | None:
    raw = await kv.get(access_token_key(hash_token(access_token)))
    return AccessTokenRecord.model_validate_json(raw) if raw else None
