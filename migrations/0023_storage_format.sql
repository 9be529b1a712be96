-- 0023: how this database stores what differs between the two schemas a shard's database
-- may have (issue 29, docs/placement.md "Bytes per memory"): databases made from
-- migrations/ (this folder) keep a fact's full content hash (64 hex characters);
-- databases made from migrations-compact/ keep its first 24 (96 bits) and their keyword
-- postings in a smaller form. One row. Statements read it where they write a hash
-- (`substr(?, 1, (SELECT content_hash_chars FROM storage_format))`), so the code holds no
-- per-database setting that could disagree with the schema.
CREATE TABLE storage_format (
    content_hash_chars INTEGER NOT NULL CHECK (content_hash_chars IN (24, 64))
) STRICT;
INSERT INTO storage_format (content_hash_chars) VALUES (64);
