"""Agent memory tokens: signed, bound to their claims, rotatable by kid, revocable by jti."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import jwt
import pytest

from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from local_runtime.access_dev import mint_token
from local_runtime.cli import main
from local_runtime.memory_tokens_dev import issue_token
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS, Client
from worker.identity import verify_memory_token

TENANT = "acme"


def code(response: object) -> str:
    value: str = response.json()["error"]["code"]  # type: ignore[attr-defined]
    return value


def _segment(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_minted_tokens_are_standard_hs256_jwts_with_the_kid_and_claims(
    client: Client,
) -> None:
    token = await client.mint(
        TENANT, "agent-a", tiers=["working"], scopes=["read"], ttl_seconds=120
    )
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "HS256" and header["kid"] == "k2"
    claims = jwt.decode(token, KEYS["k2"], algorithms=["HS256"], audience="agent-memory-api")
    assert (claims["tenant"], claims["agent_id"]) == (TENANT, "agent-a")
    assert (claims["tiers"], claims["scopes"]) == (["working"], ["read"])
    assert claims["exp"] - claims["iat"] == 120


async def test_a_pyjwt_token_with_an_older_kid_verifies_until_that_key_is_removed(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    now = memory_runtime.clock.now()
    old = issue_token(
        json.dumps(KEYS),
        TENANT,
        "agent-a",
        tiers=["working"],
        scopes=["read"],
        ttl=600,
        now=now,
        kid="k1",
    )
    assert (await client.read(old, "agent-a", tier="working")).status == 200
    rotated = Settings.from_vars({"MEMORY_TOKEN_KEYS": json.dumps({"k2": KEYS["k2"]})})
    bindings = dataclasses.replace(memory_runtime.bindings(), settings=rotated)
    with pytest.raises(Exception) as refused:
        await verify_memory_token(old, bindings)
    assert getattr(refused.value, "code", None) == "memory_token_invalid"


@pytest.mark.parametrize(
    "mutate",
    [
        "bad_mac",
        "other_secret",
        "alg_none",
        "changed_claims",
        "unknown_kid",
        "not_a_jwt",
    ],
)
async def test_forged_or_altered_tokens_are_refused(
    client: Client, memory_runtime: LocalRuntime, mutate: str
) -> None:
    token = await client.mint(TENANT, "agent-a")
    head, body, mac = token.split(".")
    now = memory_runtime.clock.now()
    if mutate == "bad_mac":
        forged = f"{head}.{body}.{mac[:-2]}AA"
    elif mutate == "other_secret":
        forged = issue_token(
            json.dumps({"k2": "z" * 40}),
            TENANT,
            "agent-a",
            tiers=["working"],
            scopes=["read"],
            ttl=600,
            now=now,
        )
    elif mutate == "alg_none":
        forged = f"{_segment({'alg': 'none', 'kid': 'k2'})}.{body}."
    elif mutate == "changed_claims":
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        forged = f"{head}.{_segment({**claims, 'agent_id': 'agent-b'})}.{mac}"
    elif mutate == "unknown_kid":
        forged = issue_token(
            json.dumps({"k9": "y" * 40}),
            TENANT,
            "agent-a",
            tiers=["working"],
            scopes=["read"],
            ttl=600,
            now=now,
        )
    else:
        forged = "not-a-jwt"
    target = "agent-b" if mutate == "changed_claims" else "agent-a"
    response = await client.read(forged, target, tier="working")
    assert (response.status, code(response)) == (401, "memory_token_invalid")


async def test_missing_expired_and_revoked_tokens_are_refused(
    client: Client, clock: FixedClock
) -> None:
    missing = await client.read(None, "agent-a", tier="working")  # type: ignore[arg-type]
    assert (missing.status, code(missing)) == (401, "memory_token_missing")
    short = await client.mint(TENANT, "agent-a", ttl_seconds=60)
    clock.advance(60 + 31)
    expired = await client.read(short, "agent-a", tier="working")
    assert (expired.status, code(expired)) == (401, "memory_token_invalid")

    # The operator's Access token is re-minted at the advanced time.
    client.operator = mint_token(client.runtime.state.access, "ops@example.com", now=clock.now())
    token = await client.mint(TENANT, "agent-a")
    jti = jwt.decode(token, options={"verify_signature": False})["jti"]
    assert (await client.read(token, "agent-a", tier="working")).status == 200
    revoked = await client.send(
        "DELETE", f"/admin/tenants/{TENANT}/memory-tokens/{jti}", access=client.operator
    )
    assert revoked.status == 200 and revoked.json()["revoked"] is True
    refused = await client.read(token, "agent-a", tier="working")
    assert (refused.status, code(refused)) == (401, "memory_token_revoked")
    # Revoking the same jti under another tenant does not touch a token of this one.
    other = await client.mint("globex", "agent-a")
    other_jti = jwt.decode(other, options={"verify_signature": False})["jti"]
    wrong = await client.send(
        "DELETE", f"/admin/tenants/{TENANT}/memory-tokens/{other_jti}", access=client.operator
    )
    assert wrong.status == 200
    assert (await client.read(other, "agent-a", tier="working")).status == 200
    # An unrevoked token of the same agent still works.
    assert (
        await client.read(await client.mint(TENANT, "agent-a"), "agent-a", tier="working")
    ).status == 200


async def test_minting_needs_cloudflare_access_and_valid_claims(client: Client) -> None:
    anonymous = await client.send(
        "POST", f"/admin/tenants/{TENANT}/memory-tokens", {"agent_id": "a"}
    )
    assert (anonymous.status, code(anonymous)) == (401, "access_token_missing")
    bad = await client.send(
        "POST",
        f"/admin/tenants/{TENANT}/memory-tokens",
        {"agent_id": "a", "tiers": ["cosmic"]},
        access=client.operator,
    )
    assert (bad.status, code(bad)) == (422, "validation_error")


async def test_without_keys_the_memory_api_fails_closed(tmp_path: Path) -> None:
    rt = LocalRuntime.open(
        tmp_path / "s", embedder=HashingEmbedder(), vars={"MEMORY_TOKEN_KEYS": ""}
    )
    await rt.migrate()
    forged = issue_token(
        json.dumps(KEYS), TENANT, "agent-a", tiers=["working"], scopes=["read"], ttl=600
    )
    response = await Client(rt).read(forged, "agent-a", tier="working")
    assert (response.status, code(response)) == (503, "memory_tokens_not_configured")
    await rt.close()


async def test_cli_issues_a_token_the_runtime_on_the_same_state_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert (
        main(
            [
                "tokens",
                "issue",
                TENANT,
                "agent-a",
                "--tiers",
                "working,episodic",
                "--scopes",
                "read",
                "--ttl",
                "600",
                "--state",
                str(state),
            ]
        )
        == 0
    )
    token = capsys.readouterr().out.strip().splitlines()[-1]
    rt = LocalRuntime.open(state, embedder=HashingEmbedder())
    await rt.migrate()
    cli = Client(rt)
    assert (await cli.read(token, "agent-a", tier="episodic")).status == 200
    refused = await cli.read(token, "agent-a", tier="semantic")
    assert (refused.status, code(refused)) == (403, "tier_forbidden")
    await rt.close()
    assert main(["tokens", "issue", TENANT, "agent-a", "--ttl", "5", "--state", str(state)]) == 2


def _pyjwt_token(claims: dict[str, object], secret: str = KEYS["k2"]) -> str:
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "k2"})


def _good_claims(now: float) -> dict[str, object]:
    return {
        "iss": "agent-memory",
        "aud": "agent-memory-api",
        "tenant": TENANT,
        "agent_id": "agent-a",
        "tiers": ["working"],
        "scopes": ["read"],
        "iat": int(now),
        "exp": int(now) + 600,
        "jti": "01J0000000000000000000000Z",
    }


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"exp": "9999999999"}, "a numeric string exp (issue 26: it was accepted)"),
        ({"iat": "0"}, "a string iat"),
        ({"exp": True}, "a boolean exp"),
        ({"exp": 1e400}, "an exp that is not finite"),
        ({"aud": "someone-else"}, "another audience"),
        ({"aud": ["agent-memory-api", "x"]}, "an audience list"),
        ({"iss": "evil"}, "another issuer"),
        ({"iat": 10**12}, "issued in the future"),
        ({"exp": None}, "no exp"),
    ],
)
async def test_tokens_with_bad_claims_are_refused_even_when_signed(
    client: Client, memory_runtime: LocalRuntime, change: dict[str, object], why: str
) -> None:
    claims = {**_good_claims(memory_runtime.clock.now()), **change}
    token = _pyjwt_token({k: v for k, v in claims.items() if v is not None})
    response = await client.read(token, "agent-a", tier="working")
    assert (response.status, code(response)) == (401, "memory_token_invalid"), why
    # The same claims unchanged are accepted: the refusal is the change's.
    good = _pyjwt_token(_good_claims(memory_runtime.clock.now()))
    assert (await client.read(good, "agent-a", tier="working")).status == 200


@pytest.mark.parametrize(
    "shape",
    ["non_ascii_payload", "non_ascii_signature", "four_segments", "padding", "spaces", "huge"],
)
async def test_malformed_tokens_are_a_401_json_error_never_a_500(
    client: Client, memory_runtime: LocalRuntime, shape: str
) -> None:
    """Issue 26: a non-ASCII payload segment reached `.encode("ascii")` before the MAC
    check and answered 500, unauthenticated."""
    token = await client.mint(TENANT, "agent-a")
    head, body, mac = token.split(".")
    forged = {
        "non_ascii_payload": f"{head}.{body}é.{mac}",
        "non_ascii_signature": f"{head}.{body}.{mac[:5]}ü{mac[5:]}",
        "four_segments": f"{head}.{body}.{mac}.{mac}",
        "padding": f"{head}.{body}=.{mac}",
        "spaces": f"{head}. {body}.{mac}",
        "huge": f"{head}.{'A' * 5000}.{mac}",
    }[shape]
    response = await client.read(forged, "agent-a", tier="working")
    assert (response.status, code(response)) == (401, "memory_token_invalid")


async def test_without_a_signature_verifier_memory_tokens_fail_closed(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    token = await client.mint(TENANT, "agent-a")
    bindings = dataclasses.replace(memory_runtime.bindings(), signatures=None)
    with pytest.raises(Exception) as refused:
        await verify_memory_token(token, bindings)
    assert getattr(refused.value, "code", None) == "memory_tokens_not_configured"


async def test_a_token_reaches_its_own_agent_type_only(
    client: Client, memory_runtime: LocalRuntime
) -> None:
    """Issue 25 / ADR-29: agents are (type, id). Tokens for `assistant` and `sdr` on instance
    `default` keep two memories; a memory-API token for `default` (minted without a type, or
    before tokens named one) reaches neither; nobody deletes another type's keys."""
    assistant = await client.mint(TENANT, "default", agent_type="assistant")
    sdr = await client.mint(TENANT, "default", agent_type="sdr")
    untyped = issue_token(
        json.dumps(KEYS), TENANT, "default", tiers=["working", "episodic"],
        scopes=["read", "write"], ttl=600, now=memory_runtime.clock.now(), kid="k1",
    )  # fmt: skip
    for token, value in ((assistant, "assistant's"), (sdr, "sdr's")):
        for tier in ("working", "episodic"):
            written = await client.write(token, "default", tier=tier, key="plan", value=value)
            assert written.status == 201, written.json()

    def values(response: Any) -> list[Any]:
        assert response.status == 200, response.json()
        return [item["value"] for item in response.json()["items"]]

    for tier in ("working", "episodic"):
        assert values(await client.read(assistant, "default", tier=tier)) == ["assistant's"]
        assert values(await client.read(sdr, "default", tier=tier)) == ["sdr's"]
        assert values(await client.read(untyped, "default", tier=tier)) == []
        gone = await client.delete(untyped, "default", "plan", tier)
        assert gone.status == 200 and gone.json()["deleted"] is False
        assert values(await client.read(assistant, "default", tier=tier)) == ["assistant's"]
    searched = await client.read(untyped, "default", query="assistant's sdr's plan")
    assert values(searched) == []


