-- 0016: supersessions an operator undid stay undone (issue 25).
--
-- `POST /admin/tenants/{t}/facts/{id}/restore` makes a superseded fact live again; the
-- reconciler must then leave that pair apart for good, not only while the event log still
-- holds the undo's event (events age out with retention). One row per undone pair, written
-- in the same batch as the restore (`ReconcileStore.restore`), read once per reconcile.

CREATE TABLE facts_kept_apart (
    tenant_id  TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    fact_id    TEXT NOT NULL CHECK (length(fact_id) = 26),
    other_id   TEXT NOT NULL CHECK (length(other_id) = 26),
    undone_at  INTEGER NOT NULL CHECK (undone_at > 0),
    PRIMARY KEY (tenant_id, fact_id, other_id)
) STRICT;
