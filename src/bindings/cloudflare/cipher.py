"""`Cipher` on Cloudflare: AES-256-GCM by the platform's WebCrypto (`crypto.subtle`).

Keys are imported per call as non-extractable raw AES-GCM keys with only the usage the call
needs; nonces and new keys come from `crypto.getRandomValues` (WebCrypto's CSPRNG). The tag
is 128 bits and WebCrypto appends it to the ciphertext, the layout `cryptography`'s AESGCM
uses too, so each reads the other's output (tests/pyodide/py/test_cipher.py). A failed
`decrypt` rejects with an `OperationError`, raised here as the port's `CipherError`. `js` is
imported when called, so this module loads where the runtime has no `crypto` global.
"""

from __future__ import annotations

from typing import Any

from pyodide.ffi import JsException, to_js

from bindings.ports.cipher import KEY_BYTES, NONCE_BYTES, TAG_BYTES, CipherError


async def _import_key(key: bytes, usage: str) -> Any:
    import js

    return await js.crypto.subtle.importKey("raw", to_js(key), "AES-GCM", False, to_js([usage]))


def _params(nonce: bytes, aad: bytes) -> Any:
    import js

    params = {
        "name": "AES-GCM",
        "iv": to_js(nonce),
        "additionalData": to_js(aad),
        "tagLength": TAG_BYTES * 8,
    }
    return to_js(params, dict_converter=js.Object.fromEntries)


def _random(size: int) -> bytes:
    import js

    buffer = js.Uint8Array.new(size)
    js.crypto.getRandomValues(buffer)
    return bytes(buffer.to_bytes())


class WebCryptoCipher:
    """AES-256-GCM through `crypto.subtle` (see the module docstring)."""

    async def new_key(self) -> bytes:
        return _random(KEY_BYTES)

    async def encrypt(self, key: bytes, plaintext: bytes, aad: bytes) -> tuple[bytes, bytes]:
        import js

        nonce = _random(NONCE_BYTES)
        handle = await _import_key(key, "encrypt")
        sealed = await js.crypto.subtle.encrypt(_params(nonce, aad), handle, to_js(plaintext))
        return nonce, bytes(sealed.to_bytes())

    async def decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        import js

        try:
            handle = await _import_key(key, "decrypt")
            plain = await js.crypto.subtle.decrypt(_params(nonce, aad), handle, to_js(ciphertext))
        except JsException as exc:
            raise CipherError("AES-GCM decryption failed") from exc
        return bytes(plain.to_bytes())
