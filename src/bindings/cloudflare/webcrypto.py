"""The crypto ports by WebCrypto (`crypto.subtle`), keys imported per call (non-extractable,
one usage). `Cipher`: AES-256-GCM, nonces and keys from `crypto.getRandomValues`, the tag
appended as `cryptography` does; a failed decrypt is a `CipherError`. `Signatures`: `verify`
is WebCrypto's (constant time for HMAC); a key WebCrypto refuses verifies nothing (False).
`js` is imported when called: this loads under the CPython fakes.
"""

from __future__ import annotations

from typing import Any

from pyodide.ffi import JsException, to_js

from bindings.ports.crypto import KEY_BYTES, NONCE_BYTES, TAG_BYTES, CipherError, RsaPublicJwk


def _js() -> Any:
    import js  # when called: the module loads where the runtime has no `crypto` global

    return js


def subtle() -> Any:
    return _js().crypto.subtle


def js_object(value: dict[str, Any]) -> Any:
    """A JS Object (not a Map) from a dict."""
    return to_js(value, dict_converter=_js().Object.fromEntries)


async def _import_key(key: bytes, usage: str) -> Any:
    return await subtle().importKey("raw", to_js(key), "AES-GCM", False, to_js([usage]))


def _params(nonce: bytes, aad: bytes) -> Any:
    tag_bits = TAG_BYTES * 8
    return js_object(
        {"name": "AES-GCM", "iv": to_js(nonce), "additionalData": to_js(aad), "tagLength": tag_bits}
    )


def _random(size: int) -> bytes:
    buffer = _js().Uint8Array.new(size)
    _js().crypto.getRandomValues(buffer)
    return bytes(buffer.to_bytes())


class WebCryptoCipher:
    async def new_key(self) -> bytes:
        return _random(KEY_BYTES)

    async def encrypt(self, key: bytes, plaintext: bytes, aad: bytes) -> tuple[bytes, bytes]:
        nonce = _random(NONCE_BYTES)
        handle = await _import_key(key, "encrypt")
        sealed = await subtle().encrypt(_params(nonce, aad), handle, to_js(plaintext))
        return nonce, bytes(sealed.to_bytes())

    async def decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        try:
            handle = await _import_key(key, "decrypt")
            plain = await subtle().decrypt(_params(nonce, aad), handle, to_js(ciphertext))
        except JsException as exc:
            raise CipherError("AES-GCM decryption failed") from exc
        return bytes(plain.to_bytes())


_HMAC = {"name": "HMAC", "hash": "SHA-256"}
_RSASSA = {"name": "RSASSA-PKCS1-v1_5", "hash": "SHA-256"}


async def _hmac_key(key: bytes, usage: str) -> Any:
    return await subtle().importKey("raw", to_js(key), js_object(_HMAC), False, to_js([usage]))


class WebCryptoSignatures:
    async def hmac_sign(self, key: bytes, data: bytes) -> bytes:
        handle = await _hmac_key(key, "sign")
        signature = await subtle().sign("HMAC", handle, to_js(data))
        return bytes(signature.to_bytes())

    async def hmac_verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        handle = await _hmac_key(key, "verify")
        return bool(await subtle().verify("HMAC", handle, to_js(mac), to_js(data)))

    async def rs256_verify(self, key: RsaPublicJwk, data: bytes, signature: bytes) -> bool:
        jwk = js_object({"kty": "RSA", "n": key.n, "e": key.e, "alg": "RS256", "ext": True})
        try:
            handle = await subtle().importKey(
                "jwk", jwk, js_object(_RSASSA), False, to_js(["verify"])
            )
            verified = await subtle().verify(_RSASSA["name"], handle, to_js(signature), to_js(data))
        except JsException:
            return False
        return bool(verified)
