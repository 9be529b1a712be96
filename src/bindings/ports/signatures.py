"""Signatures port: HMAC-SHA256 (RFC 2104, the memory tokens' HS256, compared in constant
time) and RS256 verification (RSASSA-PKCS1-v1_5 SHA-256, RFC 8017 §8.2.2, under an RSA JWK:
Cloudflare Access tokens). WebCrypto on Cloudflare (`bindings.cloudflare.signatures`),
`cryptography` locally; async because WebCrypto is; each checks the other's output
(tests/pyodide/py/test_signatures.py). A verifier answers False for anything that does not
verify (wrong key, altered data, bad length, unusable key) and never raises for it.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Protocol

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def base64url_bytes(value: str) -> bytes:
    """The bytes of an unpadded base64url string (RFC 7515 §2); ValueError if it is not one
    (the standard decoder would silently skip characters outside the alphabet)."""
    if not _BASE64URL.fullmatch(value) or len(value) % 4 == 1:
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None


@dataclass(frozen=True, slots=True)
class RsaPublicJwk:
    """An RSA public key as a JWK: `n` and `e` as a JWKS publishes them (base64url, no padding,
    big-endian), checked for that alphabet on construction."""

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
