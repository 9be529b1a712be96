-- 0022: a tenant move logs what the tenant changes on the source while it is copied (issue 29,
-- agent_memory/lifecycle/move.py), so the fenced step replays those keys and checks row counts
-- instead of reading the whole tenant on both sides while the tenant's writes are refused.
--
-- `tenant_move_tracking` names the tenants whose writes are logged in this database (the
-- source of a move, from its first step until its switch or cancel). The triggers that log
-- them are created by the move on every tenant table (like the fence triggers): AFTER each
-- insert, update and delete of a tracked tenant's row, one row here with the table and the
-- row's key as a JSON array. A key changed twice is logged twice; the replay reads in rowid
-- order and deletes only what it has replayed, so a write after its read is kept for the next.

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
