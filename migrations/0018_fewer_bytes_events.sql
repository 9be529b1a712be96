-- 0018: fewer bytes per memory, continued (issue 29; benchmarks/storage_bytes.py).
--
-- memory_events_by_kind (tenant_id, kind, created_at DESC): ~67 bytes per event (every
-- fact's, every episode's, every recall's), half-full pages since the two kinds interleave.
-- Every statement that filtered on kind is served by memory_events_by_age (tenant_id,
-- created_at), newest first, checked with EXPLAIN QUERY PLAN (tests/test_migration_indexes.py):
-- the inspector's and `EventLog.recent`'s "newest N of a kind" walk it backwards and stop
-- at N (both kinds are written all the time: every recall, every write); the brief's
-- "unsure in the last day" is a one-day range of it; the rest (a fact's history, a hash)
-- filtered a kind's whole range before and now filter the tenant's, as rare inspector
-- reads. The age prune and the erase's pages (by id) never used it.

DROP INDEX memory_events_by_kind;
