"""The cryptography ports: WebCrypto on Cloudflare, `cryptography` locally; each reads the
other's output (tests/pyodide/py/test_cipher.py, test_signatures.py).

* `Cipher`: AES-256-GCM for personal data at rest (docs/personal-data.md); the adapter picks a
  fresh 96-bit nonce and appends the 128-bit tag, as WebCrypto does.
* `Signatures`: HMAC-SHA256 (compared in constant time) and RS256 verification under an RSA
  JWK (Cloudflare Access tokens). A verifier answers False for anything that does not verify.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Protocol

KEY_BYTES = 32  # AES-256

NONCE_BYTES = 12  # 96-bit GCM nonce (NIST SP 800-38D's recommended length)

TAG_BYTES = 16  # 128-bit tag

ALGORITHM = "A256GCM"

KID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class CipherError(Exception):
    """Decryption failed: wrong key, nonce or AAD, or the ciphertext was altered."""


class Cipher(Protocol):
    async def new_key(self) -> bytes:
        """A new random AES-256 key (32 bytes)."""

    async def encrypt(self, key: bytes, plaintext: bytes, aad: bytes) -> tuple[bytes, bytes]:
        """(nonce, ciphertext || tag) of `plaintext` under `key`, authenticating `aad`."""

    async def decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        """The plaintext; raises `CipherError` if anything does not authenticate."""


@dataclass(frozen=True, slots=True)
class KeyEncryptionKeys:
    """`MEMORY_PII_KEKS`, newest first: `(kid, key)`; the newest wraps, every one unwraps."""

    keys: tuple[tuple[str, bytes], ...]

    @property
    def newest(self) -> tuple[str, bytes]:
        return self.keys[0]

    def get(self, kid: str) -> bytes | None:
        return dict(self.keys).get(kid)


def parse_key_encryption_keys(raw: str) -> KeyEncryptionKeys | None:
    """Parse `MEMORY_PII_KEKS` (`kid:base64key,...`, standard or URL-safe base64 of 32
    bytes); None when empty. Raises ValueError naming the bad entry — never its key."""
    entries = [item.strip() for item in raw.split(",") if item.strip()]
    if not entries:
        return None
    keys: list[tuple[str, bytes]] = []
    for index, entry in enumerate(entries):
        kid, sep, encoded = entry.partition(":")
        if not sep or not KID_RE.fullmatch(kid):
            raise ValueError(f"MEMORY_PII_KEKS entry {index + 1} is not `kid:base64key`")
        try:
            text = encoded.strip().replace("-", "+").replace("_", "/")
            key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"MEMORY_PII_KEKS key {kid!r} is not base64") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"MEMORY_PII_KEKS key {kid!r} is {len(key)} bytes, not {KEY_BYTES}")
        if any(name == kid for name, _ in keys):
            raise ValueError(f"MEMORY_PII_KEKS names kid {kid!r} twice")
        keys.append((kid, key))
    return KeyEncryptionKeys(tuple(keys))


_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def base64url_bytes(value: str) -> bytes:
    """The bytes of unpadded base64url (RFC 7515 §2); ValueError otherwise (the standard
    decoder silently skips characters outside the alphabet)."""
    if not _BASE64URL.fullmatch(value) or len(value) % 4 == 1:
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None


@dataclass(frozen=True, slots=True)
class RsaPublicJwk:
    """An RSA public JWK's `n` and `e` (unpadded base64url, big-endian), checked on creation."""

    n: str
    e: str

    def __post_init__(self) -> None:
        for name, value in (("n", self.n), ("e", self.e)):
            if not isinstance(value, str) or not base64url_bytes(value).lstrip(b"\x00"):
                raise ValueError(f"JWK {name!r} is not a positive base64url integer")

    @property
    def modulus(self) -> int:
        return int.from_bytes(base64url_bytes(self.n), "big")

    @property
    def exponent(self) -> int:
        return int.from_bytes(base64url_bytes(self.e), "big")


class Signatures(Protocol):
    async def hmac_sign(self, key: bytes, data: bytes) -> bytes:
        """HMAC-SHA256 of `data` under `key` (32 bytes)."""

    async def hmac_verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        """True when `mac` is the HMAC-SHA256 of `data` under `key` (constant time)."""

    async def rs256_verify(self, key: RsaPublicJwk, data: bytes, signature: bytes) -> bool:
        """True when `signature` is an RS256 signature of `data` by the private half of `key`."""
