-- 0001: episodic tier (agent_runs, memory_episodes) and the semantic facts table.
--
-- Conventions (DESIGN.md invariants 2 and 7):
--   * every table is STRICT and keyed tenant-first; every index starts with tenant_id, so
--     each tenant query is an index range scan and tenants never share a scan;
--   * ids are TEXT ULIDs (26 chars, time-ordered); times are INTEGER epoch milliseconds
--     (exact in a JS double, unlike 64-bit ids);
--   * JSON columns are checked with json_valid so a bad write fails in the database too.
-- No BEGIN/COMMIT: wrangler applies each migration file atomically.

CREATE TABLE agent_runs (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    run_id       TEXT NOT NULL CHECK (length(run_id) = 26),
    agent_type   TEXT NOT NULL CHECK (length(agent_type) BETWEEN 1 AND 64),
    instance_id  TEXT NOT NULL CHECK (length(instance_id) BETWEEN 1 AND 128),
    status       TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    input        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(input)),
    output       TEXT CHECK (output IS NULL OR json_valid(output)),
    error        TEXT,
    steps        INTEGER NOT NULL DEFAULT 0 CHECK (steps >= 0),
    started_at   INTEGER NOT NULL CHECK (started_at > 0),
    finished_at  INTEGER CHECK (finished_at IS NULL OR finished_at >= started_at),
    PRIMARY KEY (tenant_id, run_id)
) STRICT;

CREATE INDEX agent_runs_by_type ON agent_runs (tenant_id, agent_type, started_at DESC);
CREATE INDEX agent_runs_by_status ON agent_runs (tenant_id, status, started_at DESC);
CREATE INDEX agent_runs_by_start ON agent_runs (tenant_id, started_at);

CREATE TABLE memory_episodes (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    episode_id    TEXT NOT NULL CHECK (length(episode_id) = 26),
    run_id        TEXT NOT NULL CHECK (length(run_id) = 26),
    agent_type    TEXT NOT NULL CHECK (length(agent_type) BETWEEN 1 AND 64),
    instance_id   TEXT NOT NULL CHECK (length(instance_id) BETWEEN 1 AND 128),
    kind          TEXT NOT NULL
                  CHECK (kind IN ('observation', 'action', 'outcome', 'message', 'summary')),
    subject       TEXT CHECK (subject IS NULL OR length(subject) BETWEEN 1 AND 256),
    content       TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 32768),
    data          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    importance    REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0.0 AND 1.0),
    content_hash  TEXT NOT NULL CHECK (length(content_hash) = 64),
    created_at    INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, episode_id)
) STRICT;

-- Turn start reads "last 10 episodes of (tenant, agent_type)": one index seek.
CREATE INDEX memory_episodes_recent ON memory_episodes (tenant_id, agent_type, created_at DESC);
CREATE INDEX memory_episodes_by_run ON memory_episodes (tenant_id, run_id, created_at);
-- The weekly prune walks episodes by age within a tenant.
CREATE INDEX memory_episodes_by_age ON memory_episodes (tenant_id, created_at);
CREATE INDEX memory_episodes_by_subject ON memory_episodes (tenant_id, subject)
    WHERE subject IS NOT NULL;

-- Semantic facts: D1 is the source of truth; Vectorize holds one vector per fact, joined by
-- fact_id. status 'pending_vector' marks a row whose vector write has not been confirmed.
CREATE TABLE semantic_facts (
    -- Explicit INTEGER PRIMARY KEY: a stable rowid (VACUUM may renumber implicit rowids),
    -- which the FTS index below is keyed by.
    fts_rowid             INTEGER PRIMARY KEY,
    tenant_id             TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    fact_id               TEXT NOT NULL CHECK (length(fact_id) = 26),
    agent_type            TEXT NOT NULL CHECK (length(agent_type) BETWEEN 1 AND 64),
    subject               TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 256),
    predicate             TEXT NOT NULL CHECK (length(predicate) BETWEEN 1 AND 128),
    object                TEXT NOT NULL CHECK (length(object) <= 1024),
    content               TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 8192),
    metadata              TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    confidence            REAL NOT NULL CHECK (confidence BETWEEN 0.0 AND 1.0),
    source                TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 64),
    learned_from_run_id   TEXT,
    embedding_provider    TEXT NOT NULL,
    embedding_model       TEXT NOT NULL,
    embedding_dimensions  INTEGER NOT NULL CHECK (embedding_dimensions BETWEEN 1 AND 1536),
    content_hash          TEXT NOT NULL CHECK (length(content_hash) = 64),
    status                TEXT NOT NULL
                          CHECK (status IN ('pending_vector', 'active', 'superseded')),
    superseded_by         TEXT,
    valid_from            INTEGER NOT NULL,
    valid_to              INTEGER CHECK (valid_to IS NULL OR valid_to >= valid_from),
    created_at            INTEGER NOT NULL CHECK (created_at > 0),
    updated_at            INTEGER NOT NULL,
    last_recalled_at      INTEGER,
    recall_count          INTEGER NOT NULL DEFAULT 0 CHECK (recall_count >= 0),
    UNIQUE (tenant_id, fact_id),
    -- learn() is idempotent: the same content about the same subject is one fact.
    UNIQUE (tenant_id, subject, content_hash),
    CHECK ((status = 'superseded') = (superseded_by IS NOT NULL))
) STRICT;

CREATE INDEX semantic_facts_by_subject
    ON semantic_facts (tenant_id, subject, predicate, status);
CREATE INDEX semantic_facts_by_status ON semantic_facts (tenant_id, status, created_at);
CREATE INDEX semantic_facts_by_agent ON semantic_facts (tenant_id, agent_type, status);

-- Keyword channel of recall: FTS5 (supported by D1). Kept in step with semantic_facts by
-- triggers so no code path can forget it; tenant_id is stored to filter matches.
CREATE VIRTUAL TABLE semantic_facts_fts USING fts5(
    content,
    tenant_id UNINDEXED,
    fact_id UNINDEXED,
    tokenize = 'porter unicode61'
);

CREATE TRIGGER semantic_facts_fts_insert AFTER INSERT ON semantic_facts BEGIN
    INSERT INTO semantic_facts_fts (rowid, content, tenant_id, fact_id)
    VALUES (new.fts_rowid, new.content, new.tenant_id, new.fact_id);
END;

CREATE TRIGGER semantic_facts_fts_delete AFTER DELETE ON semantic_facts BEGIN
    DELETE FROM semantic_facts_fts WHERE rowid = old.fts_rowid;
END;

CREATE TRIGGER semantic_facts_fts_update AFTER UPDATE OF content ON semantic_facts BEGIN
    UPDATE semantic_facts_fts SET content = new.content WHERE rowid = old.fts_rowid;
END;
