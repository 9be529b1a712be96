-- 0009: a per-tenant keyword index with session context and dates (docs/semantic-memory.md,
-- "The keyword index").
--
-- FTS5's bm25() takes its statistics (document count, average length, document frequency)
-- from the whole table, i.e. from every tenant, so one tenant's ranking moved when another
-- tenant wrote. An FTS5 table per tenant would fix that but means DDL per tenant on D1
-- (five shadow tables each, a schema that grows with every tenant, no migration covers
-- them). Instead the keyword index is three ordinary tables keyed by tenant first:
--
--   semantic_terms        postings: (tenant, term, fact rowid) → tf in the fact's own text,
--                         tf in its context column, the fact's two field lengths;
--   semantic_term_stats   per tenant and term: how many of the tenant's facts hold it (df);
--   semantic_index_stats  per tenant: indexed facts, total own / context length.
--
-- The write path computes a fact's terms in Python (`retrieval.bm25.term_counts`: words
-- split like unicode61, stopwords dropped, Snowball-stemmed) and stores them as JSON in
-- `semantic_facts.index_terms` ({"term": [tf, context_tf]}); the triggers below keep the
-- three tables in step with that column on every insert, update and delete, so no code path
-- (erase, prune, supersession, reindexing) can forget the index. NULL = not indexed yet
-- (facts written before this migration: `agent_memory.tiers.semantic.reindex`, run by the
-- daily cron and `agent-memory reindex`, fills them in a bounded batch at a time).
--
-- `session_key`: the session / run / thread a fact was written in; the context column holds
-- the words of the memories around it in that session (contextual retrieval).

ALTER TABLE semantic_facts ADD COLUMN session_key TEXT
    CHECK (session_key IS NULL OR length(session_key) BETWEEN 1 AND 256);
ALTER TABLE semantic_facts ADD COLUMN index_terms TEXT
    CHECK (index_terms IS NULL OR json_valid(index_terms));
ALTER TABLE semantic_facts ADD COLUMN index_length INTEGER NOT NULL DEFAULT 0
    CHECK (index_length >= 0);
ALTER TABLE semantic_facts ADD COLUMN context_length INTEGER NOT NULL DEFAULT 0
    CHECK (context_length >= 0);

-- The memories just before a new one in its session: one index range, newest first.
CREATE INDEX semantic_facts_by_session
    ON semantic_facts (tenant_id, session_key, fts_rowid) WHERE session_key IS NOT NULL;
-- Facts not indexed yet, found without scanning a tenant (empty once reindexed).
CREATE INDEX semantic_facts_unindexed
    ON semantic_facts (tenant_id, fts_rowid) WHERE index_terms IS NULL;

CREATE TABLE semantic_terms (
    tenant_id  TEXT NOT NULL,
    term       TEXT NOT NULL,
    fts_rowid  INTEGER NOT NULL,
    tf         INTEGER NOT NULL CHECK (tf >= 0),
    context_tf INTEGER NOT NULL CHECK (context_tf >= 0),
    -- The fact's field lengths, copied so candidate generation never reads the fact rows.
    length     INTEGER NOT NULL,
    context_length INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, term, fts_rowid)
) STRICT, WITHOUT ROWID;

CREATE TABLE semantic_term_stats (
    tenant_id TEXT NOT NULL,
    term      TEXT NOT NULL,
    df        INTEGER NOT NULL CHECK (df >= 0),
    PRIMARY KEY (tenant_id, term)
) STRICT, WITHOUT ROWID;

CREATE TABLE semantic_index_stats (
    tenant_id            TEXT PRIMARY KEY,
    docs                 INTEGER NOT NULL CHECK (docs >= 0),
    total_length         INTEGER NOT NULL CHECK (total_length >= 0),
    total_context_length INTEGER NOT NULL CHECK (total_context_length >= 0)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER semantic_terms_on_insert AFTER INSERT ON semantic_facts
WHEN new.index_terms IS NOT NULL BEGIN
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT new.tenant_id, j.key, new.fts_rowid, json_extract(j.value, '$[0]'),
           json_extract(j.value, '$[1]'), new.index_length, new.context_length
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

CREATE TRIGGER semantic_terms_on_delete AFTER DELETE ON semantic_facts
WHEN old.index_terms IS NOT NULL BEGIN
    UPDATE semantic_term_stats SET df = df - 1
    WHERE tenant_id = old.tenant_id
      AND term IN (SELECT j.key FROM json_each(old.index_terms) AS j);
    DELETE FROM semantic_terms
    WHERE tenant_id = old.tenant_id
      AND term IN (SELECT j.key FROM json_each(old.index_terms) AS j)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE tenant_id = old.tenant_id;
END;

-- A changed index (context that arrived later, a reindexed fact): the old terms out, the new
-- ones in, as the two triggers above would do.
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
    SELECT new.tenant_id, j.key, new.fts_rowid, json_extract(j.value, '$[0]'),
           json_extract(j.value, '$[1]'), new.index_length, new.context_length
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

-- The FTS5 index is replaced by the tables above.
DROP TRIGGER semantic_facts_fts_insert;
DROP TRIGGER semantic_facts_fts_delete;
DROP TRIGGER semantic_facts_fts_update;
DROP TABLE semantic_facts_fts;
