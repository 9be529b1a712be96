-- 0021: a tenant move's lease (issue 29, agent_memory/lifecycle/move.py). The daily cron, an
-- operator's `agent-memory shards move` and `POST /admin/moves/advance` may each advance the
-- same move; two at once let a pass that began before the switch copy the frozen source over
-- writes the target took after it. An advance now first takes the move's lease (owner and
-- expiry, compared and set in one statement) and saves only while it holds it; another
-- advance meanwhile gets 409 `move_busy`. A small control table: the columns cost nothing.

ALTER TABLE tenant_moves ADD COLUMN lease_owner TEXT;
ALTER TABLE tenant_moves ADD COLUMN lease_until INTEGER;
