-- The schema every D1 database of this project is made from (docs/placement.md "Schema
-- changes"): what migrations 0001-0023 built, squashed into one file before anything was
-- deployed, in its smaller form (docs/placement.md "Bytes per memory"), with the run status
-- `interrupted` of 0024 (issue 47, written beside it) folded in:
--
--   * `semantic_facts.content_hash` holds the first 24 hex characters (96 bits) of the
--     content's SHA-256 (`tiers.semantic.writes.STORED_HASH_CHARS`): the row and its UNIQUE
--     (tenant_id, subject, content_hash) index;
--   * the keyword postings name their term by a number (`semantic_term_stats.term_id`) and
--     hold only the term's counts; a fact's two field lengths are stored once
--     (`keyword_lengths`), not in each of its postings. The triggers below write them from
--     `semantic_facts.index_terms`; statements read them through the `semantic_terms` view.
--
-- A later change is a new file after this one (0002_...), applied to every shard's database.

CREATE TABLE agent_runs (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    run_id       TEXT NOT NULL CHECK (length(run_id) = 26),
    agent_type   TEXT NOT NULL CHECK (length(agent_type) BETWEEN 1 AND 64),
    instance_id  TEXT NOT NULL CHECK (length(instance_id) BETWEEN 1 AND 128),
    status       TEXT NOT NULL
                 CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
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
    created_at    INTEGER NOT NULL CHECK (created_at > 0), namespace_key TEXT
    GENERATED ALWAYS AS ('agent-memory:' || tenant_id || ':' || instance_id) VIRTUAL, event_in_row INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, episode_id)
) STRICT;
CREATE INDEX memory_episodes_recent ON memory_episodes (tenant_id, agent_type, created_at DESC);
CREATE INDEX memory_episodes_by_run ON memory_episodes (tenant_id, run_id, created_at);
CREATE INDEX memory_episodes_by_age ON memory_episodes (tenant_id, created_at);
CREATE INDEX memory_episodes_by_subject ON memory_episodes (tenant_id, subject)
    WHERE subject IS NOT NULL;
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
    content_hash          TEXT NOT NULL CHECK (length(content_hash) = 24),
    status                TEXT NOT NULL
                          CHECK (status IN ('pending_vector', 'active', 'superseded')),
    superseded_by         TEXT,
    valid_from            INTEGER NOT NULL,
    valid_to              INTEGER CHECK (valid_to IS NULL OR valid_to >= valid_from),
    created_at            INTEGER NOT NULL CHECK (created_at > 0),
    updated_at            INTEGER NOT NULL,
    last_recalled_at      INTEGER,
    recall_count          INTEGER NOT NULL DEFAULT 0 CHECK (recall_count >= 0), key_entity TEXT NOT NULL DEFAULT ''
    CHECK (length(key_entity) <= 256), key_attribute TEXT NOT NULL DEFAULT ''
    CHECK (length(key_attribute) <= 128), key_source TEXT NOT NULL DEFAULT ''
    CHECK (key_source IN ('', 'structured', 'metadata', 'known_subject', 'named_entity',
                          'sentence_subject', 'speaker', 'none')), session_key TEXT
    CHECK (session_key IS NULL OR length(session_key) BETWEEN 1 AND 256), index_terms TEXT
    CHECK (index_terms IS NULL OR json_valid(index_terms)), index_length INTEGER NOT NULL DEFAULT 0
    CHECK (index_length >= 0), context_length INTEGER NOT NULL DEFAULT 0
    CHECK (context_length >= 0), event_in_row INTEGER NOT NULL DEFAULT 0,
    UNIQUE (tenant_id, fact_id),
    -- learn() is idempotent: the same content about the same subject is one fact.
    UNIQUE (tenant_id, subject, content_hash),
    CHECK ((status = 'superseded') = (superseded_by IS NOT NULL))
) STRICT;
CREATE INDEX semantic_facts_by_status ON semantic_facts (tenant_id, status, created_at);
CREATE TABLE memory_events (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    event_id      TEXT NOT NULL CHECK (length(event_id) = 26),
    kind          TEXT NOT NULL CHECK (kind IN ('memory_retrieved', 'memory_written')),
    tier          TEXT NOT NULL
                  CHECK (tier IN ('working', 'episodic', 'semantic', 'procedural')),
    agent_type    TEXT CHECK (agent_type IS NULL OR length(agent_type) BETWEEN 1 AND 64),
    run_id        TEXT CHECK (run_id IS NULL OR length(run_id) BETWEEN 1 AND 64),
    content_hash  TEXT CHECK (content_hash IS NULL OR length(content_hash) = 64),
    payload       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    created_at    INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, event_id)
) STRICT;
CREATE INDEX memory_events_by_age ON memory_events (tenant_id, created_at);
CREATE INDEX semantic_facts_by_predicate
    ON semantic_facts (tenant_id, predicate, status);
