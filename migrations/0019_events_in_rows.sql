-- 0019: a new fact or episode is its own `memory_written` event (issue 29,
-- benchmarks/storage_bytes.py).
--
-- The event of a plain new fact held nothing its row does not (migration 0018 had made it
-- compact: the fact's id, kind, tier, agent type, run and time, payload `{}`), yet cost
-- ~148 bytes a fact in memory_events and its two indexes; an episode's (~335 bytes) held its
-- id, kind, run, agent type and time, and a hash and payload its row can give. Facts and
-- episodes written from now on are marked `event_in_row = 1` and get no memory_events row
-- (an episode then costs one D1 call, not two); `EventLog` reads each as its
-- `memory_written` event (`agent_memory.governance.writes.IN_ROW_EVENTS`). A write whose
-- event says more (personal fields) keeps a real event and is not marked, nor are rows
-- written before this migration (their events stay where they are). Such an event lives as
-- long as its row: an erase or a prune that removes the row removes it.
--
-- ADD COLUMN with a constant default rewrites no row (the rows written before read the
-- default): safe on a full database.

ALTER TABLE semantic_facts ADD COLUMN event_in_row INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_episodes ADD COLUMN event_in_row INTEGER NOT NULL DEFAULT 0;
