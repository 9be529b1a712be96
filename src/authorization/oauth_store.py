"""The OAuth server's D1 rows (migration 0014): every statement on the `oauth_*` tables. Secrets
arrive only as their SHA-256 hex; single use is one `UPDATE ... WHERE <used> IS NULL` whose
`changes` must be 1, so two concurrent redemptions cannot both succeed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from bindings.ports.d1 import D1Database, D1Statement


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
        """The host that vouches for a CIMD client (its document's); "" for DCR, which
        nobody vouches for (the consent page names the redirect's destination instead)."""
        return (urlsplit(self.client_id).hostname or "") if self.kind == "cimd" else ""

    @property
    def display_name(self) -> str:
        return self.client_name or self.host or "An unnamed client"


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


def _sql(db: D1Database, sql: str, *values: Any) -> D1Statement:
    return db.prepare(sql).bind(*values)


async def save_client(
    db: D1Database, client: ClientInfo, metadata: dict[str, Any], now: int, fetched_at: int
) -> None:
    sql = (
        "INSERT INTO oauth_clients (client_id, kind, client_name, redirect_uris, metadata, "
        "secret_hash, created_at, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, "
        "redirect_uris = excluded.redirect_uris, metadata = excluded.metadata, "
        "fetched_at = excluded.fetched_at"
    )
    document = json.dumps({**metadata, "token_endpoint_auth_method": client.auth_method})
    uris = json.dumps(list(client.redirect_uris))
    await _sql(
        db, sql, client.client_id, client.kind, client.client_name, uris, document,
        client.secret_hash, max(now, 1), fetched_at,
    ).run()  # fmt: skip


async def load_client(db: D1Database, client_id: str) -> tuple[ClientInfo, int] | None:
    """The stored client and when its document was fetched (0 for DCR)."""
    row = await _sql(db, "SELECT * FROM oauth_clients WHERE client_id = ?", client_id).first()
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
    sql = f"SELECT client_id, client_name FROM oauth_clients WHERE client_id IN ({slots})"
    result = await _sql(db, sql, *client_ids).all()
    return {str(r["client_id"]): str(r["client_name"]) for r in result.results}


async def create_consent(
    db: D1Database, ticket_hash: str, principal: str, request: dict[str, Any], expires_at: int
) -> None:
    sql = (
        "INSERT INTO oauth_consents (ticket_hash, principal, request, expires_at) VALUES (?,?,?,?)"
    )
    await _sql(db, sql, ticket_hash, principal, json.dumps(request), expires_at).run()


async def take_consent(
    db: D1Database, ticket_hash: str, principal: str, now: int
) -> dict[str, Any] | None:
    """The pending request behind a ticket, once, for the identity that was shown it."""
    sql = (
        "UPDATE oauth_consents SET used_at = ? WHERE ticket_hash = ? AND principal = ? "
        "AND used_at IS NULL AND expires_at > ?"
    )
    if (await _sql(db, sql, now, ticket_hash, principal, now).run()).meta.changes != 1:
        return None
    sql = "SELECT request FROM oauth_consents WHERE ticket_hash = ?"
    row = await _sql(db, sql, ticket_hash).first()
    return json.loads(str(row["request"])) if row else None


async def create_code(
    db: D1Database, code_hash: str, grant: Grant, redirect_uri: str, challenge: str, expires: int
) -> None:
    sql = (
        "INSERT INTO oauth_codes (code_hash, tenant_id, client_id, principal, scopes, "
        "resource, redirect_uri, code_challenge, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    await _sql(
        db, sql, code_hash, grant.tenant, grant.client_id, grant.principal,
        " ".join(grant.scopes), grant.resource, redirect_uri, challenge, expires,
    ).run()  # fmt: skip


async def redeem_code(db: D1Database, code_hash: str, now: int) -> tuple[CodeRow | None, bool]:
    """`(row, first_use)`: the code's row, and whether this call took it. A code seen for the
    second time returns `(row, False)` so the caller can revoke what it issued."""
    sql = "UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL"
    taken = await _sql(db, sql, now, code_hash).run()
    row = await _sql(db, "SELECT * FROM oauth_codes WHERE code_hash = ?", code_hash).first()
    if row is None:
        return None, False
    code = CodeRow(
        grant=_grant({**row, "grant_id": "", "created_at": 0, "last_used_at": 0}),
        redirect_uri=str(row["redirect_uri"]),
        code_challenge=str(row["code_challenge"]),
        expires_at=int(row["expires_at"]),
        grant_id=row["grant_id"] if isinstance(row["grant_id"], str) else None,
    )
    return code, taken.meta.changes == 1


async def create_grant(db: D1Database, grant: Grant, code_hash: str) -> None:
    """Store `grant` and bind to it the code it was made from (a reuse of the code revokes it)."""
    sql = (
        "INSERT INTO oauth_grants (tenant_id, grant_id, client_id, principal, scopes, "
        "resource, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    bind = "UPDATE oauth_codes SET grant_id = ? WHERE code_hash = ?"
    await db.batch([_sql(
        db, sql, grant.tenant, grant.grant_id, grant.client_id, grant.principal,
        " ".join(grant.scopes), grant.resource, grant.created_at, grant.last_used_at,
    ), _sql(db, bind, grant.grant_id, code_hash)])  # fmt: skip


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
        revoked_at=int(row["revoked_at"]) if row.get("revoked_at") is not None else None,
    )


async def list_grants(db: D1Database, tenant: str) -> list[Grant]:
    sql = (
        "SELECT * FROM oauth_grants WHERE tenant_id = ? AND revoked_at IS NULL "
        "ORDER BY created_at DESC, grant_id LIMIT 500"
    )
    return [_grant(r) for r in (await _sql(db, sql, tenant).all()).results]


async def touch_grant(db: D1Database, grant: Grant, now: int) -> None:
    sql = "UPDATE oauth_grants SET last_used_at = ? WHERE tenant_id = ? AND grant_id = ?"
    await _sql(db, sql, now, grant.tenant, grant.grant_id).run()


async def add_tokens(
    db: D1Database, grant: Grant, access: tuple[str, int], refresh: tuple[str, int], now: int
) -> bool:
    """Index an access token (`(hash, expires_at)`, its record is in KV) and store a refresh
    token for `grant`, only while the grant is live (False when it was revoked meanwhile:
    the caller deletes the KV record); the grant's expired access-token rows go."""
    ids = (grant.tenant, grant.grant_id)
    insert = (
        "INSERT INTO oauth_{}_tokens (tenant_id, grant_id, token_hash, expires_at) "
        "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM oauth_grants WHERE tenant_id = ? "
        "AND grant_id = ? AND revoked_at IS NULL)"
    )
    where = "WHERE tenant_id = ? AND grant_id = ? AND expires_at < ?"
    results = await db.batch(
        [
            _sql(db, insert.format("access"), *ids, *access, *ids),
            _sql(db, insert.format("refresh"), *ids, *refresh, *ids),
            _sql(db, f"DELETE FROM oauth_access_tokens {where}", *ids, now),
        ]
    )
    return results[1].meta.changes == 1


async def refresh_token_grant(db: D1Database, refresh_hash: str) -> Grant | None:
    sql = (
        "SELECT g.* FROM oauth_refresh_tokens r JOIN oauth_grants g "
        "ON g.tenant_id = r.tenant_id AND g.grant_id = r.grant_id WHERE r.token_hash = ?"
    )
    row = await _sql(db, sql, refresh_hash).first()
    return _grant(row) if row else None


RefreshStatus = Literal["ok", "reused", "expired", "unknown"]


async def rotate_refresh_token(
    db: D1Database, refresh_hash: str, now: int
) -> tuple[Grant | None, RefreshStatus]:
    """`(grant, status)` for a presented refresh token: status `ok` (this call rotated it),
    `reused` (it was rotated before: the caller revokes the grant) or `expired`."""
    sql = "SELECT expires_at, rotated_at FROM oauth_refresh_tokens WHERE token_hash = ?"
    row = await _sql(db, sql, refresh_hash).first()
    grant = await refresh_token_grant(db, refresh_hash)
    if row is None or grant is None:
        return None, "unknown"
    if row["rotated_at"] is not None:
        return grant, "reused"
    if int(row["expires_at"]) <= now:
        return grant, "expired"
    sql = (
        "UPDATE oauth_refresh_tokens SET rotated_at = ? WHERE token_hash = ? AND rotated_at IS NULL"
    )
    taken = await _sql(db, sql, now, refresh_hash).run()
    return grant, "ok" if taken.meta.changes == 1 else "reused"


async def revoke_grant(
    db: D1Database,
    tenant: str,
    grant_id: str,
    reason: str,
    now: int,
    forget_access_token: Callable[[str], Awaitable[None]],
) -> bool:
    """End a grant and every token it holds; False when there was no such live grant.
    `forget_access_token(hash)` deletes an access token's KV record: it runs for each one
    before their index rows go, so a failure leaves them findable for a repeat."""
    sql = (
        "UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ? WHERE tenant_id = ? "
        "AND grant_id = ? AND revoked_at IS NULL"
    )
    marked = await _sql(db, sql, now, reason, tenant, grant_id).run()
    where = "WHERE tenant_id = ? AND grant_id = ?"
    hashes = await _sql(
        db, f"SELECT token_hash FROM oauth_access_tokens {where}", tenant, grant_id
    ).all()
    for row in hashes.results:
        await forget_access_token(str(row["token_hash"]))
    await db.batch(
        [
            _sql(db, f"DELETE FROM oauth_access_tokens {where}", tenant, grant_id),
            _sql(db, f"DELETE FROM oauth_refresh_tokens {where}", tenant, grant_id),
        ]
    )
    return marked.meta.changes == 1


# Ends the consents of an operator whose tenant grant was revoked (`operator_grants`): every
# live OAuth grant they gave on that tenant (`*`: on any) that no grant of theirs still
# covers. A group's revocation ends the consents of everyone on the tenant holding no grant
# by their own name (a consent does not record the groups it relied on). Bound to (now, tenant,
# tenant, kind, principal). Module-level so `operators revoke --wrangler` prints exactly what
# runs (`operator_grants.literal_statements`).
END_CONSENTS = (
    "UPDATE oauth_grants SET revoked_at = ?, revoked_reason = 'operator_grant_revoked' "
    "WHERE revoked_at IS NULL AND (tenant_id = ? OR ? = '*') "
    "AND (? = 'group' OR lower(principal) = lower(?)) AND NOT EXISTS (SELECT 1 FROM "
    "operator_grants o WHERE o.tenant_id IN (oauth_grants.tenant_id, '*') "
    "AND o.principal IN (oauth_grants.principal, lower(oauth_grants.principal)))"
)
DROP_REVOKED_REFRESH = (
    "DELETE FROM oauth_refresh_tokens WHERE EXISTS (SELECT 1 FROM oauth_grants g WHERE "
    "g.tenant_id = oauth_refresh_tokens.tenant_id AND g.grant_id = oauth_refresh_tokens.grant_id "
    "AND g.revoked_at IS NOT NULL)"
)


async def finish_revocations(
    db: D1Database, forget_access_token: Callable[[str], Awaitable[None]]
) -> int:
    """Delete what revoked grants still hold: refresh tokens, and access tokens (KV record
    first, `forget_access_token(hash)`, then the index row). A grant revoked by SQL alone
    (`operators revoke --wrangler`) is finished here by the minute cron. The count ended."""
    sql = (
        "SELECT a.token_hash FROM oauth_access_tokens a JOIN oauth_grants g ON g.tenant_id = "
        "a.tenant_id AND g.grant_id = a.grant_id WHERE g.revoked_at IS NOT NULL LIMIT 500"
    )
    hashes = [str(r["token_hash"]) for r in (await _sql(db, sql).all()).results]
    for token_hash in hashes:
        await forget_access_token(token_hash)
    gone = "DELETE FROM oauth_access_tokens WHERE token_hash IN (SELECT value FROM json_each(?))"
    await db.batch([_sql(db, gone, json.dumps(hashes)), _sql(db, DROP_REVOKED_REFRESH)])
    return len(hashes)


async def count_registrations(db: D1Database) -> int:
    row = await _sql(db, "SELECT COUNT(*) AS n FROM oauth_clients WHERE kind = 'dcr'").first()
    return int(row["n"]) if row else 0


async def sweep(db: D1Database, now: int, unused_after: int, revoked_kept: int) -> int:
    """Delete what can no longer be used: expired consents, codes and tokens (an access
    token's KV record expires by itself), grants revoked more than `revoked_kept` seconds
    ago, and clients without a grant (or a pending code) `unused_after` seconds after they
    registered or their document was fetched. The number of rows deleted."""
    unused = (
        "DELETE FROM oauth_clients WHERE max(created_at, fetched_at) < ? AND NOT EXISTS "
        "(SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.client_id) AND NOT "
        "EXISTS (SELECT 1 FROM oauth_codes c WHERE c.client_id = oauth_clients.client_id)"
    )
    results = await db.batch(
        [
            _sql(db, "DELETE FROM oauth_consents WHERE expires_at < ?", now),
            _sql(db, "DELETE FROM oauth_codes WHERE expires_at < ?", now),
            _sql(db, "DELETE FROM oauth_refresh_tokens WHERE expires_at < ?", now),
            _sql(db, "DELETE FROM oauth_access_tokens WHERE expires_at < ?", now),
            _sql(db, "DELETE FROM oauth_grants WHERE revoked_at < ?", now - revoked_kept),
            _sql(db, unused, now - unused_after),
        ]
    )
    return sum(r.meta.changes for r in results)