CREATE TABLE tenant_lifecycle (
    tenant_id               TEXT NOT NULL PRIMARY KEY
                            CHECK (length(tenant_id) BETWEEN 1 AND 128),
    episode_retention_days  INTEGER CHECK (episode_retention_days IS NULL
                                           OR episode_retention_days BETWEEN 1 AND 36500),
    episode_limit           INTEGER CHECK (episode_limit IS NULL
                                           OR episode_limit BETWEEN 1 AND 100000),
    updated_at              INTEGER NOT NULL CHECK (updated_at > 0),
    updated_by              TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE TABLE memory_tenant_stats (
    tenant_id  TEXT NOT NULL PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    episodes   INTEGER NOT NULL DEFAULT 0 CHECK (episodes >= 0)
) STRICT;
CREATE TRIGGER memory_episodes_limit BEFORE INSERT ON memory_episodes
WHEN COALESCE((SELECT episodes FROM memory_tenant_stats WHERE tenant_id = new.tenant_id), 0)
     >= COALESCE((SELECT episode_limit FROM tenant_lifecycle WHERE tenant_id = new.tenant_id),
                 100000)
 AND NOT EXISTS (SELECT 1 FROM memory_episodes
                 WHERE tenant_id = new.tenant_id AND episode_id = new.episode_id)
BEGIN
    SELECT RAISE(ABORT, 'episode_limit_reached: this tenant is at its episode limit; new episodes are refused until the prune or an erase frees room');
END;
CREATE TRIGGER memory_episodes_count_insert AFTER INSERT ON memory_episodes BEGIN
    INSERT INTO memory_tenant_stats (tenant_id, episodes) VALUES (new.tenant_id, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET episodes = episodes + 1;
END;
CREATE TRIGGER memory_episodes_count_delete AFTER DELETE ON memory_episodes BEGIN
    UPDATE memory_tenant_stats SET episodes = episodes - 1 WHERE tenant_id = old.tenant_id;
END;
CREATE TABLE lifecycle_archives (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    archive_key  TEXT NOT NULL CHECK (length(archive_key) BETWEEN 1 AND 1024),
    kind         TEXT NOT NULL CHECK (kind IN ('episodes', 'runs', 'events')),
    iso_week     TEXT NOT NULL CHECK (length(iso_week) = 8),
    rows         INTEGER NOT NULL CHECK (rows >= 0),
    matched      INTEGER NOT NULL,
    first_key    TEXT NOT NULL,
    last_key     TEXT NOT NULL,
    bytes        INTEGER NOT NULL CHECK (bytes >= 0),
    prune_id     TEXT NOT NULL,
    created_at   INTEGER NOT NULL CHECK (created_at > 0),
    rewritten_at INTEGER,
    PRIMARY KEY (tenant_id, archive_key),
    CHECK (matched = rows)
) STRICT;
CREATE INDEX lifecycle_archives_by_prune ON lifecycle_archives (tenant_id, prune_id);
CREATE TABLE lifecycle_prunes (
    prune_id      TEXT NOT NULL PRIMARY KEY CHECK (length(prune_id) BETWEEN 1 AND 64),
    scheduled_at  INTEGER NOT NULL CHECK (scheduled_at > 0),
    status        TEXT NOT NULL CHECK (status IN ('running', 'complete')),
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    invocations   INTEGER NOT NULL DEFAULT 0 CHECK (invocations >= 0)
) STRICT;
CREATE INDEX lifecycle_prunes_by_status ON lifecycle_prunes (status, scheduled_at);
CREATE TABLE lifecycle_prune_progress (
    tenant_id         TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    prune_id          TEXT NOT NULL,
    cutoff_ms         INTEGER NOT NULL,
    retention_days    INTEGER NOT NULL CHECK (retention_days >= 1),
    episodes_deleted  INTEGER NOT NULL DEFAULT 0 CHECK (episodes_deleted >= 0),
    runs_deleted      INTEGER NOT NULL DEFAULT 0 CHECK (runs_deleted >= 0),
    events_deleted    INTEGER NOT NULL DEFAULT 0 CHECK (events_deleted >= 0),
    batches           INTEGER NOT NULL DEFAULT 0 CHECK (batches >= 0),
    done              INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1)),
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, prune_id)
) STRICT;
CREATE TABLE fact_provenance (
    tenant_id    TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    fact_id      TEXT NOT NULL CHECK (length(fact_id) = 26),
    source_kind  TEXT NOT NULL CHECK (source_kind IN ('episode', 'fact', 'run')),
    source_id    TEXT NOT NULL CHECK (length(source_id) BETWEEN 1 AND 64),
    relation     TEXT NOT NULL CHECK (relation IN ('promoted_from', 'merged_from',
                                                    'summarised_from')),
    created_at   INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, fact_id, source_kind, source_id)
) STRICT;
CREATE INDEX fact_provenance_by_source ON fact_provenance (tenant_id, source_kind, source_id);
CREATE TABLE memory_links (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    from_fact_id  TEXT NOT NULL CHECK (length(from_fact_id) = 26),
    to_fact_id    TEXT NOT NULL CHECK (length(to_fact_id) = 26),
    score         REAL NOT NULL CHECK (score BETWEEN -1.0 AND 1.0),
    created_at    INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, from_fact_id, to_fact_id),
    CHECK (from_fact_id <> to_fact_id)
) STRICT;
CREATE INDEX memory_links_to ON memory_links (tenant_id, to_fact_id);
CREATE TABLE reconcile_state (
    tenant_id          TEXT NOT NULL PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    linked_through_ms  INTEGER NOT NULL DEFAULT 0,
    last_run_ms        INTEGER NOT NULL DEFAULT 0
, writes_since_run INTEGER NOT NULL DEFAULT 0
    CHECK (writes_since_run >= 0)) STRICT;
