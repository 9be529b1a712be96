"""Cloudflare Access gate: real RS256 verification against a JWKS served over httpx (PyJWT
parses, the `Signatures` port's `cryptography` adapter checks the signature)."""

from __future__ import annotations

import base64
import dataclasses
import shutil
from pathlib import Path

import httpx
import jwt
import pytest

from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from http_messages import ApiError, Headers, HttpRequest
from local_runtime.access_dev import (
    DEV_AUD,
    DEV_TEAM_DOMAIN,
    DevAccessKeys,
    DevAccessTransport,
    access_claims,
    mint_token,
)
from local_runtime.adapters.signatures import CryptographySignatures
from local_runtime.background import LocalBackgroundTasks
from local_runtime.cli import main as cli_main
from worker.identity import (
    ACCESS_HEADER,
    JWKS_TTL_SECONDS,
    AccessIdentity,
    require_access,
)

NOW = 1_760_000_000.0


@pytest.fixture
def access_dir(tmp_path: Path) -> Path:
    return tmp_path / "access"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def transport(access_dir: Path) -> DevAccessTransport:
    return DevAccessTransport(access_dir)


def make_bindings(
    clock: FixedClock, transport: httpx.AsyncBaseTransport, **overrides: str
) -> Bindings:
    vars = {"ACCESS_TEAM_DOMAIN": DEV_TEAM_DOMAIN, "ACCESS_AUD": DEV_AUD, **overrides}
    return Bindings(
        settings=Settings.from_vars(vars),
        clock=clock,
        background=LocalBackgroundTasks(),
        http_transport=transport,
        signatures=CryptographySignatures(),
    )


def request_with(token: str | None = None, cookie: str | None = None) -> HttpRequest:
    headers = Headers()
    if token is not None:
        headers.set(ACCESS_HEADER, token)
    if cookie is not None:
        headers.set("Cookie", cookie)
    return HttpRequest("GET", "http://x/admin/agents/t1/runs", headers)


async def rejected(request: HttpRequest, bindings: Bindings) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await require_access(request, bindings)
    return caught.value


async def test_a_minted_token_lets_the_user_in(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    token = mint_token(access_dir, "ada@example.com", now=NOW)
    identity = await require_access(request_with(token), make_bindings(clock, transport))
    assert isinstance(identity, AccessIdentity)
    assert identity.email == "ada@example.com"
    assert identity.principal == "ada@example.com"


async def test_the_cookie_is_accepted_when_the_header_is_absent(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    token = mint_token(access_dir, "ada@example.com", now=NOW)
    request = request_with(cookie=f"other=1; CF_Authorization={token}")
    identity = await require_access(request, make_bindings(clock, transport))
    assert identity.email == "ada@example.com"


async def test_no_token_is_401(clock: FixedClock, transport: DevAccessTransport) -> None:
    error = await rejected(request_with(), make_bindings(clock, transport))
    assert (error.status, error.code) == (401, "access_token_missing")
    assert transport.jwks_requests == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"exp": int(NOW) - 120}, "expired"),
        ({"nbf": int(NOW) + 600}, "not valid yet"),
        ({"aud": ["someone-elses-app"]}, "aud"),
        ({"iss": "https://evil.cloudflareaccess.com"}, "another Access team"),
        ({"exp": "tomorrow"}, "exp"),
        ({"email": None}, "neither a user"),
    ],
)
async def test_bad_claims_are_403(
    access_dir: Path,
    clock: FixedClock,
    transport: DevAccessTransport,
    change: dict[str, object],
    reason: str,
) -> None:
    keys = DevAccessKeys.load_or_create(access_dir)
    claims = {**access_claims("ada@example.com", now=NOW), **change}
    claims = {k: v for k, v in claims.items() if v is not None}
    error = await rejected(request_with(keys.sign(claims)), make_bindings(clock, transport))
    assert (error.status, error.code) == (403, "access_token_invalid")
    assert reason in error.message


