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

-- A shorter keyword-index entry (`semantic_facts.index_terms`, migration 0009): a term only
-- in the memory's own text, most of them, is stored `"term": tf` instead of
-- `"term": [tf, 0]` (4 bytes fewer per term, ~50 per short fact). Entries written before
-- keep the array form, which the triggers still read; the delete trigger reads only the
-- keys and is unchanged.

DROP TRIGGER semantic_terms_on_insert;
DROP TRIGGER semantic_terms_on_update;

CREATE TRIGGER semantic_terms_on_insert AFTER INSERT ON semantic_facts
WHEN new.index_terms IS NOT NULL BEGIN
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT new.tenant_id, j.key, new.fts_rowid,
           CASE j.type WHEN 'array' THEN json_extract(j.value, '$[0]') ELSE j.value END,
           CASE j.type WHEN 'array' THEN json_extract(j.value, '$[1]') ELSE 0 END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j WHERE true;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT new.tenant_id, j.key, 1 FROM json_each(new.index_terms) AS j WHERE true
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    VALUES (new.tenant_id, 1, new.index_length, new.context_length)
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;

CREATE TRIGGER semantic_terms_on_update AFTER UPDATE OF index_terms ON semantic_facts BEGIN
    UPDATE semantic_term_stats SET df = df - 1
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id
      AND term IN (SELECT j.key FROM json_each(old.index_terms) AS j);
    DELETE FROM semantic_terms
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id
      AND term IN (SELECT j.key FROM json_each(old.index_terms) AS j)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id;
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT new.tenant_id, j.key, new.fts_rowid,
           CASE j.type WHEN 'array' THEN json_extract(j.value, '$[0]') ELSE j.value END,
           CASE j.type WHEN 'array' THEN json_extract(j.value, '$[1]') ELSE 0 END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j WHERE new.index_terms IS NOT NULL;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT new.tenant_id, j.key, 1 FROM json_each(new.index_terms) AS j
    WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    SELECT new.tenant_id, 1, new.index_length, new.context_length
    WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;
