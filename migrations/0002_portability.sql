-- 0002: memory that can leave and arrive (issue 45, docs/portability.md). Control-plane tables
-- (the primary database only; `bindings.environment.CONTROL_PLANE_TABLES`, so a tenant move
-- never copies them): export and import jobs with their resumable progress, and the change
-- feed's webhook endpoints (secret sealed at rest), its delivery log (ids and outcomes, never
-- a payload) and the subjects erased while their changes may still be queued.
CREATE TABLE portability_jobs (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    job_id        TEXT NOT NULL CHECK (length(job_id) = 26),
    kind          TEXT NOT NULL CHECK (kind IN ('export', 'import')),
    status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'expired')),
    options       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(options)),
    progress      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(progress)),
    requested_by  TEXT NOT NULL DEFAULT '',
    started_at    INTEGER NOT NULL CHECK (started_at > 0),
    updated_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    expires_at    INTEGER,
    error         TEXT,
    PRIMARY KEY (tenant_id, job_id)
) STRICT;
CREATE INDEX portability_jobs_by_status ON portability_jobs (status, updated_at);
CREATE TABLE feed_endpoints (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    endpoint_id  TEXT NOT NULL CHECK (length(endpoint_id) = 26),
    url          TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    secret       TEXT NOT NULL CHECK (json_valid(secret)),
    status       TEXT NOT NULL CHECK (status IN ('active', 'paused')),
    description  TEXT NOT NULL DEFAULT '' CHECK (length(description) <= 200),
    created_at   INTEGER NOT NULL CHECK (created_at > 0),
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, endpoint_id)
) STRICT;
CREATE TABLE feed_deliveries (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    endpoint_id  TEXT NOT NULL CHECK (length(endpoint_id) = 26),
    message_id   TEXT NOT NULL CHECK (length(message_id) = 26),
    type         TEXT NOT NULL CHECK (length(type) BETWEEN 1 AND 64),
    status       TEXT NOT NULL
                 CHECK (status IN ('delivered', 'retrying', 'dead', 'dropped', 'skipped')),
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    http_status  INTEGER,
    error        TEXT,
    created_at   INTEGER NOT NULL CHECK (created_at > 0),
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, endpoint_id, message_id)
) STRICT;
CREATE INDEX feed_deliveries_recent ON feed_deliveries (tenant_id, updated_at);
CREATE TABLE feed_erasures (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    subject_hash  TEXT NOT NULL CHECK (length(subject_hash) = 64),
    erased_at     INTEGER NOT NULL CHECK (erased_at > 0),
    PRIMARY KEY (tenant_id, subject_hash)
) STRICT, WITHOUT ROWID;
