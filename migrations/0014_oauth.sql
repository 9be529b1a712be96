-- 0014: the OAuth 2.1 authorization server for MCP clients (issue 27, docs/gateway.md "OAuth").
-- Secrets are never stored: codes, refresh tokens, access tokens, client secrets and consent
-- tickets are kept as the SHA-256 hex of the random value (`*_hash`). Access tokens
-- themselves live in KV (gw:oauth:at:{hash}) for the hot path; the rows here let an
-- operator or a refresh-token reuse revoke them. Tables not owned by one tenant (clients,
-- consent tickets, codes, refresh tokens) are WITHOUT ROWID with their hash as the key;
-- tenant-owned tables lead with tenant_id.

-- A client: registered dynamically (RFC 7591, kind 'dcr') or known by the URL of its
-- metadata document (CIMD, kind 'cimd': client_id is that https URL; the document is
-- cached here with the time it was fetched).
CREATE TABLE oauth_clients (
    client_id        TEXT NOT NULL PRIMARY KEY CHECK (length(client_id) BETWEEN 1 AND 2048),
    kind             TEXT NOT NULL CHECK (kind IN ('dcr', 'cimd')),
    client_name      TEXT NOT NULL DEFAULT '' CHECK (length(client_name) <= 200),
    redirect_uris    TEXT NOT NULL CHECK (json_valid(redirect_uris)),
    metadata         TEXT NOT NULL CHECK (json_valid(metadata)),
    secret_hash      TEXT CHECK (secret_hash IS NULL OR length(secret_hash) = 64),
    created_at       INTEGER NOT NULL CHECK (created_at > 0),
    fetched_at       INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- One pending consent: the validated authorization request, shown on the consent page,
-- bound to the Access identity that saw it. Single use, ten minutes.
CREATE TABLE oauth_consents (
    ticket_hash      TEXT NOT NULL PRIMARY KEY CHECK (length(ticket_hash) = 64),
    principal        TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 320),
    request          TEXT NOT NULL CHECK (json_valid(request)),
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER
) STRICT, WITHOUT ROWID;

-- An authorization code: single use, one minute; grant_id is set when it is exchanged, so
-- a second exchange can revoke what the first one issued (RFC 6749 §4.1.2).
CREATE TABLE oauth_codes (
    code_hash        TEXT NOT NULL PRIMARY KEY CHECK (length(code_hash) = 64),
    tenant_id        TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    client_id        TEXT NOT NULL,
    principal        TEXT NOT NULL,
    scopes           TEXT NOT NULL,
    resource         TEXT NOT NULL,
    redirect_uri     TEXT NOT NULL,
    code_challenge   TEXT NOT NULL CHECK (length(code_challenge) = 43),
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER,
    grant_id         TEXT
) STRICT, WITHOUT ROWID;

-- A grant: one person's consent for one client on one tenant (a "connected client"). Its
-- refresh tokens form one rotation family; revoking the grant ends all its tokens.
CREATE TABLE oauth_grants (
    tenant_id        TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    grant_id         TEXT NOT NULL CHECK (length(grant_id) BETWEEN 1 AND 64),
    client_id        TEXT NOT NULL,
    principal        TEXT NOT NULL,
    scopes           TEXT NOT NULL,
    resource         TEXT NOT NULL,
    created_at       INTEGER NOT NULL CHECK (created_at > 0),
    last_used_at     INTEGER NOT NULL,
    revoked_at       INTEGER,
    revoked_reason   TEXT,
    PRIMARY KEY (tenant_id, grant_id)
) STRICT, WITHOUT ROWID;

-- Refresh tokens: each use rotates (rotated_at set, a successor issued); presenting a
-- rotated one again revokes the whole grant (OAuth 2.1 §4.3.1, refresh token reuse).
CREATE TABLE oauth_refresh_tokens (
    token_hash       TEXT NOT NULL PRIMARY KEY CHECK (length(token_hash) = 64),
    tenant_id        TEXT NOT NULL,
    grant_id         TEXT NOT NULL,
    expires_at       INTEGER NOT NULL,
    rotated_at       INTEGER
) STRICT, WITHOUT ROWID;

-- The access tokens a grant holds in KV, so revocation can delete them there.
CREATE TABLE oauth_access_tokens (
    tenant_id        TEXT NOT NULL,
    grant_id         TEXT NOT NULL,
    token_hash       TEXT NOT NULL CHECK (length(token_hash) = 64),
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, grant_id, token_hash)
) STRICT, WITHOUT ROWID;
