-- 0004: the memory lifecycle (docs/lifecycle.md): per-tenant retention and episode limits,
-- the episode counter and the 100K hard limit, the cold-archive ledger and prune progress
-- (episodes, finished runs and memory events are archived, then deleted),
-- fact provenance and links for the reconciler.
--
-- Same conventions as 0001: STRICT, tenant first in every key and index, epoch-millisecond
-- times, JSON checked with json_valid. No BEGIN/COMMIT (wrangler applies a file atomically).

-- Per-tenant overrides; a missing row (or a NULL column) means "the deployment default"
-- (EPISODE_RETENTION_DAYS, 90; the episode limit, 100 000).
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

-- Episodes per tenant, kept exact by triggers, so the daily brief and the hard limit never
-- count 100K rows. Seeded from the rows that exist when the migration runs.
CREATE TABLE memory_tenant_stats (
    tenant_id  TEXT NOT NULL PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    episodes   INTEGER NOT NULL DEFAULT 0 CHECK (episodes >= 0)
) STRICT;

INSERT INTO memory_tenant_stats (tenant_id, episodes)
    SELECT tenant_id, COUNT(*) FROM memory_episodes GROUP BY tenant_id;

-- The hard limit (docs/lifecycle.md, "At the limit"): a new episode of a tenant at its limit
-- is refused by the database itself, whoever writes it. A retried write of an episode that
-- is already stored is let through (its INSERT ... ON CONFLICT DO NOTHING changes nothing).
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

-- One row per cold-tier archive object (R2 key): what it holds. The prune writes the row in
-- the same D1 batch that deletes the archived rows; `matched` is the number of rows the
-- delete's key range covers at that moment, and the CHECK makes the batch fail (and delete
-- nothing) unless it equals the number of rows in the archive.
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

-- A prune job and its per-tenant progress. The job id is fixed by its schedule (the weekly
-- cron's ISO week), so a retried or resumed invocation continues the same job with the
-- same cutoffs instead of starting another; counts are added in the batch that deletes.
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

-- Where a semantic fact came from (the reconciler's promotion and dedup): episodes it was
-- promoted from, facts merged into it. Deleted with the fact by the subject erase.
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

-- Links between related facts (A-MEM style): one row per direction, so "the neighbours of
-- X" is one index range. Recall can follow them one hop.
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

-- The reconciler's per-tenant progress: facts created after `linked_through_ms` have not
-- been linked to their neighbours yet.
CREATE TABLE reconcile_state (
    tenant_id          TEXT NOT NULL PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    linked_through_ms  INTEGER NOT NULL DEFAULT 0,
    last_run_ms        INTEGER NOT NULL DEFAULT 0
) STRICT;
