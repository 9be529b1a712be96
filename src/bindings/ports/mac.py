"""MAC port: HMAC-SHA256 signing and verification for the Worker's own tokens.

One small surface so the agent-scoped memory tokens (`worker.memory_tokens`) never hold
crypto code of their own: on Cloudflare the platform's WebCrypto does the work
(`crypto.subtle`), locally Python's `hmac` module (the stdlib's maintained HMAC, what
PyJWT itself uses for HS256). Both are async because WebCrypto is.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Protocol


class MacSigner(Protocol):
    async def sign(self, key: bytes, data: bytes) -> bytes:
        """HMAC-SHA256 of `data` under `key` (32 bytes)."""
        ...

    async def verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        """True when `mac` is the HMAC-SHA256 of `data` under `key` (constant time)."""
        ...


class StdlibMacSigner:
    """HMAC-SHA256 from the standard library (`hmac`), for CPython and tests."""

    async def sign(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, hashlib.sha256).digest()

    async def verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(hmac.new(key, data, hashlib.sha256).digest(), mac)
