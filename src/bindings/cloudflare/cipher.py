"""`Cipher` by WebCrypto: AES-256-GCM, keys imported per call (non-extractable, one usage),
nonces and keys from `crypto.getRandomValues`, the tag appended as `cryptography` does. A failed
decrypt is a `CipherError`. `js` is imported when called: this loads under the CPython fakes.
"""

from __future__ import annotations

from typing import Any

from pyodide.ffi import JsException, to_js

from bindings.ports.crypto import KEY_BYTES, NONCE_BYTES, TAG_BYTES, CipherError


def _js() -> Any:
    import js  # when called: the module loads where the runtime has no `crypto` global

    return js


def subtle() -> Any:
    """`crypto.subtle` (also for `signatures`)."""
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
