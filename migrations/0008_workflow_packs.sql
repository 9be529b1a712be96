-- 0008: workflow packs (ADR-29 "pack candidates close the loop"; docs/agent-runtime.md).
--
-- A pack is a procedural workflow an operator promoted after it proved itself in one agent
-- instance's bandit (enough trials, posterior mean above a threshold). Packs are per tenant
-- and agent type, named and versioned: promoting a name again adds the next version and
-- deprecates the previous one; deprecating a name is explicit. Agents of that type are
-- offered the active pack's workflow first for its task type.

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
