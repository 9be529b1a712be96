-- 0017: tenants placed across D1 databases (issue 29, docs/placement.md).
--
-- Every shard's database runs every migration, so each has all three tables; only the
-- primary's `tenant_directory` and `tenant_moves` are read (agent_memory.directory,
-- agent_memory.lifecycle.move). `tenant_fences` is per database: the fence triggers that
-- make a moving tenant's rows read-only there are created by the move itself, on every table
-- with a `tenant_id` column (so tables added later are covered by the next move).

-- The directory: the shard of every placed tenant (no row: never placed yet).
CREATE TABLE tenant_directory (
    tenant_id  TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    shard      TEXT NOT NULL CHECK (length(shard) BETWEEN 1 AND 32),
    placed_at  INTEGER NOT NULL CHECK (placed_at > 0)
) STRICT, WITHOUT ROWID;

-- A tenant whose rows in this database are guarded: 'incoming' (a move fills them),
-- 'frozen' (no write: the move's last copy and switch), 'moved' (no insert or update: the
-- move deletes them). Jobs skip fenced tenants.
CREATE TABLE tenant_fences (
    tenant_id  TEXT PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 128),
    state      TEXT NOT NULL CHECK (state IN ('incoming', 'frozen', 'moved')),
    set_at     INTEGER NOT NULL CHECK (set_at > 0)
) STRICT, WITHOUT ROWID;

-- One move per tenant at a time: where it goes, how far it got (`progress` JSON: the table
-- and key it resumes after), what it verified.
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
) STRICT;
