-- 0005: tenant-scoped operators (ADR-29, docs/memory-api.md). A Cloudflare Access identity
-- may operate a tenant only when a row grants it: by email (users), by common name
-- (service tokens) or by an Access group named in the token's `groups` claim.
-- tenant_id '*' is the platform-admin role (every tenant, and routes naming no tenant).
-- Tenant first in the key, like every other table.
CREATE TABLE operator_grants (
    tenant_id       TEXT NOT NULL CHECK (tenant_id = '*' OR length(tenant_id) BETWEEN 1 AND 128),
    principal_kind  TEXT NOT NULL CHECK (principal_kind IN ('email', 'common_name', 'group')),
    principal       TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 256),
    granted_by      TEXT NOT NULL DEFAULT '',
    granted_at      INTEGER NOT NULL CHECK (granted_at > 0),
    PRIMARY KEY (tenant_id, principal_kind, principal)
) STRICT;
