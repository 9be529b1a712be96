"""`MacSigner` on Cloudflare: HMAC-SHA256 by the platform's WebCrypto (`crypto.subtle`).

workerd implements the Web Crypto API; the key is imported per call as a non-extractable
raw HMAC key (SHA-256) with only the usage the call needs, and `verify` is WebCrypto's own
(constant-time) comparison. Bytes cross as `Uint8Array` (`to_js`), the signature comes back
as an `ArrayBuffer` (`to_bytes`). `js` is imported when called, so this module loads where
the runtime has no `crypto` global (the CPython fakes).
"""

from __future__ import annotations

from typing import Any

from pyodide.ffi import to_js

_ALGORITHM = {"name": "HMAC", "hash": "SHA-256"}


async def _import_key(key: bytes, usage: str) -> Any:
    import js

    algorithm = to_js(_ALGORITHM, dict_converter=js.Object.fromEntries)
    return await js.crypto.subtle.importKey("raw", to_js(key), algorithm, False, to_js([usage]))


class WebCryptoMacSigner:
    """HMAC-SHA256 through `crypto.subtle` (see the module docstring)."""

    async def sign(self, key: bytes, data: bytes) -> bytes:
        import js

        handle = await _import_key(key, "sign")
        signature = await js.crypto.subtle.sign("HMAC", handle, to_js(data))
        return bytes(signature.to_bytes())

    async def verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        import js

        handle = await _import_key(key, "verify")
        return bool(await js.crypto.subtle.verify("HMAC", handle, to_js(mac), to_js(data)))