CREATE INDEX semantic_facts_by_key
    ON semantic_facts (tenant_id, key_entity, key_attribute, status);
CREATE TABLE operator_grants (
    tenant_id       TEXT NOT NULL CHECK (tenant_id = '*' OR length(tenant_id) BETWEEN 1 AND 128),
    principal_kind  TEXT NOT NULL CHECK (principal_kind IN ('email', 'common_name', 'group')),
    principal       TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 256),
    granted_by      TEXT NOT NULL DEFAULT '',
    granted_at      INTEGER NOT NULL CHECK (granted_at > 0),
    PRIMARY KEY (tenant_id, principal_kind, principal)
) STRICT;
CREATE TABLE workflow_packs (
    tenant_id TEXT NOT NULL,
    agent_type TEXT NOT NULL,
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    version INTEGER NOT NULL CHECK (version >= 1),
    workflow_id TEXT NOT NULL,
    task_type TEXT NOT NULL,
    source_instance_id TEXT NOT NULL,
    alpha REAL NOT NULL,
    beta REAL NOT NULL,
    pulls INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'deprecated')),
    promoted_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    deprecated_at INTEGER,
    PRIMARY KEY (tenant_id, agent_type, name, version)
) STRICT;
CREATE INDEX workflow_packs_offered
    ON workflow_packs (tenant_id, agent_type, task_type, status, created_at);
