-- 0012: AgentRuntime instances as D1 sees them (docs/lifecycle.md, "Agent instance state").
--
-- One row per Durable Object instance (tenant, agent type, instance id), written by the
-- object itself when its alarm runs (agent_runtime_do.lifecycle): how much it stores, how
-- many episodic writes it still holds (pending: queued; failed: retries exhausted), the age
-- of the oldest failed one, when it was last active and when its working state was last
-- cleared. The daily brief reads these rows (the cron never calls a Durable Object), and
-- the subject eraser lists a tenant's instances from them together with agent_runs, so an
-- instance whose runs never reached D1 is still reached.
--
-- Sizes are bytes; times are INTEGER epoch milliseconds. No subject or content here: ids
-- and counts only.

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