async def test_a_revoked_token_reads_writes_and_records_nothing_though_its_check_overlaps(
    client: Client,
) -> None:
    # The hot routes run beside the deny-list lookup (issue 24): a revoked token still gets
    # 401, before any write, with no event or recall statistic recorded after the response.
    token = await client.mint(TENANT, "agent-a")
    assert (await client.write(token, "agent-a", tier="semantic", key="k", value="Lyon")).status
    jti = jwt.decode(token, options={"verify_signature": False})["jti"]
    revoked = await client.send(
        "DELETE", f"/admin/tenants/{TENANT}/memory-tokens/{jti}", access=client.operator
    )
    assert revoked.status == 200
    db = client.runtime.db

    async def counts() -> tuple[object, ...]:
        facts = await db.prepare(
            "SELECT count(*) AS n, sum(recall_count) AS r FROM semantic_facts"
        ).first()
        events = await db.prepare("SELECT count(*) AS n FROM memory_events").first()
        keys = await client.runtime.kv.list(prefix="")
        assert facts is not None and events is not None
        return facts["n"], facts["r"], events["n"], len(keys.keys)

    before = await counts()
    attempts = [
        client.read(token, "agent-a", query="Lyon"),
        client.read(token, "agent-a", tier="semantic", query="Lyon"),
        client.read(token, "agent-a", tier="working"),
        client.write(token, "agent-a", tier="working", key="w", value="v"),
        client.write(token, "agent-a", tier="semantic", key="k2", value="Paris office"),
        client.write(token, "agent-a", tier="episodic", key="e", value="seen"),
        client.write(token, "agent-a", tier="semantic", key="k", value=""),  # also invalid
    ]
    for attempt in attempts:
        refused = await attempt
        assert (refused.status, code(refused)) == (401, "memory_token_revoked")
    await client.runtime.background.drain()
    assert await counts() == before