CREATE INDEX semantic_facts_by_session
    ON semantic_facts (tenant_id, session_key, fts_rowid) WHERE session_key IS NOT NULL;
CREATE TABLE semantic_index_stats (
    tenant_id            TEXT PRIMARY KEY,
    docs                 INTEGER NOT NULL CHECK (docs >= 0),
    total_length         INTEGER NOT NULL CHECK (total_length >= 0),
    total_context_length INTEGER NOT NULL CHECK (total_context_length >= 0)
) STRICT, WITHOUT ROWID;
CREATE TABLE cold_items (
    tenant_id      TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    namespace_key  TEXT NOT NULL CHECK (length(namespace_key) BETWEEN 5 AND 400),
    kind           TEXT NOT NULL CHECK (kind IN ('episode')),
    entity_id      TEXT NOT NULL CHECK (length(entity_id) BETWEEN 1 AND 256),
    archive_key    TEXT NOT NULL CHECK (length(archive_key) BETWEEN 1 AND 1024),
    subject        TEXT,
    created_at     INTEGER NOT NULL CHECK (created_at > 0),
    archived_at    INTEGER NOT NULL CHECK (archived_at > 0),
    PRIMARY KEY (tenant_id, namespace_key, kind, entity_id)
) STRICT;
CREATE INDEX cold_items_by_session ON cold_items (tenant_id, namespace_key, created_at);
CREATE INDEX cold_items_by_subject ON cold_items (tenant_id, subject, created_at);
CREATE TABLE namespace_reads (
    tenant_id       TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    day             TEXT NOT NULL CHECK (length(day) = 10),
    canonical_hits  INTEGER NOT NULL DEFAULT 0 CHECK (canonical_hits >= 0),
    legacy_hits     INTEGER NOT NULL DEFAULT 0 CHECK (legacy_hits >= 0),
    misses          INTEGER NOT NULL DEFAULT 0 CHECK (misses >= 0),
    PRIMARY KEY (tenant_id, day)
) STRICT;
CREATE TABLE subject_data_keys (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    subject_hash  TEXT NOT NULL CHECK (length(subject_hash) = 64),
    key_id        TEXT NOT NULL CHECK (length(key_id) = 26),
    kek_kid       TEXT NOT NULL CHECK (length(kek_kid) BETWEEN 1 AND 64),
    wrapped       TEXT NOT NULL CHECK (length(wrapped) BETWEEN 1 AND 256),
    created_at    INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, subject_hash, key_id)
) STRICT;
CREATE INDEX subject_data_keys_by_kek ON subject_data_keys (tenant_id, kek_kid);
CREATE TABLE agent_instances (
    tenant_id TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    agent_type TEXT NOT NULL CHECK (length(agent_type) BETWEEN 1 AND 64),
    instance_id TEXT NOT NULL CHECK (length(instance_id) BETWEEN 1 AND 128),
    storage_bytes INTEGER NOT NULL DEFAULT 0 CHECK (storage_bytes >= 0),
    run_log_rows INTEGER NOT NULL DEFAULT 0 CHECK (run_log_rows >= 0),
    run_log_bytes INTEGER NOT NULL DEFAULT 0 CHECK (run_log_bytes >= 0),
    pending_writes INTEGER NOT NULL DEFAULT 0 CHECK (pending_writes >= 0),
    failed_writes INTEGER NOT NULL DEFAULT 0 CHECK (failed_writes >= 0),
    failed_oldest_at INTEGER,
    last_activity_at INTEGER,
    cleared_at INTEGER,
    reported_at INTEGER NOT NULL CHECK (reported_at > 0),
    PRIMARY KEY (tenant_id, agent_type, instance_id)
) STRICT;
CREATE TABLE erasure_marks (
    tenant_id  TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, started_at)
) STRICT, WITHOUT ROWID;
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
CREATE TABLE oauth_consents (
    ticket_hash      TEXT NOT NULL PRIMARY KEY CHECK (length(ticket_hash) = 64),
    principal        TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 320),
    request          TEXT NOT NULL CHECK (json_valid(request)),
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER
) STRICT, WITHOUT ROWID;
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
CREATE TABLE oauth_refresh_tokens (
    token_hash       TEXT NOT NULL PRIMARY KEY CHECK (length(token_hash) = 64),
    tenant_id        TEXT NOT NULL,
    grant_id         TEXT NOT NULL,
    expires_at       INTEGER NOT NULL,
    rotated_at       INTEGER
) STRICT, WITHOUT ROWID;
CREATE TABLE oauth_access_tokens (
    tenant_id        TEXT NOT NULL,
    grant_id         TEXT NOT NULL,
    token_hash       TEXT NOT NULL CHECK (length(token_hash) = 64),
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, grant_id, token_hash)
) STRICT, WITHOUT ROWID;
CREATE TABLE facts_kept_apart (
    tenant_id  TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    fact_id    TEXT NOT NULL CHECK (length(fact_id) = 26),
    other_id   TEXT NOT NULL CHECK (length(other_id) = 26),
    undone_at  INTEGER NOT NULL CHECK (undone_at > 0),
    PRIMARY KEY (tenant_id, fact_id, other_id)
) STRICT;
CREATE TABLE tenant_directory (
    tenant_id  TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    shard      TEXT NOT NULL CHECK (length(shard) BETWEEN 1 AND 32),
    placed_at  INTEGER NOT NULL CHECK (placed_at > 0)
) STRICT, WITHOUT ROWID;
CREATE TABLE tenant_fences (
    tenant_id  TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    state      TEXT NOT NULL CHECK (state IN ('incoming', 'frozen', 'moved')),
    set_at     INTEGER NOT NULL CHECK (set_at > 0)
) STRICT, WITHOUT ROWID;
CREATE TABLE tenant_moves (
    tenant_id    TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    source       TEXT NOT NULL,
    target       TEXT NOT NULL,
    phase        TEXT NOT NULL,
    progress     TEXT NOT NULL DEFAULT '{}',
    started_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    switched_at  INTEGER,
    finished_at  INTEGER,
    error        TEXT
, lease_owner TEXT, lease_until INTEGER) STRICT;
CREATE TABLE keyword_tenants (
    n          INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL UNIQUE CHECK (length(tenant_id) BETWEEN 1 AND 128),
    code       TEXT NOT NULL UNIQUE CHECK (length(code) BETWEEN 1 AND 128)
) STRICT;
CREATE TABLE tenant_move_tracking (
    tenant_id  TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    since      INTEGER NOT NULL CHECK (since > 0)
) STRICT, WITHOUT ROWID;
CREATE TABLE tenant_move_changes (
    n          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL,
    tbl        TEXT NOT NULL,
    key        TEXT NOT NULL
) STRICT;
CREATE INDEX tenant_move_changes_by_tenant ON tenant_move_changes (tenant_id, n);

