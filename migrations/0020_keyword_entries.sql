-- 0020: shorter keyword-index rows (issue 29; benchmarks/storage_bytes.py).
--
-- 1. `semantic_facts.index_terms` (0018: a JSON array, a term of tf 1 and no context a bare
--    string) now joins those terms into one string with spaces: `["dana vp sale",["may",0,1]]`
--    for 0018's `["dana","vp","sale",["may",0,1]]`, 2 bytes fewer a term. Terms are letters
--    and digits only (`retrieval.term_counts`), so a space separates them and none needs
--    escaping in the JSON the triggers build to split them. 0018's entries (one term a
--    string) read the same; 0015's objects still read.
-- 2. The postings (`semantic_terms`, ~13 rows a fact) and term counts (`semantic_term_stats`)
--    name their tenant by a short code of this database (`keyword_tenants`), not its id: 'A'
--    for the first tenant indexed here, 3 bytes fewer a posting than "acme" and 20-60 fewer
--    than a real tenant id. Their `tenant_id` column holds the code. A tenant indexed before
--    this migration keeps its id as its code (its rows are not rewritten: safe on a full
--    database); a code made here is upper case ('A'..'Z', 'AA'..'ZZ', then 'Z703'...),
--    which no tenant id is (`namespace.TENANT_PATTERN`), so the two never meet. The triggers
--    give a tenant its code with its first indexed fact; the index is read by code
--    (`keyword_index`). A move does not copy the codes: the target's triggers make its own.

CREATE TABLE keyword_tenants (
    n          INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL UNIQUE CHECK (length(tenant_id) BETWEEN 1 AND 128),
    code       TEXT NOT NULL UNIQUE CHECK (length(code) BETWEEN 1 AND 128)
) STRICT;

INSERT INTO keyword_tenants (tenant_id, code)
SELECT tenant_id, tenant_id FROM semantic_index_stats;

DROP TRIGGER semantic_terms_on_insert;
DROP TRIGGER semantic_terms_on_delete;
DROP TRIGGER semantic_terms_on_update;

CREATE TRIGGER semantic_terms_on_insert AFTER INSERT ON semantic_facts
WHEN new.index_terms IS NOT NULL BEGIN
    INSERT INTO keyword_tenants (n, tenant_id, code)
    SELECT m, new.tenant_id, CASE WHEN m <= 26 THEN char(64 + m)
                                  WHEN m <= 702 THEN char(64 + (m - 1) / 26) || char(65 + (m - 1) % 26)
                                  ELSE 'Z' || m END
    FROM (SELECT coalesce(max(n), 0) + 1 AS m FROM keyword_tenants)
    WHERE NOT EXISTS (SELECT 1 FROM keyword_tenants WHERE tenant_id = new.tenant_id);
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id),
           CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END,
           new.fts_rowid,
           CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]')
                ELSE json_extract(j.value, '$[0]') END,
           CASE WHEN j.type IN ('text', 'integer') THEN 0
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]')
                ELSE json_extract(j.value, '$[1]') END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE true;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id), CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE true
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
    WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s);
    DELETE FROM semantic_terms
    WHERE tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE tenant_id = old.tenant_id;
END;

CREATE TRIGGER semantic_terms_on_update AFTER UPDATE OF index_terms ON semantic_facts BEGIN
    UPDATE semantic_term_stats SET df = df - 1
    WHERE old.index_terms IS NOT NULL AND tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s);
    DELETE FROM semantic_terms
    WHERE old.index_terms IS NOT NULL AND tenant_id = (SELECT code FROM keyword_tenants WHERE tenant_id = old.tenant_id)
      AND term IN (SELECT CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END
                   FROM json_each(old.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s)
      AND fts_rowid = old.fts_rowid;
    UPDATE semantic_index_stats SET docs = docs - 1,
        total_length = total_length - old.index_length,
        total_context_length = total_context_length - old.context_length
    WHERE old.index_terms IS NOT NULL AND tenant_id = old.tenant_id;
    INSERT INTO keyword_tenants (n, tenant_id, code)
    SELECT m, new.tenant_id, CASE WHEN m <= 26 THEN char(64 + m)
                                  WHEN m <= 702 THEN char(64 + (m - 1) / 26) || char(65 + (m - 1) % 26)
                                  ELSE 'Z' || m END
    FROM (SELECT coalesce(max(n), 0) + 1 AS m FROM keyword_tenants)
    WHERE new.index_terms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM keyword_tenants WHERE tenant_id = new.tenant_id);
    INSERT INTO semantic_terms (tenant_id, term, fts_rowid, tf, context_tf, length,
                                context_length)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id),
           CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END,
           new.fts_rowid,
           CASE WHEN j.type = 'text' THEN 1 WHEN j.type = 'integer' THEN j.value
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[1]')
                ELSE json_extract(j.value, '$[0]') END,
           CASE WHEN j.type IN ('text', 'integer') THEN 0
                WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[2]')
                ELSE json_extract(j.value, '$[1]') END,
           new.index_length, new.context_length
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE new.index_terms IS NOT NULL;
    INSERT INTO semantic_term_stats (tenant_id, term, df)
    SELECT (SELECT code FROM keyword_tenants WHERE tenant_id = new.tenant_id), CASE WHEN j.type = 'text' THEN s.value WHEN typeof(j.key) = 'integer' THEN json_extract(j.value, '$[0]') ELSE j.key END, 1
    FROM json_each(new.index_terms) AS j, json_each(CASE WHEN j.type = 'text' THEN '["' || replace(j.value, ' ', '","') || '"]' ELSE '[0]' END) AS s WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id, term) DO UPDATE SET df = df + 1;
    INSERT INTO semantic_index_stats (tenant_id, docs, total_length, total_context_length)
    SELECT new.tenant_id, 1, new.index_length, new.context_length
    WHERE new.index_terms IS NOT NULL
    ON CONFLICT (tenant_id) DO UPDATE SET docs = docs + 1,
        total_length = total_length + excluded.total_length,
        total_context_length = total_context_length + excluded.total_context_length;
END;
