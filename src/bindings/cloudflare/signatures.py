"""`Signatures` by WebCrypto (`crypto.subtle`): keys imported per call, non-extractable, for
one usage; `verify` is WebCrypto's (constant time for HMAC). A key WebCrypto refuses verifies
nothing (False)."""

from __future__ import annotations

from typing import Any

from pyodide.ffi import JsException, to_js

from bindings.cloudflare.cipher import js_object as _object
from bindings.cloudflare.cipher import subtle as _subtle
from bindings.ports.crypto import RsaPublicJwk

_HMAC = {"name": "HMAC", "hash": "SHA-256"}
_RSASSA = {"name": "RSASSA-PKCS1-v1_5", "hash": "SHA-256"}


async def _hmac_key(key: bytes, usage: str) -> Any:
    return await _subtle().importKey("raw", to_js(key), _object(_HMAC), False, to_js([usage]))


class WebCryptoSignatures:
    async def hmac_sign(self, key: bytes, data: bytes) -> bytes:
        handle = await _hmac_key(key, "sign")
        signature = await _subtle().sign("HMAC", handle, to_js(data))
        return bytes(signature.to_bytes())

    async def hmac_verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        handle = await _hmac_key(key, "verify")
        return bool(await _subtle().verify("HMAC", handle, to_js(mac), to_js(data)))

    async def rs256_verify(self, key: RsaPublicJwk, data: bytes, signature: bytes) -> bool:
        jwk = _object({"kty": "RSA", "n": key.n, "e": key.e, "alg": "RS256", "ext": True})
        try:
            handle = await _subtle().importKey(
                "jwk", jwk, _object(_RSASSA), False, to_js(["verify"])
            )
            verified = await _subtle().verify(
                _RSASSA["name"], handle, to_js(signature), to_js(data)
            )
        except JsException:
            return False
        return bool(verified)
