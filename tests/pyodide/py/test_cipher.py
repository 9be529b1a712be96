"""The WebCrypto `Cipher` (AES-256-GCM for personal data) in real Pyodide, against the JS
runtime's `crypto.subtle` (Node's WebCrypto standing in for workerd's: both implement the
W3C Web Crypto API). It must read what the `cryptography` package wrote
(aes_gcm_vectors.json, checked to be `cryptography`'s output by
tests/pyodide/test_cipher_interop.py) and write what `cryptography` reads (the data returned
by `test_webcrypto_output_for_cryptography`, decrypted there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bindings.cloudflare.webcrypto import WebCryptoCipher
from bindings.ports.crypto import KEY_BYTES, NONCE_BYTES, TAG_BYTES, CipherError

VECTORS = json.loads((Path(__file__).parent / "aes_gcm_vectors.json").read_text())["vectors"]


async def _refused(cipher: WebCryptoCipher, *args: bytes) -> bool:
    try:
        await cipher.decrypt(*args)
    except CipherError:
        return True
    return False


async def test_webcrypto_decrypts_cryptography_output() -> None:
    cipher = WebCryptoCipher()
    for vector in VECTORS:
        key, nonce, aad, ct = (
            bytes.fromhex(vector[name]) for name in ("key", "nonce", "aad", "ciphertext")
        )
        assert await cipher.decrypt(key, nonce, ct, aad) == bytes.fromhex(vector["plaintext"])
        flipped = ct[:-1] + bytes([ct[-1] ^ 1])
        assert await _refused(cipher, key, nonce, flipped, aad)
        assert await _refused(cipher, key, nonce, ct, aad + b"x")
        assert await _refused(cipher, bytes(KEY_BYTES), nonce, ct, aad)


async def test_webcrypto_output_for_cryptography() -> list[dict[str, Any]]:
    cipher = WebCryptoCipher()
    out = []
    for plaintext, aad in [(b"", b""), ("ada@example.com ✓".encode(), b"tenant\x00subject")]:
        key = await cipher.new_key()
        nonce, ct = await cipher.encrypt(key, plaintext, aad)
        assert len(key) == KEY_BYTES and len(nonce) == NONCE_BYTES
        assert len(ct) == len(plaintext) + TAG_BYTES
        assert await cipher.decrypt(key, nonce, ct, aad) == plaintext
        again_nonce, _ = await cipher.encrypt(key, plaintext, aad)
        assert again_nonce != nonce  # a fresh nonce per encryption
        out.append(
            {
                "key": key.hex(),
                "nonce": nonce.hex(),
                "aad": aad.hex(),
                "plaintext": plaintext.hex(),
                "ciphertext": ct.hex(),
            }
        )
    return out
