"""The one path that verifies a JWT the Worker accepts (`worker.identity`: Access RS256, memory
tokens HS256); no pydantic, so it runs in bare Pyodide. `verify_jwt` returns the claims or raises
`JwtRefused` with a stable `reason`: shape (a malformed token is a 401/403, never a 500); PyJWT's
parse with `iss`, `aud` and required claims (its signature and time checks off); header (`alg`
exactly the rule's, a `kid`, no `crit`); key; signature through the `Signatures` port; times
against the Clock port, `exp` required and a JSON number, all with leeway.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from bindings.ports.crypto import RsaPublicJwk, Signatures

Algorithm = Literal["HS256", "RS256"]
# An HS256 secret, or an RS256 public key.
VerificationKey = bytes | RsaPublicJwk
KeyLookup = Callable[[str], Awaitable[VerificationKey | None]]
_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")

Reason = Literal[
    "malformed", "algorithm", "unknown_key", "signature", "issuer", "audience", "claims",
    "expired", "not_yet_valid",
]  # fmt: skip


class JwtRefused(Exception):
    """The token is not accepted; `reason` says which step refused it."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class JwtRules:
    """What one kind of token must satisfy."""

    algorithm: Algorithm
    issuer: str
    audience: str
    leeway_seconds: float
    max_chars: int
    # Claims that must be present (`exp` always is, step 6).
    required: tuple[str, ...] = ("exp",)


def _check_shape(token: str, max_chars: int) -> None:
    if len(token) > max_chars:
        raise JwtRefused("malformed", "token is too long")
    if not _SHAPE.fullmatch(token) or any(len(part) % 4 == 1 for part in token.split(".")):
        raise JwtRefused("malformed", "token is not a JWT (expected header.payload.signature)")


def _parse(token: str, rules: JwtRules) -> dict[str, Any]:
    # Imported when first used: PyJWT (with urllib) is not needed to start the Worker.
    import jwt

    try:
        decoded: dict[str, Any] = jwt.decode_complete(
            token,
            algorithms=[rules.algorithm],
            # The signature is the Signatures port's; PyJWT's times use the wall clock, so
            # `_check_times` checks them against the Clock port. With the signature off,
            # PyJWT skips aud/iss/sub/jti unless told: each is named.
            options={
                "verify_signature": False,
                "verify_aud": True,
                "verify_iss": True,
                "verify_sub": True,
                "verify_jti": True,
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "require": sorted({"exp", "iss", "aud", *rules.required}),
            },
            audience=rules.audience,
            issuer=rules.issuer,
        )
    except jwt.MissingRequiredClaimError as exc:
        if exc.claim in ("aud", "iss"):
            reason: Reason = "audience" if exc.claim == "aud" else "issuer"
            raise JwtRefused(reason, _MESSAGES[reason]) from None
        raise JwtRefused("claims", f"token has no {exc.claim!r} claim") from None
    except jwt.InvalidAudienceError:
        raise JwtRefused("audience", _MESSAGES["audience"]) from None
    except jwt.InvalidIssuerError:
        raise JwtRefused("issuer", _MESSAGES["issuer"]) from None
    except jwt.PyJWTError:
        raise JwtRefused("malformed", "token is not a well-formed JWT") from None
    return decoded


_MESSAGES: dict[Reason, str] = {
    "issuer": "token was issued by another issuer",
    "audience": "token is for another audience (aud mismatch)",
    "unknown_key": "token is signed with an unknown key",
    "signature": "token signature does not verify",
}


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_times(claims: dict[str, Any], now: float, leeway: float) -> None:
    exp = claims.get("exp")
    if not _number(exp):
        raise JwtRefused("claims", "token has no numeric 'exp' claim")
    if now > exp + leeway:
        raise JwtRefused("expired", "token has expired")
    for name in ("nbf", "iat"):
        value = claims.get(name, 0)
        if not _number(value):
            raise JwtRefused("claims", f"token {name!r} claim is not a number")
        if now + leeway < value:
            raise JwtRefused("not_yet_valid", "token is not valid yet")


async def _signature_verifies(
    signatures: Signatures, algorithm: Algorithm, key: VerificationKey, token: str, sig: bytes
) -> bool:
    signing_input = token.rsplit(".", 1)[0].encode("ascii")  # ASCII: step 1
    if algorithm == "HS256" and isinstance(key, bytes):
        return await signatures.hmac_verify(key, signing_input, sig)
    if algorithm == "RS256" and isinstance(key, RsaPublicJwk):
        return await signatures.rs256_verify(key, signing_input, sig)
    raise TypeError(f"a {type(key).__name__} key cannot verify {algorithm}")


async def verify_jwt(
    token: str, rules: JwtRules, key_for: KeyLookup, signatures: Signatures, now: float
) -> dict[str, Any]:
    """The claims of `token` when it passes every step (module docstring); else `JwtRefused`.
    Errors of `key_for` (a JWKS outage, say) propagate unchanged."""
    _check_shape(token, rules.max_chars)
    decoded = _parse(token, rules)
    header: dict[str, Any] = decoded["header"]
    if header.get("alg") != rules.algorithm:
        raise JwtRefused("algorithm", f"token algorithm must be {rules.algorithm}")
    if "crit" in header:
        raise JwtRefused("malformed", "token header names critical extensions")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise JwtRefused("unknown_key", "token header has no 'kid'")
    key = await key_for(kid)
    if key is None:
        raise JwtRefused("unknown_key", _MESSAGES["unknown_key"])
    if not await _signature_verifies(signatures, rules.algorithm, key, token, decoded["signature"]):
        raise JwtRefused("signature", _MESSAGES["signature"])
    claims: dict[str, Any] = decoded["payload"]
    _check_times(claims, now, rules.leeway_seconds)
    return claims
