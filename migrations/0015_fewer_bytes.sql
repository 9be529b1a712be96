-- 0015: fewer bytes per memory (issue 29; measured by benchmarks/storage_bytes.py).
--
-- Secondary indexes that serve no query, checked with EXPLAIN QUERY PLAN over every
-- statement the code runs (docs/semantic-memory.md, "Bytes per memory"):
--
--   * semantic_facts_by_subject (tenant_id, subject, predicate, status): every lookup by
--     subject (recall's exact-match channel and subject filter, the inspector, the subject
--     erase) is served as well by the UNIQUE (tenant_id, subject, content_hash) index, which
--     learn() needs anyway; no statement looks facts up by subject and predicate together
--     beyond a subject's own few rows. ~43 bytes per fact.
--   * semantic_facts_by_agent (tenant_id, agent_type, status): agent_type is only ever a
--     filter on rows another index or the keyword postings found (recall), or on a
--     tenant's newest facts (the inspector's list, which sorts either way). ~31 bytes per fact.
--   * memory_events_by_run (tenant_id, run_id, created_at): no statement reads events by
--     run (the subject erase pages through a tenant's events by id). ~49 bytes per event
--     written in a run: every episode's.

DROP INDEX semantic_facts_by_subject;
DROP INDEX semantic_facts_by_agent;
DROP INDEX memory_events_by_run;
