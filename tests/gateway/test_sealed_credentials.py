"""Upstream credentials sealed at rest (issue 26): AES-256-GCM under the `MEMORY_PII_KEKS`
key-encryption key, the KV key as AAD; a value stored in clear keeps working and is sealed
on its first use."""

from __future__ import annotations

import base64
import json

import pytest

from bindings.settings import Settings
from gateway import admin_ops
from gateway.credentials import ISOLATE_CACHE, credential_key, credential_sealer
from local_runtime.adapters.cipher import CryptographyCipher
from tests.gateway.conftest import TENANT, Gateway, Seeded, gateway_error

KEKS = "k1:" + base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
def sealing(gateway: Gateway) -> Gateway:
    """The deployment has a cipher and a key-encryption key (the `seeded` credentials were
    written in clear before: a deployment that had them stored that way)."""
    gateway.cipher = CryptographyCipher()
    gateway.settings = Settings(environment="test", memory_pii_keks=KEKS)
    return gateway


async def stored(gw: Gateway, provider: str) -> str:
    raw = await gw.kv.get(credential_key(TENANT, provider))
    assert raw is not None
    return raw


async def test_a_credential_set_with_the_sealer_is_ciphertext_at_rest_and_works(
    seeded: Seeded, sealing: Gateway
) -> None:
    sealer = credential_sealer(sealing.cipher, sealing.settings.pii_keks)
    await admin_ops.set_credential(sealing.kv, sealing.clock, TENANT, "echoer", "r0tated", sealer)
    raw = await stored(sealing, "echoer")
    assert "r0tated" not in raw and json.loads(raw)["sealed"]["kid"] == "k1"
    response = await sealing.call_tool("echo", {"text": "hi"}, key=seeded.key)
    assert response.status == 200, response.json()
    assert sealing.upstream.last.headers["authorization"] == "Token r0tated"


async def test_a_clear_credential_keeps_working_and_is_sealed_on_first_use(
    seeded: Seeded, sealing: Gateway
) -> None:
    assert json.loads(await stored(sealing, "forge")) == {
        "secret": "s3cret-forge",
        "updated_at": sealing.clock.now(),
    }
    for _ in range(2):  # the first call seals it; the second (a fresh isolate) opens it
        ISOLATE_CACHE.clear()
        response = await sealing.call_tool(
            "list_issues", {"owner": "o", "repo": "r"}, key=seeded.key
        )
        assert response.status == 200, response.json()
        assert sealing.upstream.last.url.params["access_token"] == "s3cret-forge"
        raw = await stored(sealing, "forge")
        assert "s3cret-forge" not in raw and set(json.loads(raw)) == {"sealed", "updated_at"}


async def test_a_sealed_credential_copied_to_another_provider_does_not_open(
    seeded: Seeded, sealing: Gateway
) -> None:
    await sealing.call_tool("echo", {"text": "hi"}, key=seeded.key)  # seals echoer's
    calls = len(sealing.upstream.requests)
    await sealing.kv.put(credential_key(TENANT, "forge"), await stored(sealing, "echoer"))
    ISOLATE_CACHE.clear()
    response = await sealing.call_tool("list_issues", {"owner": "o", "repo": "r"}, key=seeded.key)
    assert gateway_error(response) == (503, "credential_key_unavailable")
    assert len(sealing.upstream.requests) == calls  # nothing was sent


async def test_a_sealed_credential_without_its_key_is_a_503_not_a_guess(
    seeded: Seeded, sealing: Gateway
) -> None:
    await sealing.call_tool("echo", {"text": "hi"}, key=seeded.key)
    calls = len(sealing.upstream.requests)
    sealing.settings = Settings(environment="test")
    ISOLATE_CACHE.clear()
    response = await sealing.call_tool("echo", {"text": "hi"}, key=seeded.key)
    assert gateway_error(response) == (503, "credential_key_unavailable")
    assert len(sealing.upstream.requests) == calls
