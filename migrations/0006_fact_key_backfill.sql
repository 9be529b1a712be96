-- 0006: find the facts written before 0005 (key_source = '') without scanning a tenant.
--
-- The reconciler backfills their keys a batch per run (agent_memory.tiers.semantic._backfill);
-- once a tenant has none left the partial index is empty and the lookup costs nothing.

CREATE INDEX semantic_facts_unkeyed
    ON semantic_facts (tenant_id, created_at) WHERE key_source = '';
