"""WebCrypto and `cryptography`/PyJWT check each other's token signatures (issue 23): the
CPython half.

The in-Pyodide half (tests/pyodide/py/test_signatures.py) verifies the tokens of
`jwt_vectors.json` with `crypto.subtle` and through the whole `verify_jwt` (PyJWT in
Pyodide + the WebCrypto adapter), and returns HS256 tokens it signed with WebCrypto. Here:
every token of that file must be exactly what PyJWT with `cryptography` makes from the
file's test-only keys (RSASSA-PKCS1-v1_5 and HMAC are deterministic, so the file is their
output, not a hand-made one), and the tokens WebCrypto signed must verify under PyJWT and
under the local `cryptography` adapter through the same `verify_jwt`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bindings.ports.crypto import RsaPublicJwk
from local_runtime.adapters.signatures import CryptographySignatures
from tests.pyodide.conftest import PY_TESTS, PyodideRun
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt

VECTORS_FILE = PY_TESTS / "jwt_vectors.json"
OUTPUT_ID = "test_signatures.py::test_webcrypto_signs_hs256_tokens_for_pyjwt"
NOW = 1_760_000_000
ISSUER = "https://vectors.cloudflareaccess.invalid"
AUDIENCE = "vectors-aud"
KID = "vectors-key-1"
HS_SECRET = "vectors-hs256-secret-of-forty-characters!"
HS_OTHER_SECRET = "another-hs256-secret-nobody-configured-!!"
NOTE = (
    "Test-only keys and tokens for tests/pyodide (never used anywhere else); rebuilt and "
    "checked byte for byte by tests/pyodide/test_signature_interop.py::build_vectors."
)


def _private(pem: str) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "aud": [AUDIENCE],
        "email": "ada@example.com",
        "exp": NOW + 3600,
        "iat": NOW,
        "iss": ISSUER,
        "nbf": NOW,
        "sub": "ada",
    }
    claims.update(changes)
    return claims


def build_vectors(private_pem: str, impostor_pem: str) -> dict[str, Any]:
    """The vectors file for these two RSA keys: every token made by PyJWT + cryptography."""
    key, impostor = _private(private_pem), _private(impostor_pem)
    numbers = key.public_key().public_numbers()
    jwk = {
        "kid": KID,
        "n": jwt.utils.to_base64url_uint(numbers.n).decode(),
        "e": jwt.utils.to_base64url_uint(numbers.e).decode(),
    }

    def rs(claims: dict[str, Any], signer: rsa.RSAPrivateKey = key) -> str:
        return jwt.encode(claims, signer, algorithm="RS256", headers={"kid": KID})

    def hs(claims: dict[str, Any], secret: str = HS_SECRET) -> str:
        return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "k1"})

    return {
        "note": NOTE,
        "now": NOW,
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "rsa": {"private_key_pem": private_pem, "impostor_pem": impostor_pem, "jwk": jwk},
        "rs256": {
            "good": rs(_claims()),
            "expired": rs(_claims(exp=NOW - 3600)),
            "wrong_audience": rs(_claims(aud=["someone-elses-app"])),
            "string_exp": rs(_claims(exp=str(NOW + 3600))),
            "impostor": rs(_claims(), impostor),
        },
        "hs256": {
            "secret": HS_SECRET,
            "good": hs(_claims()),
            "other_secret": hs(_claims(), HS_OTHER_SECRET),
            "string_exp": hs(_claims(exp=str(NOW + 3600))),
        },
    }


def test_the_vectors_are_pyjwt_and_cryptography_output() -> None:
    stored = json.loads(VECTORS_FILE.read_text())
    rebuilt = build_vectors(stored["rsa"]["private_key_pem"], stored["rsa"]["impostor_pem"])
    assert stored == rebuilt
    public = _private(stored["rsa"]["private_key_pem"]).public_key()
    claims = jwt.decode(
        stored["rs256"]["good"],
        public,
        algorithms=["RS256"],
        audience=AUDIENCE,
        options={"verify_exp": False},  # PyJWT reads the wall clock; the file's now is NOW
    )
    assert claims["email"] == "ada@example.com"


async def _verify_locally(token: str, secret: str) -> dict[str, Any]:
    rules = JwtRules("HS256", ISSUER, AUDIENCE, leeway_seconds=30, max_chars=4096)

    async def key_for(kid: str) -> bytes | None:
        return secret.encode() if kid == "k1" else None

    return await verify_jwt(token, rules, key_for, CryptographySignatures(), NOW)


@pytest.mark.parametrize("test_id", [OUTPUT_ID])
async def test_pyjwt_and_cryptography_verify_webcrypto_tokens(
    test_id: str, pyodide_run: PyodideRun
) -> None:
    if pyodide_run.failure is not None:
        pytest.fail(pyodide_run.failure, pytrace=False)
    assert pyodide_run.results is not None
    real = pyodide_run.results[test_id]
    assert real["outcome"] == "passed", real["traceback"]
    assert real["data"]
    for made in real["data"]:
        token, secret = made["token"], made["secret"]
        decoded = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            audience=AUDIENCE,
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
        )
        assert decoded == made["claims"]
        assert await _verify_locally(token, secret) == made["claims"]
        with pytest.raises(JwtRefused) as refused:
            await _verify_locally(token, HS_OTHER_SECRET)
        assert refused.value.reason == "signature"


def test_the_vector_jwk_is_the_port_value_type() -> None:
    jwk = json.loads(VECTORS_FILE.read_text())["rsa"]["jwk"]
    key = RsaPublicJwk(n=jwk["n"], e=jwk["e"])
    assert key.exponent == 65537 and key.modulus.bit_length() == 2048


def write_vectors(path: Path = VECTORS_FILE) -> None:
    """Make a new vectors file with fresh keys (run by hand; the test checks the file)."""

    def pem() -> str:
        fresh = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return fresh.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    path.write_text(json.dumps(build_vectors(pem(), pem()), indent=2) + "\n")
