-- 0010: the hot/warm/cold ADR (docs/tiered-memory.md): the namespace key on every episode,
-- the cold tier's item index (each archived episode addressable by its item key), and the
-- namespace migration's read counters (shown by the daily brief).
--
-- Same conventions as 0001: STRICT, tenant first in every key and index, epoch-millisecond
-- times. No BEGIN/COMMIT (wrangler applies a file atomically).

-- `<service>:<tenantId>:<sessionId>` of every episode, derived from the row itself, so no
-- writer can store a wrong one and no existing row lacks it. VIRTUAL: SQLite can add only
-- virtual generated columns to an existing table; it is computed when read (and archived).
ALTER TABLE memory_episodes ADD COLUMN namespace_key TEXT
    GENERATED ALWAYS AS ('agent-memory:' || tenant_id || ':' || instance_id) VIRTUAL;

-- One row per episode the prune moved to the cold tier: which archive object holds it.
-- Written by the prune in the same D1 transaction that deletes the episode from
-- memory_episodes, so an archived episode is always findable; `subject` is the warm row's
-- (for a subject's archived history) and leaves with the row when a subject is erased.
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
-- No index on archive_key: only an erase that rewrites an archive looks rows up by it (a scan
-- of the tenant's rows), while every prune batch would pay for keeping it.

-- Reads of namespaced hot keys per tenant and UTC day while the namespace migration runs
-- (MEMORY_NAMESPACE_COMPAT_READ): canonical hits, legacy hits (each one read-repaired) and
-- misses. The daily brief shows them so an operator can see when to move phases.
CREATE TABLE namespace_reads (
    tenant_id       TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    day             TEXT NOT NULL CHECK (length(day) = 10),
    canonical_hits  INTEGER NOT NULL DEFAULT 0 CHECK (canonical_hits >= 0),
    legacy_hits     INTEGER NOT NULL DEFAULT 0 CHECK (legacy_hits >= 0),
    misses          INTEGER NOT NULL DEFAULT 0 CHECK (misses >= 0),
    PRIMARY KEY (tenant_id, day)
) STRICT;
