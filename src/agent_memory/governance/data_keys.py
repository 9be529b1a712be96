"""Per-subject data keys (DEKs) for personal data, stored wrapped in D1 (migration 0011).

Each (tenant, subject) gets random AES-256 data keys, each with its own id (`key_id`, a
ULID: what a sealed value's `kid` names). A data key is stored only wrapped: AES-256-GCM
under a key-encryption key (KEK) from the `MEMORY_PII_KEKS` Worker secret, with the AAD
`agent-memory/dek/1 NUL tenant NUL subject_hash NUL key_id NUL kek_kid`, so a wrapped key
copied to another row does not unwrap. The row is keyed (tenant_id, subject_hash, key_id)
and holds the KEK's `kek_kid`; the subject itself is stored only as its SHA-256.

* `for_write(subject)` — the subject's newest data key, made and stored on first use (two
  writers racing both store one; each sealed value names the key it used, so both read);
* `for_read(subject, ids)` — the keys with those ids that still exist (an erased subject's
  keys do not: what they sealed is unreadable, wherever a copy of it lives);
* `rewrap(limit)` — KEK rotation: re-wrap keys not under the newest KEK (the first of
  `MEMORY_PII_KEKS`); once none is left, the old KEK can be removed from the secret;
* `destroy_statement(db, tenant, subject)` — crypto-shredding, used by the subject erase.

Unwrapped keys are cached for the life of this object (one request). Logs name key ids and
KEK kids, never subjects or keys.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable

from agent_memory.ids import new_ulid, sha256_hex
from agent_memory.statements import IDS_PER_STATEMENT, chunks
from bindings.ports.cipher import Cipher, CipherError, KeyEncryptionKeys
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement

log = logging.getLogger(__name__)

WRAP_AAD_LABEL = b"agent-memory/dek/1"


class PersonalDataUnavailable(RuntimeError):
    """Personal data cannot be sealed here: no cipher or no `MEMORY_PII_KEKS` configured."""

    code = "personal_data_unavailable"


def subject_hash(subject: str) -> str:
    return sha256_hex(subject.encode("utf-8"))


def b64url(data: bytes) -> str:
    """base64url without padding: how wrapped keys and sealed values write bytes."""
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def destroy_statement(db: D1Database, tenant_id: str, subject: str) -> D1Statement:
    """DELETE every data key of (tenant, subject): crypto-shredding (subject erase)."""
    return db.prepare(
        "DELETE FROM subject_data_keys WHERE tenant_id = ? AND subject_hash = ?"
    ).bind(tenant_id, subject_hash(subject))


class DataKeys:
    """One tenant's subject data keys (see the module docstring)."""

    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        cipher: Cipher,
        keks: KeyEncryptionKeys,
        clock: Clock,
    ) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._cipher = cipher
        self._keks = keks
        self._clock = clock
        self._cache: dict[str, bytes] = {}  # key_id -> data key
        self._newest: dict[str, str] = {}  # subject hash -> key_id for writes

    def _aad(self, digest: str, key_id: str, kek_kid: str) -> bytes:
        parts = [WRAP_AAD_LABEL, *(p.encode() for p in (self.tenant_id, digest, key_id, kek_kid))]
        return b"\x00".join(parts)

    async def _wrap(self, digest: str, key_id: str, key: bytes) -> tuple[str, str]:
        kek_kid, kek = self._keks.newest
        nonce, sealed = await self._cipher.encrypt(kek, key, self._aad(digest, key_id, kek_kid))
        return kek_kid, f"{b64url(nonce)}.{b64url(sealed)}"

    async def _unwrap(self, digest: str, key_id: str, kek_kid: str, wrapped: str) -> bytes | None:
        kek = self._keks.get(kek_kid)
        if kek is None:
            log.error("data key %s is wrapped by KEK %r, which is not configured", key_id, kek_kid)
            return None
        nonce, _, sealed = wrapped.partition(".")
        try:
            return await self._cipher.decrypt(
                kek, unb64url(nonce), unb64url(sealed), self._aad(digest, key_id, kek_kid)
            )
        except (CipherError, ValueError):
            log.error("data key %s does not unwrap under KEK %r", key_id, kek_kid)
            return None

    async def for_write(self, subject: str) -> tuple[str, bytes]:
        """(key_id, key): the subject's newest data key, created on first use."""
        digest = subject_hash(subject)
        known = self._newest.get(digest)
        if known is not None:
            return known, self._cache[known]
        row = await (
            self._db.prepare(
                "SELECT key_id, kek_kid, wrapped FROM subject_data_keys "
                "WHERE tenant_id = ? AND subject_hash = ? ORDER BY key_id DESC LIMIT 1"
            )
            .bind(self.tenant_id, digest)
            .first()
        )
        key: bytes | None = None
        if row is not None:
            key_id = str(row["key_id"])
            key = await self._unwrap(digest, key_id, str(row["kek_kid"]), str(row["wrapped"]))
        if key is None:  # none yet, or one this deployment cannot unwrap: start a new one
            key_id = new_ulid(self._clock.now())
            key = await self._cipher.new_key()
            kek_kid, wrapped = await self._wrap(digest, key_id, key)
            await (
                self._db.prepare(
                    "INSERT INTO subject_data_keys (tenant_id, subject_hash, key_id, kek_kid, "
                    "wrapped, created_at) VALUES (?, ?, ?, ?, ?, ?)"
                )
                .bind(self.tenant_id, digest, key_id, kek_kid, wrapped, self._now_ms())
                .run()
            )
        self._cache[key_id] = key
        self._newest[digest] = key_id
        return key_id, key

    async def for_read(self, subject: str, key_ids: Iterable[str]) -> dict[str, bytes]:
        """The data keys among `key_ids` that exist for the subject (erased ones do not)."""
        digest = subject_hash(subject)
        wanted = sorted(set(key_ids))
        found = {k: self._cache[k] for k in wanted if k in self._cache}
        missing = [k for k in wanted if k not in found]
        for chunk in chunks(missing, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = await (
                self._db.prepare(
                    "SELECT key_id, kek_kid, wrapped FROM subject_data_keys WHERE tenant_id = ? "
                    f"AND subject_hash = ? AND key_id IN ({marks})"
                )
                .bind(self.tenant_id, digest, *chunk)
                .all()
            )
            for row in result.results:
                key_id = str(row["key_id"])
                key = await self._unwrap(digest, key_id, str(row["kek_kid"]), str(row["wrapped"]))
                if key is not None:
                    self._cache[key_id] = found[key_id] = key
        return found

    async def rewrap(self, limit: int = 500) -> int:
        """Re-wrap up to `limit` of the tenant's data keys not under the newest KEK; returns
        how many were re-wrapped (0: the tenant is done). A key whose KEK is no longer
        configured is left as it is (and logged): it is unreadable already."""
        newest, _ = self._keks.newest
        result = await (
            self._db.prepare(
                "SELECT subject_hash, key_id, kek_kid, wrapped FROM subject_data_keys "
                "WHERE tenant_id = ? AND kek_kid <> ? ORDER BY key_id LIMIT ?"
            )
            .bind(self.tenant_id, newest, limit)
            .all()
        )
        done = 0
        for row in result.results:
            digest, key_id = str(row["subject_hash"]), str(row["key_id"])
            key = await self._unwrap(digest, key_id, str(row["kek_kid"]), str(row["wrapped"]))
            if key is None:
                continue
            kek_kid, wrapped = await self._wrap(digest, key_id, key)
            # Guarded by the old kid, so a concurrent re-wrap of the same row is harmless.
            await (
                self._db.prepare(
                    "UPDATE subject_data_keys SET kek_kid = ?, wrapped = ? WHERE tenant_id = ? "
                    "AND subject_hash = ? AND key_id = ? AND kek_kid = ?"
                )
                .bind(kek_kid, wrapped, self.tenant_id, digest, key_id, str(row["kek_kid"]))
                .run()
            )
            done += 1
        return done

    def _now_ms(self) -> int:
        return int(self._clock.now() * 1000)
