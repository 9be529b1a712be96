-- 0019: a new fact is its own `memory_written` event (issue 29, benchmarks/storage_bytes.py).
--
-- The event of a plain new fact held nothing its row does not (migration 0018 had made it
-- compact: the fact's id, kind, tier, agent type, run and time, payload `{}`), yet cost
-- ~148 bytes a fact in memory_events and its two indexes. Facts written from now on are
-- marked `event_in_row = 1` and get no memory_events row; `EventLog` reads each as its
-- `memory_written` event (`agent_memory.governance.writes.IN_ROW_EVENTS`). A fact whose
-- write event says more (personal fields) keeps a real event and is not marked, nor are
-- facts written before this migration (their events stay where they are).
--
-- ADD COLUMN with a constant default rewrites no row (the rows written before read the
-- default): safe on a full database.

ALTER TABLE semantic_facts ADD COLUMN event_in_row INTEGER NOT NULL DEFAULT 0;