async def test_clock_skew_within_the_leeway_is_tolerated(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    keys = DevAccessKeys.load_or_create(access_dir)
    claims = {**access_claims("ada@example.com", now=NOW), "exp": int(NOW) - 10}
    identity = await require_access(
        request_with(keys.sign(claims)), make_bindings(clock, transport)
    )
    assert identity.email == "ada@example.com"


async def test_an_audience_string_is_accepted_like_a_list(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    keys = DevAccessKeys.load_or_create(access_dir)
    claims = {**access_claims("svc", now=NOW), "aud": DEV_AUD, "email": None}
    claims = {k: v for k, v in claims.items() if v is not None} | {"common_name": "svc.access"}
    identity = await require_access(
        request_with(keys.sign(claims)), make_bindings(clock, transport)
    )
    assert identity.common_name == "svc.access"


async def test_tampered_forged_and_malformed_tokens_are_403(
    access_dir: Path, tmp_path: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    bindings = make_bindings(clock, transport)
    good = mint_token(access_dir, "ada@example.com", now=NOW)
    header, payload, signature = good.split(".")
    other = mint_token(access_dir, "eve@example.com", now=NOW).split(".")[1]
    # Another key pair that claims the real key's kid.
    impostor = DevAccessKeys.load_or_create(tmp_path / "impostor")
    forged = impostor.sign(
        access_claims("eve@example.com", now=NOW), kid=DevAccessKeys.load_or_create(access_dir).kid
    )
    for token in [
        f"{header}.{other}.{signature}",  # payload swapped
        f"{header}.{payload}.{signature[:-4]}AAAA",  # signature altered
        forged,
        "not-a-jwt",
        "a.b.c",
        f"{header}.{payload}.",
        "eyJhbGciOiJub25lIn0.eyJlbWFpbCI6ImV2ZUBleGFtcGxlLmNvbSJ9.c2ln",  # alg none
    ]:
        error = await rejected(request_with(token), bindings)
        assert (error.status, error.code) == (403, "access_token_invalid"), token


async def test_hs256_with_the_public_key_as_secret_is_refused(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    good = mint_token(access_dir, "ada@example.com", now=NOW)
    _, payload, signature = good.split(".")
    # {"alg":"HS256","kid":...}: the classic algorithm-confusion attack.
    import base64
    import json

    kid = DevAccessKeys.load_or_create(access_dir).kid
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "kid": kid}).encode())
    token = f"{header.decode().rstrip('=')}.{payload}.{signature}"
    error = await rejected(request_with(token), make_bindings(clock, transport))
    assert "RS256" in error.message


async def test_jwks_is_cached_then_refetched_after_ttl(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    bindings = make_bindings(clock, transport)
    token = mint_token(access_dir, "ada@example.com", now=NOW, ttl=10 * 3600)
    for _ in range(3):
        await require_access(request_with(token), bindings)
    assert transport.jwks_requests == 1
    clock.advance(JWKS_TTL_SECONDS + 1)
    await require_access(request_with(token), bindings)
    assert transport.jwks_requests == 2


async def test_an_unknown_kid_triggers_a_refetch_so_rotation_just_works(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    bindings = make_bindings(clock, transport)
    await require_access(request_with(mint_token(access_dir, "a@x.io", now=NOW)), bindings)
    # Access rotates its key: the new kid is not in our cache yet.
    shutil.rmtree(access_dir)
    clock.advance(60)
    rotated = mint_token(access_dir, "a@x.io", now=clock.now())
    identity = await require_access(request_with(rotated), bindings)
    assert identity.email == "a@x.io"
    assert transport.jwks_requests == 2


async def test_forged_kids_cannot_make_us_hammer_the_jwks_endpoint(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    bindings = make_bindings(clock, transport)
    keys = DevAccessKeys.load_or_create(access_dir)
    await require_access(request_with(mint_token(access_dir, "a@x.io", now=NOW)), bindings)
    for i in range(20):
        token = keys.sign(access_claims("a@x.io", now=NOW), kid=f"made-up-{i}")
        error = await rejected(request_with(token), bindings)
        assert "does not publish" in error.message
    assert transport.jwks_requests == 1


async def test_unconfigured_access_fails_closed(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    token = mint_token(access_dir, "ada@example.com", now=NOW)
    bindings = make_bindings(clock, transport, ACCESS_AUD="")
    error = await rejected(request_with(token), bindings)
    assert (error.status, error.code) == (503, "access_not_configured")


async def test_unreachable_jwks_is_503_not_a_pass(access_dir: Path, clock: FixedClock) -> None:
    token = mint_token(access_dir, "ada@example.com", now=NOW)

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="bad gateway")

    bindings = make_bindings(clock, httpx.MockTransport(down))
    error = await rejected(request_with(token), bindings)
    assert (error.status, error.code) == (503, "access_keys_unavailable")


async def test_cloudflare_style_jwks_from_the_real_url_shape(
    access_dir: Path, clock: FixedClock
) -> None:
    """The verifier asks https://<team>/cdn-cgi/access/certs and reads Cloudflare's format."""
    keys = DevAccessKeys.load_or_create(access_dir)
    seen: list[str] = []

    def certs(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        document = keys.jwks() | {"public_cert": {"kid": keys.kid, "cert": "..."}}
        return httpx.Response(200, json=document)

    bindings = make_bindings(
        clock,
        httpx.MockTransport(certs),
        ACCESS_TEAM_DOMAIN="https://acme.cloudflareaccess.com/",
    )
    claims = access_claims("ada@example.com", now=NOW, team_domain="acme.cloudflareaccess.com")
    identity = await require_access(request_with(keys.sign(claims)), bindings)
    assert identity.email == "ada@example.com"  # its issuer matched the normalised domain
    assert seen == ["https://acme.cloudflareaccess.com/cdn-cgi/access/certs"]


async def test_cli_token_prints_a_token_the_runtime_accepts_as_its_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], transport: DevAccessTransport
) -> None:
    state = tmp_path / "state"
    assert cli_main(["token", "--email", "ops@example.com", "--state", str(state)]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    import time

    bindings = make_bindings(FixedClock(time.time()), DevAccessTransport(state / "access"))
    identity = await require_access(request_with(token), bindings)
    assert identity.email == "ops@example.com"


@pytest.mark.parametrize(
    "shape", ["non_ascii_payload", "non_ascii_header", "padded", "too_long", "json_array"]
)
async def test_malformed_tokens_are_403_json_never_a_500(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport, shape: str
) -> None:
    good = mint_token(access_dir, "ada@example.com", now=NOW)
    header, payload, signature = good.split(".")
    array = base64.urlsafe_b64encode(b"[1, 2]").decode().rstrip("=")
    token = {
        "non_ascii_payload": f"{header}.{payload}é.{signature}",
        "non_ascii_header": f"ü{header}.{payload}.{signature}",
        "padded": f"{header}=.{payload}.{signature}",
        "too_long": f"{header}.{'A' * 20_000}.{signature}",
        "json_array": f"{header}.{array}.{signature}",
    }[shape]
    error = await rejected(request_with(token), make_bindings(clock, transport))
    assert (error.status, error.code) == (403, "access_token_invalid")


async def test_a_critical_header_extension_is_refused(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    keys = DevAccessKeys.load_or_create(access_dir)
    claims = access_claims("ada@example.com", now=NOW)
    token = jwt.encode(
        claims, keys._key, algorithm="RS256", headers={"kid": keys.kid, "crit": ["exp"]}
    )
    error = await rejected(request_with(token), make_bindings(clock, transport))
    assert (error.status, error.code) == (403, "access_token_invalid")


async def test_without_a_signature_verifier_access_fails_closed(
    access_dir: Path, clock: FixedClock, transport: DevAccessTransport
) -> None:
    token = mint_token(access_dir, "ada@example.com", now=NOW)
    bindings = dataclasses.replace(make_bindings(clock, transport), signatures=None)
    error = await rejected(request_with(token), bindings)
    assert (error.status, error.code) == (503, "access_not_configured")
    assert transport.jwks_requests == 0


async def test_jwks_entries_that_are_not_rsa_integers_are_skipped(clock: FixedClock) -> None:
    from worker.identity import parse_jwks

    keys = parse_jwks(
        {
            "keys": [
                {"kty": "RSA", "kid": "ok", "n": "sXch", "e": "AQAB"},
                {"kty": "RSA", "kid": "padded", "n": "sXch==", "e": "AQAB"},
                {"kty": "RSA", "kid": "zero", "n": "AAAA", "e": "AQAB"},
                {"kty": "RSA", "kid": "spaces", "n": "sX ch", "e": "AQAB"},
                {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"},
            ]
        }
    )
    assert sorted(keys) == ["ok"]
