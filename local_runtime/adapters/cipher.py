"""`Cipher` on CPython: AES-256-GCM from `cryptography`, nonces from `os.urandom`; a failed
authentication becomes the port's `CipherError`."""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bindings.ports.crypto import KEY_BYTES, NONCE_BYTES, CipherError


class CryptographyCipher:
    async def new_key(self) -> bytes:
        return AESGCM.generate_key(bit_length=KEY_BYTES * 8)

    async def encrypt(self, key: bytes, plaintext: bytes, aad: bytes) -> tuple[bytes, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        return nonce, AESGCM(key).encrypt(nonce, plaintext, aad)

    async def decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        try:
            return AESGCM(key).decrypt(nonce, ciphertext, aad)
        except (InvalidTag, ValueError) as exc:
            raise CipherError("AES-GCM decryption failed") from exc
