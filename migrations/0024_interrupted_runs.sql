-- 0024: a run whose turn a crash cut short is settled as 'interrupted' (issue 47,
-- docs/agent-runtime.md "Interrupted runs"), neither completed nor failed by the model.
-- SQLite cannot change a CHECK in place, so agent_runs is rebuilt: same columns, keys and
-- indexes, rows copied as they are from the old table (renamed, then dropped). Dropping it
-- drops the triggers a tenant move put on it (directory.ensure_fence_triggers, the change
-- log of move._ensure_tracking_triggers); they are created again here exactly as those
-- functions write them (they only act while a tenant is fenced or tracked), so a tenant
-- fenced `moved` on this database stays fenced.
ALTER TABLE agent_runs RENAME TO agent_runs_before_0024;
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
INSERT INTO agent_runs SELECT tenant_id, run_id, agent_type, instance_id, status, input,
    output, error, steps, started_at, finished_at FROM agent_runs_before_0024;
DROP TABLE agent_runs_before_0024;
CREATE INDEX agent_runs_by_type ON agent_runs (tenant_id, agent_type, started_at DESC);
CREATE INDEX agent_runs_by_status ON agent_runs (tenant_id, status, started_at DESC);
CREATE INDEX agent_runs_by_start ON agent_runs (tenant_id, started_at);
CREATE TRIGGER IF NOT EXISTS "fence_agent_runs_c1fc_insert" BEFORE INSERT ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_fences WHERE tenant_id = NEW.tenant_id AND state IN ('frozen', 'moved')) BEGIN SELECT RAISE(ABORT, 'tenant_moved'); END;
CREATE TRIGGER IF NOT EXISTS "fence_agent_runs_c1fc_update" BEFORE UPDATE ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_fences WHERE tenant_id = NEW.tenant_id AND state IN ('frozen', 'moved')) BEGIN SELECT RAISE(ABORT, 'tenant_moved'); END;
CREATE TRIGGER IF NOT EXISTS "fence_agent_runs_c1fc_delete" BEFORE DELETE ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_fences WHERE tenant_id = OLD.tenant_id AND state IN ('frozen')) BEGIN SELECT RAISE(ABORT, 'tenant_moved'); END;
CREATE TRIGGER IF NOT EXISTS "track_agent_runs_c1fc_insert" AFTER INSERT ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_move_tracking WHERE tenant_id = NEW.tenant_id) BEGIN INSERT INTO tenant_move_changes (tenant_id, tbl, key) VALUES (NEW.tenant_id, 'agent_runs', json_array(NEW.run_id)); END;
CREATE TRIGGER IF NOT EXISTS "track_agent_runs_c1fc_update" AFTER UPDATE ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_move_tracking WHERE tenant_id = OLD.tenant_id) BEGIN INSERT INTO tenant_move_changes (tenant_id, tbl, key) VALUES (OLD.tenant_id, 'agent_runs', json_array(OLD.run_id)); INSERT INTO tenant_move_changes (tenant_id, tbl, key) VALUES (NEW.tenant_id, 'agent_runs', json_array(NEW.run_id)); END;
CREATE TRIGGER IF NOT EXISTS "track_agent_runs_c1fc_delete" AFTER DELETE ON "agent_runs" WHEN EXISTS (SELECT 1 FROM tenant_move_tracking WHERE tenant_id = OLD.tenant_id) BEGIN INSERT INTO tenant_move_changes (tenant_id, tbl, key) VALUES (OLD.tenant_id, 'agent_runs', json_array(OLD.run_id)); END;
