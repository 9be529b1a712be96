-- 0018: fewer bytes per memory, continued (issue 29; benchmarks/storage_bytes.py): an
-- index of memory_events no statement needs, and a shorter keyword-index entry. Apply it
-- before deploying the code that writes the array form (the usual order: migrations, then
-- the deploy); entries written in the older forms stay readable.
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

-- A shorter keyword-index entry (`semantic_facts.index_terms`, migrations 0009 and 0015): a
-- JSON array, a term of the memory's own text with tf 1 (most of them) a bare string,
-- any other `["term", tf, context_tf]`: `["dana","vp",["may",0,1]]` for what 0015 stored as
-- `{"dana":1,"vp":1,"may":[0,1]}`, 2 bytes fewer a term (~25 a short fact). Entries written
-- before keep their object form ({"term": tf} or {"term": [tf, context_tf]}), which these
-- triggers still read: an array's elements have integer keys, an object's members text ones.

DROP TRIGGER semantic_terms_on_insert;
DROP TRIGGER semantic_terms_on_delete;
DROP TRIGGER semantic_terms_on_update;

CREATE TRIGGER semantic_terms_on_insert AFTER INSERT ON semantic_facts
WHEN new.index_terms IS NOT NULL BEGIN
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT new.tenant_id,
           CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END,
           new.fts_rowid,
           CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]')
                ELSE json_extract(j.value, '$[0]') END,
           CASE WHEN j.type IN ('text', 'integer') THEN 0
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]')
                ELSE json_extract(j.value, '$[1]') END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j WHERE true;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT new.tenant_id, CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j WHERE true
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    VALUES (new.tenant_id, 1, new.index_length, new.context_length)
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;

CREATE TRIGGER semantic_terms_on_delete AFTER DELETE ON semantic_facts
WHEN old.index_terms IS NOT NULL BEGIN
    UPDATE semantic_term_stats SET df = df - 1
    WHERE tenant_id = old.tenant_id
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j);
    DELETE FROM semantic_terms
    WHERE tenant_id = old.tenant_id
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE tenant_id = old.tenant_id;
END;

CREATE TRIGGER semantic_terms_on_update AFTER UPDATE OF index_terms ON semantic_facts BEGIN
    UPDATE semantic_term_stats SET df = df - 1
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j);
    DELETE FROM semantic_terms
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id;
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT new.tenant_id,
           CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END,
           new.fts_rowid,
           CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]')
                ELSE json_extract(j.value, '$[0]') END,
           CASE WHEN j.type IN ('text', 'integer') THEN 0
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]')
                ELSE json_extract(j.value, '$[1]') END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j WHERE new.index_terms IS NOT NULL;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT new.tenant_id, CASE WHEN j.type = 'text' THEN j.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    SELECT new.tenant_id, 1, new.index_length, new.context_length
    WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;
