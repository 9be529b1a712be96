-- 0003: memory events (ADR-0051) and the exact-match lookup of semantic recall.
--
-- memory_events is the audit trail of the memory tiers: every recall writes one
-- 'memory_retrieved' row (the ids and scores it returned), and writes through the policy
-- path write 'memory_written' rows carrying the content hash. Same conventions as 0001:
-- STRICT, tenant first in the key and in every index, ULID ids, epoch-millisecond times,
-- JSON checked with json_valid.

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

-- "The last N retrievals of a tenant" and the age-based prune are one index range each.
CREATE INDEX memory_events_by_kind ON memory_events (tenant_id, kind, created_at DESC);
CREATE INDEX memory_events_by_age ON memory_events (tenant_id, created_at);
CREATE INDEX memory_events_by_run ON memory_events (tenant_id, run_id, created_at)
    WHERE run_id IS NOT NULL;

-- Recall's exact-match channel looks facts up by predicate as well as by subject; 0001's
-- (tenant_id, subject, predicate, status) index only serves the subject side.
CREATE INDEX semantic_facts_by_predicate
    ON semantic_facts (tenant_id, predicate, status);
