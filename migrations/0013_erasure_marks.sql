-- 0013: when each subject erase of a tenant began (docs/lifecycle.md, "Recall records
-- carried over in KV"). A recall's statistics and `memory_retrieved` event are written after
-- its response; one still in flight when an erase runs is in neither D1 nor KV for the erase
-- to find. The erase writes a mark first; a recall record committed afterwards sees it in
-- its own transaction and stores its event without the query text. A mark holds only the
-- tenant and the time, never the subject, and the erase deletes marks older than a day.
CREATE TABLE erasure_marks (
    tenant_id  TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, started_at)
) STRICT, WITHOUT ROWID;
