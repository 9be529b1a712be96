"""The one JWT verification path (`worker.jwt_verification`) and the `cryptography` adapter
of the `Signatures` port: no input gets past it unsigned, no input makes it crash.

The same path runs in real Pyodide over WebCrypto (tests/pyodide/py/test_signatures.py).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from bindings.ports.crypto import RsaPublicJwk, base64url_bytes
from local_runtime.adapters.signatures import CryptographySignatures
from worker.jwt_verification import JwtRefused, JwtRules, verify_jwt

NOW = 1_760_000_000
SECRET = "a-memory-token-secret-of-32-chars!!"
HS_RULES = JwtRules("HS256", "agent-memory", "agent-memory-api", 30, 4096, ("exp", "iat"))
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key: rsa.RSAPrivateKey) -> RsaPublicJwk:
    numbers = key.public_key().public_numbers()
    return RsaPublicJwk(
        n=jwt.utils.to_base64url_uint(numbers.n).decode(),
        e=jwt.utils.to_base64url_uint(numbers.e).decode(),
    )


def _claims(**changes: Any) -> dict[str, Any]:
    claims = {"iss": "agent-memory", "aud": "agent-memory-api", "iat": NOW, "exp": NOW + 60}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _hs(claims: dict[str, Any], **headers: Any) -> str:
    return jwt.encode(claims, SECRET, algorithm="HS256", headers={"kid": "k1", **headers})


@dataclass
class RecordingSignatures:
    """The `cryptography` adapter, counting every check it is asked for."""

    inner: CryptographySignatures = field(default_factory=CryptographySignatures)
    checks: list[bytes] = field(default_factory=list)
    answer: bool | None = None  # force an answer instead of asking `inner`

    async def hmac_sign(self, key: bytes, data: bytes) -> bytes:
        return await self.inner.hmac_sign(key, data)

    async def hmac_verify(self, key: bytes, data: bytes, mac: bytes) -> bool:
        self.checks.append(data)
        verdict = await self.inner.hmac_verify(key, data, mac)
        return verdict if self.answer is None else self.answer

    async def rs256_verify(self, key: RsaPublicJwk, data: bytes, signature: bytes) -> bool:
        self.checks.append(data)
        verdict = await self.inner.rs256_verify(key, data, signature)
        return verdict if self.answer is None else self.answer


async def _hs_key(kid: str) -> bytes | None:
    return SECRET.encode() if kid == "k1" else None


async def verify_hs(token: str, signatures: Any = None) -> dict[str, Any]:
    return await verify_jwt(
        token, HS_RULES, _hs_key, signatures or CryptographySignatures(), float(NOW)
    )


async def reason(token: str) -> str:
    with pytest.raises(JwtRefused) as refused:
        await verify_hs(token)
    return refused.value.reason


async def test_a_good_token_is_returned_only_after_its_signature_was_checked() -> None:
    signatures = RecordingSignatures()
    token = _hs(_claims(jti="x"))
    assert (await verify_hs(token, signatures))["jti"] == "x"
    assert signatures.checks == [token.rsplit(".", 1)[0].encode()]
    # The same token, but a verifier that says no: nothing else stands in for it.
    with pytest.raises(JwtRefused) as refused:
        await verify_hs(token, RecordingSignatures(answer=False))
    assert refused.value.reason == "signature"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (_hs(_claims(exp="1760000060")), "claims"),  # PyJWT's int() would take it
        (_hs(_claims(exp=True)), "claims"),
        (_hs(_claims(exp=None)), "claims"),
        (_hs(_claims(nbf="0")), "claims"),
        (_hs(_claims(iat=[1])), "claims"),
        (_hs(_claims(exp=NOW - 31)), "expired"),
        (_hs(_claims(exp=NOW - 29)), None),  # within the leeway
        (_hs(_claims(nbf=NOW + 31)), "not_yet_valid"),
        (_hs(_claims(iat=NOW + 31)), "not_yet_valid"),
        (_hs(_claims(aud="other")), "audience"),
        (_hs(_claims(aud=None)), "audience"),
        (_hs(_claims(iss="other")), "issuer"),
        (_hs(_claims(iss=None)), "issuer"),
        (_hs(_claims(iat=None)), "claims"),  # required by these rules
        (_hs(_claims(sub=5)), "malformed"),
        (_hs(_claims(), kid="k9"), "unknown_key"),
        (_hs(_claims(), crit=["exp"]), "malformed"),
        (jwt.encode(_claims(), SECRET * 2, algorithm="HS384", headers={"kid": "k1"}), "algorithm"),
        (jwt.encode(_claims(), None, algorithm="none"), "malformed"),  # empty signature
        (jwt.encode(_claims(), RSA_KEY, algorithm="RS256", headers={"kid": "k1"}), "algorithm"),
    ],
)
async def test_claims_and_headers_are_checked(token: str, expected: str | None) -> None:
    if expected is None:
        await verify_hs(token)
    else:
        assert await reason(token) == expected


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d",
        "a..c",
        "é.b.c",
        "a.b.c ",
        "a.b=.c",
        "aaaaa.b.c",  # a base64url length that cannot be
        "W10.e30.c2ln",  # header `[]`
        "e30.W10.c2ln",  # payload `[]`
        "bm90IGpzb24.e30.c2ln",  # header not JSON
        "_w.e30.c2ln",  # header not UTF-8
        "e30." + "W" * 4000 + ".c2ln",  # too long
    ],
)
async def test_malformed_tokens_are_refused_before_anything_else(token: str) -> None:
    signatures = RecordingSignatures()
    with pytest.raises(JwtRefused) as refused:
        await verify_hs(token, signatures)
    assert refused.value.reason in {"malformed", "algorithm", "unknown_key"}
    assert signatures.checks == []


@settings(max_examples=300, deadline=None)
@given(token=st.one_of(st.text(max_size=300), st.from_regex(r"[A-Za-z0-9_\-.é=]{0,200}")))
async def test_no_input_crashes_the_verifier(token: str) -> None:
    with pytest.raises(JwtRefused):
        await verify_hs(token)


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(min_value=0, max_value=400), char=st.sampled_from("AQ_-x.é"))
async def test_no_single_change_to_a_good_token_is_accepted(cut: int, char: str) -> None:
    token = _hs(_claims())
    index = cut % len(token)
    changed = token[:index] + char + token[index + 1 :]
    if changed == token:
        return
    try:
        claims = await verify_hs(changed)
    except JwtRefused:
        return
    # base64url's last character carries spare bits: a change there may decode the same.
    assert claims == _claims() and jwt.utils.base64url_decode(
        changed.rsplit(".", 1)[1]
    ) == jwt.utils.base64url_decode(token.rsplit(".", 1)[1])


async def test_rs256_tokens_verify_under_the_jwk_and_no_other() -> None:
    rules = JwtRules("RS256", "agent-memory", "agent-memory-api", 30, 16_384)
    jwk = _jwk(RSA_KEY)
    other = _jwk(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    token = jwt.encode(_claims(), RSA_KEY, algorithm="RS256", headers={"kid": "rsa"})

    async def key_for(kid: str) -> RsaPublicJwk | None:
        return {"rsa": jwk, "other": other}.get(kid)

    assert await verify_jwt(token, rules, key_for, CryptographySignatures(), NOW) == _claims()
    impostor = jwt.encode(_claims(), RSA_KEY, algorithm="RS256", headers={"kid": "other"})
    with pytest.raises(JwtRefused) as refused:
        await verify_jwt(impostor, rules, key_for, CryptographySignatures(), NOW)
    assert refused.value.reason == "signature"
    # An HS256 token whose secret is the public key's text (algorithm confusion).
    confused = jwt.encode(_claims(), jwk.n, algorithm="HS256", headers={"kid": "rsa"})
    with pytest.raises(JwtRefused) as refused:
        await verify_jwt(confused, rules, key_for, CryptographySignatures(), NOW)
    assert refused.value.reason == "algorithm"


# --- the `cryptography` adapter ----------------------------------------------------------


async def test_cryptography_hmac_matches_rfc_4231_and_refuses_changes() -> None:
    signatures = CryptographySignatures()
    key, data = b"Jefe", b"what do ya want for nothing?"
    mac = await signatures.hmac_sign(key, data)
    assert mac.hex() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert mac == hmac.new(key, data, hashlib.sha256).digest()
    assert await signatures.hmac_verify(key, data, mac)
    for bad in (mac[:-1], mac[:-1] + bytes([mac[-1] ^ 1]), b""):
        assert not await signatures.hmac_verify(key, data, bad)
    assert not await signatures.hmac_verify(key + b"x", data, mac)


async def test_cryptography_rs256_refuses_changes_and_unusable_keys() -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    signatures = CryptographySignatures()
    data = b"header.payload"
    signature = RSA_KEY.sign(data, padding.PKCS1v15(), hashes.SHA256())
    jwk = _jwk(RSA_KEY)
    assert await signatures.rs256_verify(jwk, data, signature)
    assert not await signatures.rs256_verify(jwk, data + b"!", signature)
    assert not await signatures.rs256_verify(jwk, data, signature[:-1])
    assert not await signatures.rs256_verify(jwk, data, b"")
    # PSS is another scheme: RS256 is PKCS#1 v1.5 only.
    pss = RSA_KEY.sign(
        data, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.MAX_LENGTH), hashes.SHA256()
    )
    assert not await signatures.rs256_verify(jwk, data, pss)
    assert not await signatures.rs256_verify(RsaPublicJwk(n="AQAB", e="AQAB"), data, signature)


@pytest.mark.parametrize("value", ["", "AA=", "A", "a b", "é", "AAAA"])
def test_jwk_numbers_must_be_positive_base64url(value: str) -> None:
    with pytest.raises(ValueError):
        RsaPublicJwk(n=value, e="AQAB")


def test_base64url_bytes_refuses_what_the_standard_decoder_would_skip() -> None:
    assert base64url_bytes("AQAB") == b"\x01\x00\x01"
    for bad in ("AQ AB", "AQAB=", "AQ+B", "AQ/B", "A"):
        with pytest.raises(ValueError):
            base64url_bytes(bad)
