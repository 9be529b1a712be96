-- 0005: keys for free-text facts and the update cadence (docs/semantic-memory.md, "Knowledge
-- updates").
--
-- Every fact gets the key the write path derives from it (agent_memory.tiers.semantic.keys):
-- the entity it is about and the attribute it states, plus how they were derived. Facts
-- written before this migration have empty keys ('' = not derived): the reconciler's update
-- step and recall's stale-statement guard skip them. The structured subject/predicate stay
-- as they were; the key is an addition, not a replacement.
--
-- `reconcile_state.writes_since_run` counts a tenant's new facts since its last reconcile,
-- so the write path can schedule one after N writes.

ALTER TABLE semantic_facts ADD COLUMN key_entity TEXT NOT NULL DEFAULT ''
    CHECK (length(key_entity) <= 256);
ALTER TABLE semantic_facts ADD COLUMN key_attribute TEXT NOT NULL DEFAULT ''
    CHECK (length(key_attribute) <= 128);
ALTER TABLE semantic_facts ADD COLUMN key_source TEXT NOT NULL DEFAULT ''
    CHECK (key_source IN ('', 'structured', 'metadata', 'known_subject', 'named_entity',
                          'sentence_subject', 'speaker', 'none'));

CREATE INDEX semantic_facts_by_key
    ON semantic_facts (tenant_id, key_entity, key_attribute, status);

ALTER TABLE reconcile_state ADD COLUMN writes_since_run INTEGER NOT NULL DEFAULT 0
    CHECK (writes_since_run >= 0);
