"""Personal data sealed at rest (docs/personal-data.md: the marking, the sealed-value format,
its AAD, what an unreadable value reads as, the data keys and their wrapping): the one place
marked fields are encrypted and decrypted, and the per-subject data keys (DEKs, D1
`subject_data_keys`) they are sealed under. Unwrapped keys are cached for one request; logs
name key ids and KEK kids, never subjects or keys.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from typing import Any

from agent_memory.governance.writes import PERSONAL_MARK, canonical_json, personal_marking
from agent_memory.ids import IDS_PER_STATEMENT, chunks, new_ulid, sha256_hex
from bindings.ports.clock import Clock
from bindings.ports.crypto import ALGORITHM, Cipher, CipherError, KeyEncryptionKeys
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import Row, SqlValue

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


@dataclass
class DataKeys:
    """One tenant's subject data keys (see the module docstring)."""

    tenant_id: str
    _: KW_ONLY
    db: D1Database
    cipher: Cipher
    keks: KeyEncryptionKeys
    clock: Clock
    _cache: dict[str, bytes] = field(default_factory=dict, init=False)  # key_id -> data key
    _newest: dict[str, str] = field(default_factory=dict, init=False)  # subject hash -> key_id

    def _sql(self, sql: str, *params: SqlValue) -> D1Statement:
        return self.db.prepare(sql).bind(self.tenant_id, *params)

    def _aad(self, digest: str, key_id: str, kek_kid: str) -> bytes:
        parts = [WRAP_AAD_LABEL, *(p.encode() for p in (self.tenant_id, digest, key_id, kek_kid))]
        return b"\x00".join(parts)

    async def _wrap(self, digest: str, key_id: str, key: bytes) -> tuple[str, str]:
        kek_kid, kek = self.keks.newest
        nonce, sealed = await self.cipher.encrypt(kek, key, self._aad(digest, key_id, kek_kid))
        return kek_kid, f"{b64url(nonce)}.{b64url(sealed)}"

    async def _unwrap(self, digest: str, row: Row) -> bytes | None:
        """The data key of a `subject_data_keys` row; None (logged) when it does not unwrap."""
        key_id, kek_kid, wrapped = str(row["key_id"]), str(row["kek_kid"]), str(row["wrapped"])
        kek = self.keks.get(kek_kid)
        if kek is None:
            log.error("data key %s is wrapped by KEK %r, which is not configured", key_id, kek_kid)
            return None
        nonce, _, sealed = wrapped.partition(".")
        try:
            return await self.cipher.decrypt(
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
        row = await self._sql(
            "SELECT key_id, kek_kid, wrapped FROM subject_data_keys "
            "WHERE tenant_id = ? AND subject_hash = ? ORDER BY key_id DESC LIMIT 1",
            digest,
        ).first()
        key = None if row is None else await self._unwrap(digest, row)
        if row is not None and key is not None:
            key_id = str(row["key_id"])
        else:  # none yet, or one this deployment cannot unwrap: start a new one
            key_id = new_ulid(self.clock.now())
            key = await self.cipher.new_key()
            kek_kid, wrapped = await self._wrap(digest, key_id, key)
            await self._sql(
                "INSERT INTO subject_data_keys (tenant_id, subject_hash, key_id, kek_kid, "
                "wrapped, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                digest,
                key_id,
                kek_kid,
                wrapped,
                int(self.clock.now() * 1000),
            ).run()
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
            result = await self._sql(
                "SELECT key_id, kek_kid, wrapped FROM subject_data_keys WHERE tenant_id = ? "
                f"AND subject_hash = ? AND key_id IN ({marks})",
                digest,
                *chunk,
            ).all()
            for row in result.results:
                key = await self._unwrap(digest, row)
                if key is not None:
                    self._cache[str(row["key_id"])] = found[str(row["key_id"])] = key
        return found

    async def rewrap(self, limit: int = 500) -> int:
        """Re-wrap up to `limit` of the tenant's data keys not under the newest KEK; returns
        how many were re-wrapped (0: the tenant is done). A key whose KEK is no longer
        configured is left as it is (and logged): it is unreadable already."""
        newest, _ = self.keks.newest
        result = await self._sql(
            "SELECT subject_hash, key_id, kek_kid, wrapped FROM subject_data_keys "
            "WHERE tenant_id = ? AND kek_kid <> ? ORDER BY key_id LIMIT ?",
            newest,
            limit,
        ).all()
        done = 0
        for row in result.results:
            digest, key_id = str(row["subject_hash"]), str(row["key_id"])
            key = await self._unwrap(digest, row)
            if key is None:
                continue
            kek_kid, wrapped = await self._wrap(digest, key_id, key)
            # Guarded by the old kid, so a concurrent re-wrap of the same row is harmless.
            await (
                self.db.prepare(
                    "UPDATE subject_data_keys SET kek_kid = ?, wrapped = ? WHERE tenant_id = ? "
                    "AND subject_hash = ? AND key_id = ? AND kek_kid = ?"
                )
                .bind(kek_kid, wrapped, self.tenant_id, digest, key_id, str(row["kek_kid"]))
                .run()
            )
            done += 1
        return done


SEALED_PREFIX, SEALED_VERSION, SEALED_KEY, ERASED_KEY = "pii", "1", "_sealed", "_erased"
AAD_LABEL = b"agent-memory/pii/1"


@dataclass(frozen=True, slots=True)
class SealedValue:
    """A parsed sealed value (its text form: docs/personal-data.md)."""

    kid: str
    nonce: bytes
    ciphertext: bytes

    def text(self) -> str:
        return ".".join(
            (SEALED_PREFIX, SEALED_VERSION, ALGORITHM, self.kid, b64url(self.nonce),
             b64url(self.ciphertext))
        )  # fmt: skip

    @classmethod
    def parse(cls, value: Any) -> SealedValue | None:
        """The sealed value `value` holds, or None when it is not one of ours."""
        if not isinstance(value, str) or not value.startswith(SEALED_PREFIX + "."):
            return None
        parts = value.split(".")
        if len(parts) != 6 or parts[1] != SEALED_VERSION or parts[2] != ALGORITHM:
            return None
        try:
            return cls(kid=parts[3], nonce=unb64url(parts[4]), ciphertext=unb64url(parts[5]))
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class Sealable:
    """One JSON object to open: whose it is (subject), which row, under which field."""

    subject: str | None
    record_id: str
    value: Mapping[str, Any]


def public_view(value: Mapping[str, Any]) -> dict[str, Any]:
    """`value` without its personal fields (and without the mark)."""
    fields = personal_marking(value)
    if fields is None:
        return dict(value)
    if not fields:
        return {}
    out = json.loads(canonical_json(value))
    for path in fields:
        _set(out, path, None, delete=True)
    out.pop(PERSONAL_MARK, None)
    return dict(out)


def _get(value: Mapping[str, Any], path: str) -> Any:
    node: Any = value
    for part in path.split(".") if path else ():
        node = node[part]
    return node


def _set(value: dict[str, Any], path: str, new: Any, *, delete: bool = False) -> None:
    *parents, last = path.split(".")
    node: Any = value
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and last in node:
        if delete:
            del node[last]
        else:
            node[last] = new


@dataclass
class PersonalData:
    """Seals and opens the marked fields of one tenant's rows. Without keys (no cipher or
    no `MEMORY_PII_KEKS`) writing marked data raises `PersonalDataUnavailable` (never stored
    in plaintext) and sealed values read as unreadable."""

    tenant_id: str
    # A factory (`from_bindings`): the KEKs are parsed when a record is first sealed or
    # opened, not on every request that builds a tenant's `Memory`.
    make_keys: Callable[[], DataKeys | None] | None
    cipher: Cipher | None

    @cached_property
    def _keys(self) -> DataKeys | None:
        return None if self.make_keys is None else self.make_keys()

    @classmethod
    def from_bindings(cls, bindings: Any, tenant_id: str) -> PersonalData:
        """Built from a request's `Bindings` (duck-typed: `db`, `cipher`, `clock`,
        `settings.pii_keks`)."""
        cipher = getattr(bindings, "cipher", None)

        def keys() -> DataKeys | None:
            keks = bindings.settings.pii_keks if bindings.settings is not None else None
            if cipher is None or keks is None or bindings.db is None:
                return None
            return DataKeys(
                tenant_id, db=bindings.db, cipher=cipher, keks=keks, clock=bindings.clock
            )

        return cls(tenant_id, keys, cipher)

    @property
    def can_seal(self) -> bool:
        return self._keys is not None and self.cipher is not None

    def _aad(self, subject: str, record_id: str, path: str) -> bytes:
        parts = (self.tenant_id, subject, record_id, path)
        return b"\x00".join([AAD_LABEL, *(p.encode("utf-8") for p in parts)])

    async def seal(
        self, subject: str | None, record_id: str, field: str, value: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`value` (the `field` column of row `record_id`) with its marked fields sealed;
        unchanged when nothing is marked. The write policy has already required a subject
        and checked that the marked fields exist."""
        fields = personal_marking(value)
        if fields is None:
            return dict(value)
        if self._keys is None or self.cipher is None or not subject:
            raise PersonalDataUnavailable(
                "personal data cannot be stored: set the MEMORY_PII_KEKS secret "
                "(docs/personal-data.md)"
            )
        key_id, key = await self._keys.for_write(subject)
        out: dict[str, Any] = json.loads(canonical_json(value))
        for path in _targets(fields):
            node = _get(out, path)
            whole = isinstance(node, Mapping) and node.get(PERSONAL_MARK) is True
            plain = {k: v for k, v in node.items() if k != PERSONAL_MARK} if whole else node
            aad = self._aad(subject, record_id, _aad_path(field, path, whole))
            nonce, ct = await self.cipher.encrypt(key, canonical_json(plain), aad)
            text = SealedValue(key_id, nonce, ct).text()
            out = _put(out, path, {PERSONAL_MARK: True, SEALED_KEY: text} if whole else text)
        return out

    async def open_many(self, field: str, items: Sequence[Sealable]) -> list[dict[str, Any]]:
        """Each item's value with its sealed fields opened (unreadable ones replaced as
        docs/personal-data.md says); values without sealed fields are returned as they are."""
        plans = [_sealed_paths(item.value) for item in items]
        wanted: dict[str, set[str]] = {}
        for item, plan in zip(items, plans, strict=True):
            if plan and item.subject:
                wanted.setdefault(item.subject, set()).update(s.kid for _, s, _ in plan)
        keys: dict[tuple[str, str], bytes] = {}
        if wanted and self._keys is not None:
            for subject, ids in wanted.items():
                for key_id, key in (await self._keys.for_read(subject, ids)).items():
                    keys[(subject, key_id)] = key
        out = []
        for item, plan in zip(items, plans, strict=True):
            value = dict(item.value)
            if plan:
                value = await self._open(field, item, plan, keys)
            out.append(value)
        return out

    async def _open(
        self,
        field: str,
        item: Sealable,
        plan: list[tuple[str, SealedValue, bool]],
        keys: Mapping[tuple[str, str], bytes],
    ) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(canonical_json(item.value))
        for path, sealed, whole in plan:
            plain: Any = None
            readable = False
            key = keys.get((item.subject or "", sealed.kid))
            if key is not None and self.cipher is not None and item.subject:
                aad = self._aad(item.subject, item.record_id, _aad_path(field, path, whole))
                try:
                    data = await self.cipher.decrypt(key, sealed.nonce, sealed.ciphertext, aad)
                    plain, readable = json.loads(data), True
                except (CipherError, ValueError):
                    log.warning("sealed %s of %s does not open", field, item.record_id)
            if whole:
                opened = readable and isinstance(plain, dict)
                plain = {PERSONAL_MARK: True, **(plain if opened else {ERASED_KEY: True})}
            out = _put(out, path, plain)
        return out


def _targets(fields: tuple[str, ...]) -> list[str]:
    """The paths to seal: the marked fields, or "" (the object itself) for a whole mark."""
    return list(fields) if fields else [""]


def _aad_path(field: str, path: str, whole: bool) -> str:
    """`data.email`, `metadata.contact.*`, `data.*` (a whole object): the AAD's field part."""
    return field + (f".{path}" if path else "") + (".*" if whole else "")


def _put(value: dict[str, Any], path: str, new: Any) -> dict[str, Any]:
    """`value` with `new` at `path` ("" replaces the value itself)."""
    if not path:
        return dict(new)
    _set(value, path, new)
    return value


def _sealed_paths(value: Mapping[str, Any]) -> list[tuple[str, SealedValue, bool]]:
    """(path, sealed value, whole object?) for every sealed marked field of `value`."""
    fields = personal_marking(value)
    if fields is None:
        return []
    found = []
    for path in _targets(fields):
        try:
            node = _get(value, path)
        except (KeyError, TypeError):
            continue
        whole = isinstance(node, Mapping) and SEALED_KEY in node
        sealed = SealedValue.parse(node[SEALED_KEY] if whole else node)
        if sealed is not None:
            found.append((path, sealed, whole))
    return found
