"""The `Signatures` port's WebCrypto adapter and the one JWT verification path in real
Pyodide, against the JS runtime's `crypto.subtle` (Node's WebCrypto standing in for
workerd's: both implement the W3C Web Crypto API).

* HMAC-SHA256 (memory tokens) matches RFC 4231 and Python's `hmac`;
* RS256 (Access tokens) verifies what `cryptography` signed (jwt_vectors.json, checked to
  be PyJWT + `cryptography` output by tests/pyodide/test_signature_interop.py) and refuses
  any change;
* `worker.jwt_verification.verify_jwt` — PyJWT (pure Python, mounted from the venv) and
  the WebCrypto adapter — accepts the good tokens and refuses the bad ones with the reasons
  the CPython tests see;
* HS256 tokens WebCrypto signs here are returned for PyJWT and `cryptography` to verify on
  the pytest side.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any


def _import_pyjwt() -> None:
    """Import PyJWT as the Worker will. Its `jwt/__init__` imports `jwks_client`, which
    imports `ssl.SSLContext` (a type for an argument the Worker never passes). On Cloudflare
    `ssl` is real: workerd loads Pyodide's stdlib extras (`ssl`, `lzma`, `sqlite3`, ...) for
    every Python Worker (src/pyodide/internal/setupPackages.ts, STDLIB_PACKAGES), which is
    why ../shared/workerd-python ships placeholders for them. This harness has Pyodide's
    core stdlib only (the extras come from the CDN, never reached), so while PyJWT is
    imported an `ssl` holding only that name stands in, and is removed afterwards."""
    if importlib.util.find_spec("ssl") is not None:
        import jwt

        return
    stand_in = types.ModuleType("ssl")
    stand_in.SSLContext = type("SSLContext", (), {})  # type: ignore[attr-defined]
    sys.modules["ssl"] = stand_in
    try:
        import jwt  # noqa: F401
    finally:
        del sys.modules["ssl"]


_import_pyjwt()

import jwt.utils  # noqa: E402

from bindings.cloudflare.webcrypto import WebCryptoSignatures  # noqa: E402
from bindings.ports.crypto import RsaPublicJwk  # noqa: E402
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt  # noqa: E402

VECTORS = json.loads((Path(__file__).parent / "jwt_vectors.json").read_text())
JWK = VECTORS["rsa"]["jwk"]
KEY = RsaPublicJwk(n=JWK["n"], e=JWK["e"])
NOW = VECTORS["now"]

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


def _parts(token: str) -> tuple[bytes, bytes]:
    signing_input, _, signature = token.rpartition(".")
    return signing_input.encode("ascii"), jwt.utils.base64url_decode(signature)


async def test_hmac_sign_matches_rfc_4231_and_pythons_hmac() -> None:
    signatures = WebCryptoSignatures()
    for key, data, expected in RFC4231:
        assert (await signatures.hmac_sign(key, data)).hex() == expected
    for key, data in [(b"k" * 32, b""), (b"\x00" * 40, bytes(range(256)) * 3)]:
        assert await signatures.hmac_sign(key, data) == hmac.new(key, data, hashlib.sha256).digest()


async def test_hmac_verify_accepts_the_mac_and_refuses_any_change() -> None:
    signatures = WebCryptoSignatures()
    key, data = b"s" * 32, b"header.payload"
    mac = hmac.new(key, data, hashlib.sha256).digest()
    assert await signatures.hmac_verify(key, data, mac) is True
    assert await signatures.hmac_verify(key, data + b"x", mac) is False
    assert await signatures.hmac_verify(b"t" * 32, data, mac) is False
    assert await signatures.hmac_verify(key, data, mac[:-1] + bytes([mac[-1] ^ 1])) is False
    assert await signatures.hmac_verify(key, data, mac[:16]) is False
    assert await signatures.hmac_verify(key, data, b"") is False


async def test_rs256_verifies_cryptography_signatures_and_refuses_any_change() -> None:
    signatures = WebCryptoSignatures()
    data, signature = _parts(VECTORS["rs256"]["good"])
    assert await signatures.rs256_verify(KEY, data, signature) is True
    other_data, _ = _parts(VECTORS["rs256"]["expired"])
    assert await signatures.rs256_verify(KEY, other_data, signature) is False
    assert await signatures.rs256_verify(KEY, data + b"x", signature) is False
    flipped = signature[:-1] + bytes([signature[-1] ^ 1])
    assert await signatures.rs256_verify(KEY, data, flipped) is False
    assert await signatures.rs256_verify(KEY, data, signature[:-1]) is False
    assert await signatures.rs256_verify(KEY, data, b"") is False
    impostor_data, impostor_signature = _parts(VECTORS["rs256"]["impostor"])
    assert await signatures.rs256_verify(KEY, impostor_data, impostor_signature) is False
    # A key WebCrypto refuses to import verifies nothing, and raises nothing.
    tiny = RsaPublicJwk(n="AQAB", e="AQAB")
    assert await signatures.rs256_verify(tiny, data, signature) is False


async def _verify(token: str, algorithm: str) -> dict[str, Any]:
    rules = JwtRules(
        algorithm,  # type: ignore[arg-type]
        VECTORS["issuer"],
        VECTORS["audience"],
        leeway_seconds=30,
        max_chars=16_384,
    )
    secret = VECTORS["hs256"]["secret"].encode()

    async def key_for(kid: str) -> bytes | RsaPublicJwk | None:
        if algorithm == "RS256":
            return KEY if kid == JWK["kid"] else None
        return secret if kid == "k1" else None

    return await verify_jwt(token, rules, key_for, WebCryptoSignatures(), NOW)


async def _reason(token: str, algorithm: str) -> str:
    try:
        await _verify(token, algorithm)
    except JwtRefused as refused:
        return refused.reason
    raise AssertionError(f"accepted: {token[:40]}...")


async def test_verify_jwt_with_pyjwt_and_webcrypto_accepts_good_tokens_only() -> None:
    claims = await _verify(VECTORS["rs256"]["good"], "RS256")
    assert claims["email"] == "ada@example.com" and claims["exp"] == NOW + 3600
    hs_claims = await _verify(VECTORS["hs256"]["good"], "HS256")
    assert hs_claims["sub"] == "ada"
    good = VECTORS["rs256"]["good"]
    header, payload, signature = good.split(".")
    _, other_payload, _ = VECTORS["rs256"]["expired"].split(".")
    refused = {
        "payload swapped": (f"{header}.{other_payload}.{signature}", "RS256"),
        "impostor key": (VECTORS["rs256"]["impostor"], "RS256"),
        "expired": (VECTORS["rs256"]["expired"], "RS256"),
        "wrong audience": (VECTORS["rs256"]["wrong_audience"], "RS256"),
        "string exp": (VECTORS["rs256"]["string_exp"], "RS256"),
        "HS256 where RS256 is expected": (VECTORS["hs256"]["good"], "RS256"),
        "other secret": (VECTORS["hs256"]["other_secret"], "HS256"),
        "string exp (HS256)": (VECTORS["hs256"]["string_exp"], "HS256"),
        "non-ASCII payload": (f"{header}.é{payload}.{signature}", "RS256"),
        "two segments": (f"{header}.{payload}", "RS256"),
    }
    reasons = {name: await _reason(token, alg) for name, (token, alg) in refused.items()}
    assert reasons == {
        "payload swapped": "signature",
        "impostor key": "signature",
        "expired": "expired",
        "wrong audience": "audience",
        "string exp": "claims",
        "HS256 where RS256 is expected": "algorithm",
        "other secret": "signature",
        "string exp (HS256)": "claims",
        "non-ASCII payload": "malformed",
        "two segments": "malformed",
    }


async def test_webcrypto_signs_hs256_tokens_for_pyjwt() -> list[dict[str, Any]]:
    """Tokens framed with PyJWT's base64url and signed by WebCrypto's HMAC, as the Worker
    mints memory tokens; pytest verifies them with PyJWT and `cryptography`."""
    signatures = WebCryptoSignatures()
    made = []
    for index, secret in enumerate(["a-memory-token-secret-of-32-chars!!", "ü" * 40]):
        claims = {
            "iss": VECTORS["issuer"],
            "aud": VECTORS["audience"],
            "exp": NOW + 600,
            "iat": NOW,
            "jti": f"token-{index}",
        }
        segments = [
            jwt.utils.base64url_encode(json.dumps(part, separators=(",", ":")).encode()).decode()
            for part in ({"alg": "HS256", "typ": "JWT", "kid": "k1"}, claims)
        ]
        signing_input = ".".join(segments)
        mac = await signatures.hmac_sign(secret.encode(), signing_input.encode())
        token = f"{signing_input}.{jwt.utils.base64url_encode(mac).decode()}"
        assert await _verify_hs(token, secret) == claims
        made.append({"token": token, "secret": secret, "claims": claims})
    return made


async def _verify_hs(token: str, secret: str) -> dict[str, Any]:
    rules = JwtRules("HS256", VECTORS["issuer"], VECTORS["audience"], 30, 4096)

    async def key_for(kid: str) -> bytes | None:
        return secret.encode()

    return await verify_jwt(token, rules, key_for, WebCryptoSignatures(), NOW)
