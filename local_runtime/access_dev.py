"""A local stand-in for a Cloudflare Access team: a dev key pair, its JWKS, and tokens.

The local runtime's `ACCESS_TEAM_DOMAIN` is `DEV_TEAM_DOMAIN`, whose certs URL
`DevAccessTransport` answers with the public half of `<state>/access/dev_private_key.pem`
(also written as `jwks.json`); `mint_token` signs with the private half, so `worker.identity`
verifies local tokens with the code that verifies Cloudflare's. The `.invalid` domain never
resolves. The key is created atomically on first use, by the CLI or the runtime alike.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import jwt.utils
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

DEV_TEAM_DOMAIN = "agent-memory-dev.cloudflareaccess.invalid"
DEV_AUD = "agent-memory-local-dev"
PRIVATE_KEY_FILE = "dev_private_key.pem"
JWKS_FILE = "jwks.json"
DEFAULT_TOKEN_TTL = 8 * 3600


def _int_b64url(value: int) -> str:
    return jwt.utils.to_base64url_uint(value).decode("ascii")


def _write_once(path: Path, data: bytes, mode: int) -> bool:
    """Create `path` with `data` atomically unless it exists; True when this call created it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        try:
            os.link(tmp, path)  # fails if another process created it first
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


class DevAccessKeys:
    """The dev signing key of one state folder."""

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        self._key = private_key
        numbers = private_key.public_key().public_numbers()
        self.n, self.e = numbers.n, numbers.e
        self.kid = hashlib.sha256(_int_b64url(self.n).encode()).hexdigest()[:32]

    @classmethod
    def load_or_create(cls, access_dir: Path) -> DevAccessKeys:
        access_dir.mkdir(parents=True, exist_ok=True)
        key_path = access_dir / PRIVATE_KEY_FILE
        if not key_path.exists():
            fresh = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = fresh.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            _write_once(key_path, pem, 0o600)
        loaded = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(loaded, rsa.RSAPrivateKey):
            raise ValueError(f"{key_path} is not an RSA private key")
        keys = cls(loaded)
        jwks_path = access_dir / JWKS_FILE
        document = json.dumps(keys.jwks(), indent=2).encode()
        if not jwks_path.exists() or jwks_path.read_bytes() != document:
            tmp = jwks_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(document)
            tmp.replace(jwks_path)
        return keys

    def jwks(self) -> dict[str, Any]:
        """The public key in Cloudflare's certs format (`keys` list)."""
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "kid": self.kid,
                    "alg": "RS256",
                    "use": "sig",
                    "n": _int_b64url(self.n),
                    "e": _int_b64url(self.e),
                }
            ]
        }

    def sign(self, claims: dict[str, Any], *, kid: str | None = None) -> str:
        """An RS256 JWT over `claims`, signed by PyJWT with `cryptography` (no claim is
        added or checked here)."""
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": kid or self.kid})


def access_claims(
    email: str,
    *,
    now: float,
    ttl: int = DEFAULT_TOKEN_TTL,
    team_domain: str = DEV_TEAM_DOMAIN,
    aud: str = DEV_AUD,
) -> dict[str, Any]:
    """Claims shaped like an Access application token for a user."""
    issued = int(now)
    return {
        "aud": [aud],
        "email": email,
        "exp": issued + ttl,
        "iat": issued,
        "nbf": issued,
        "iss": f"https://{team_domain}",
        "type": "app",
        "identity_nonce": uuid.uuid4().hex,
        "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, f"mailto:{email}")),
        "country": "XX",
    }


def mint_token(access_dir: Path, email: str, *, now: float, ttl: int = DEFAULT_TOKEN_TTL) -> str:
    """A token the local runtime using this state folder accepts (for `ttl` seconds)."""
    keys = DevAccessKeys.load_or_create(access_dir)
    return keys.sign(access_claims(email, now=now, ttl=ttl))


class DevAccessTransport(httpx.AsyncBaseTransport):
    """Serves the dev JWKS for `DEV_TEAM_DOMAIN` (read per request: a key created after the
    server started is found on the verifier's unknown-kid refetch); the rest goes to `fallback`."""

    def __init__(self, access_dir: Path, fallback: httpx.AsyncBaseTransport | None = None) -> None:
        self.access_dir = access_dir
        self._fallback = fallback
        self.jwks_requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == DEV_TEAM_DOMAIN:
            if request.method == "GET" and request.url.path == "/cdn-cgi/access/certs":
                self.jwks_requests += 1
                keys = DevAccessKeys.load_or_create(self.access_dir)
                return httpx.Response(200, json=keys.jwks(), request=request)
            return httpx.Response(404, json={"error": "not found"}, request=request)
        if self._fallback is None:
            self._fallback = httpx.AsyncHTTPTransport()
        return await self._fallback.handle_async_request(request)

    async def aclose(self) -> None:
        # Every `httpx.AsyncClient` closes its transport on exit, and the Worker makes a
        # fresh client per use (as it must on Workers); this transport outlives them all,
        # so the runtime closes it with `close()` at shutdown instead.
        return None

    async def close(self) -> None:
        if self._fallback is not None:
            await self._fallback.aclose()
            self._fallback = None
