"""`Signatures` on CPython: HMAC-SHA256 and RS256 (PKCS1v15) from `cryptography`; a failed
check or a key `cryptography` refuses is False, as the port says."""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from bindings.ports.crypto import RsaPublicJwk


class CryptographySignatures:
    async def hmac_sign(self, key: bytes, data: bytes) -> bytes:
        mac = hmac.HMAC(key, hashes.SHA256())
        mac.update(data)
        return mac.finalize()

    async def hmac_verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        check = hmac.HMAC(key, hashes.SHA256())
        check.update(data)
        try:
            check.verify(mac)
        except InvalidSignature:
            return False
        return True

    async def rs256_verify(self, key: RsaPublicJwk, data: bytes, signature: bytes) -> bool:
        try:
            public = rsa.RSAPublicNumbers(e=key.exponent, n=key.modulus).public_key()
            public.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            return False
        return True
