"""The WebCrypto `MacSigner` (memory tokens' HMAC-SHA256) in real Pyodide, against the JS
runtime's `crypto.subtle` (Node's WebCrypto standing in for workerd's: both implement the
W3C Web Crypto API), checked against RFC 4231 and Python's `hmac`."""

from __future__ import annotations

import hashlib
import hmac

from bindings.cloudflare.crypto import WebCryptoMacSigner

# RFC 4231 test case 2 and test case 6 (a key longer than the block size, hashed first).
RFC4231 = [
    (
        b"Jefe",
        b"what do ya want for nothing?",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    ),
    (
        b"\xaa" * 131,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    ),
]


async def test_sign_matches_rfc_4231_and_pythons_hmac() -> None:
    signer = WebCryptoMacSigner()
    for key, data, expected in RFC4231:
        assert (await signer.sign(key, data)).hex() == expected
    for key, data in [(b"k" * 32, b""), (b"\x00" * 40, bytes(range(256)) * 3)]:
        assert await signer.sign(key, data) == hmac.new(key, data, hashlib.sha256).digest()


async def test_verify_accepts_the_mac_and_refuses_any_change() -> None:
    signer = WebCryptoMacSigner()
    key, data = b"s" * 32, b"header.payload"
    mac = hmac.new(key, data, hashlib.sha256).digest()
    assert await signer.verify(key, data, mac) is True
    assert await signer.verify(key, data + b"x", mac) is False
    assert await signer.verify(b"t" * 32, data, mac) is False
    assert await signer.verify(key, data, mac[:-1] + bytes([mac[-1] ^ 1])) is False
    assert await signer.verify(key, data, mac[:16]) is False
    assert await signer.verify(key, data, b"") is False