-- A term of a tenant's keyword index (`tenant_id`: the tenant's code, keyword_tenants) and the
-- number of its live facts holding it; `term_id` names it in the postings.
CREATE TABLE semantic_term_stats (
    term_id   INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    term      TEXT NOT NULL,
    df        INTEGER NOT NULL CHECK (df >= 0),
    UNIQUE (tenant_id, term)
) STRICT;
CREATE TABLE keyword_postings (
    term_id    INTEGER NOT NULL,
    fts_rowid  INTEGER NOT NULL,
    tf         INTEGER NOT NULL CHECK (tf >= 0),
    context_tf INTEGER NOT NULL CHECK (context_tf >= 0),
    PRIMARY KEY (term_id, fts_rowid)
) STRICT, WITHOUT ROWID;
CREATE TABLE keyword_lengths (
    fts_rowid      INTEGER PRIMARY KEY,
    length         INTEGER NOT NULL,
    context_length INTEGER NOT NULL
) STRICT;
-- LEFT JOIN: a posting whose fact is gone still shows (NULL lengths), so the keyword index's
-- tidy check (`tidy_keyword_index`) sees it.
CREATE VIEW semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length, context_length) AS
SELECT s.tenant_id, s.term, p.fts_rowid, p.tf, p.context_tf, l.length, l.context_length
FROM semantic_term_stats AS s JOIN keyword_postings AS p ON p.term_id = s.term_id
LEFT JOIN keyword_lengths AS l ON l.fts_rowid = p.fts_rowid;
CREATE TRIGGER semantic_terms_on_insert AFTER INSERT ON semantic_facts
WHEN new.index_terms IS NOT NULL BEGIN
    INSERT INTO keyword_tenants (n, tenant_id, code)
    SELECT m, new.tenant_id, CASE WHEN m <= 26 THEN char(64 + m)
                                  WHEN m <= 702 THEN char(64 + (m - 1) / 26) || char(65 + (m - 1) % 26)
                                  ELSE 'Z' || m END
    FROM (SELECT coalesce(max(n), 0) + 1 AS m FROM keyword_tenants)
    WHERE NOT EXISTS (SELECT 1 FROM keyword_tenants WHERE tenant_id = new.tenant_id);
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id), CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE true
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO keyword_postings (term_id, fts_rowid, tf, context_tf)
    SELECT (SELECT term_id FROM semantic_term_stats WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id)
            AND term = CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END),
           new.fts_rowid, CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]') ELSE json_extract(j.value, '$[0]') END, CASE WHEN j.type IN ('text', 'integer') THEN 0 WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]') ELSE json_extract(j.value, '$[1]') END
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE true;
    INSERT INTO keyword_lengths (fts_rowid, length, context_length)
    SELECT new.fts_rowid, new.index_length, new.context_length WHERE true;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    SELECT new.tenant_id, 1, new.index_length, new.context_length WHERE true
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;
CREATE TRIGGER semantic_terms_on_delete AFTER DELETE ON semantic_facts
WHEN old.index_terms IS NOT NULL BEGIN
    DELETE FROM keyword_postings
    WHERE fts_rowid = old.fts_rowid AND term_id IN (
        SELECT term_id FROM semantic_term_stats WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
        AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s));
    DELETE FROM keyword_lengths WHERE fts_rowid = old.fts_rowid;
    UPDATE semantic_term_stats SET df = df - 1
    WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id) AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s);
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE tenant_id = old.tenant_id;
END;
CREATE TRIGGER semantic_terms_on_update AFTER UPDATE OF index_terms ON semantic_facts BEGIN
    DELETE FROM keyword_postings
    WHERE old.index_terms IS NOT NULL AND fts_rowid = old.fts_rowid AND term_id IN (
        SELECT term_id FROM semantic_term_stats WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
        AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s));
    DELETE FROM keyword_lengths WHERE old.index_terms IS NOT NULL AND fts_rowid = old.fts_rowid;
    UPDATE semantic_term_stats SET df = df - 1
    WHERE old.index_terms IS NOT NULL AND tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id) AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s);
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id;
    INSERT INTO keyword_tenants (n, tenant_id, code)
    SELECT m, new.tenant_id, CASE WHEN m <= 26 THEN char(64 + m)
                                  WHEN m <= 702 THEN char(64 + (m - 1) / 26) || char(65 + (m - 1) % 26)
                                  ELSE 'Z' || m END
    FROM (SELECT coalesce(max(n), 0) + 1 AS m FROM keyword_tenants)
    WHERE new.index_terms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM keyword_tenants WHERE tenant_id = new.tenant_id);
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id), CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO keyword_postings (term_id, fts_rowid, tf, context_tf)
    SELECT (SELECT term_id FROM semantic_term_stats WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id)
            AND term = CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END),
           new.fts_rowid, CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]') ELSE json_extract(j.value, '$[0]') END, CASE WHEN j.type IN ('text', 'integer') THEN 0 WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]') ELSE json_extract(j.value, '$[1]') END
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE new.index_terms IS NOT NULL;
    INSERT INTO keyword_lengths (fts_rowid, length, context_length)
    SELECT new.fts_rowid, new.index_length, new.context_length WHERE new.index_terms IS NOT NULL;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    SELECT new.tenant_id, 1, new.index_length, new.context_length WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;
