-- 0011: personal data at rest (docs/personal-data.md): per-subject data keys, stored wrapped.
--
-- Fields marked personal (`_personal`) are sealed with AES-256-GCM under a data key of their
-- (tenant, subject); the key is stored here only wrapped (AES-256-GCM) by a key-encryption
-- key from the MEMORY_PII_KEKS Worker secret, named by `kek_kid`. The subject is stored as
-- its SHA-256. A subject erase deletes its rows here (crypto-shredding): every sealed value
-- of the subject, in D1, in cold archives or in a Time Travel copy, then has no key.
-- Same conventions as 0001: STRICT, tenant first in the key and in every index.

CREATE TABLE subject_data_keys (
    tenant_id     TEXT NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 128),
    subject_hash  TEXT NOT NULL CHECK (length(subject_hash) = 64),
    key_id        TEXT NOT NULL CHECK (length(key_id) = 26),
    kek_kid       TEXT NOT NULL CHECK (length(kek_kid) BETWEEN 1 AND 64),
    wrapped       TEXT NOT NULL CHECK (length(wrapped) BETWEEN 1 AND 256),
    created_at    INTEGER NOT NULL CHECK (created_at > 0),
    PRIMARY KEY (tenant_id, subject_hash, key_id)
) STRICT;

-- KEK rotation re-wraps a tenant's keys not under the newest kid: one index range.
CREATE INDEX subject_data_keys_by_kek ON subject_data_keys (tenant_id, kek_kid);
