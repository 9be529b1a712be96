"""The per-tenant embedding budget (ADR-29): semantic writes and searches through the
memory API are counted per tenant by the Rate Limiting binding; over it, 429 with
Retry-After and nothing is embedded or written."""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from local_runtime.adapters.rate_limit import FixedWindowRateLimiter
from local_runtime.runtime import LocalRuntime
from tests.conftest import PROJECT_ROOT
from tests.fakes.embedder import HashingEmbedder
from tests.memory_api.conftest import KEYS, Client


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[tuple[Client, FixedClock]]:
    clock = FixedClock(1_800_000_000.0)  # a window boundary: 1_800_000_000 % 10 == 0
    rt = LocalRuntime.open(
        tmp_path / "state",
        embedder=HashingEmbedder(),
        clock=clock,
        vars={
            "MEMORY_TOKEN_KEYS": json.dumps(KEYS),
            "EMBED_RATE_LIMIT": "2",
            "EMBED_RATE_PERIOD": "10",
        },
    )
    await rt.migrate()
    yield Client(rt), clock
    await rt.close()


async def test_over_budget_semantic_calls_get_429_with_retry_after_and_write_nothing(
    limited: tuple[Client, FixedClock],
) -> None:
    client, clock = limited
    a = await client.mint("acme", "agent-a")
    other = await client.mint("globex", "agent-a")
    for n in range(2):
        ok = await client.write(a, "agent-a", tier="semantic", key=f"k{n}", value=f"fact {n}")
        assert ok.status == 201
    refused = await client.write(a, "agent-a", tier="semantic", key="k9", value="one too many")
    assert refused.status == 429
    assert refused.headers.get("retry-after") == "10"
    assert refused.json()["error"]["code"] == "embedding_rate_limited"
    row = await client.runtime.db.prepare("SELECT COUNT(*) AS n FROM semantic_facts").first()
    assert row is not None and row["n"] == 2
    searched = await client.read(a, "agent-a", query="fact")
    assert searched.status == 429
    # Other tenants and tiers that embed nothing are not affected.
    assert (await client.write(other, "agent-a", tier="semantic", key="k", value="x")).status == 201
    assert (await client.write(a, "agent-a", tier="working", key="w", value=1)).status == 201
    assert (await client.read(a, "agent-a", query="fact", tier="working")).status == 200
    clock.advance(10)
    assert (await client.read(a, "agent-a", query="fact", tier="semantic")).status == 200


async def test_the_local_limiter_counts_fixed_windows_per_key() -> None:
    clock = FixedClock(1_800_000_000.0)
    limiter = FixedWindowRateLimiter(limit=2, period_seconds=60, clock=clock)
    assert [await limiter.limit("t1") for _ in range(3)] == [True, True, False]
    assert await limiter.limit("t2") is True
    clock.advance(59)
    assert await limiter.limit("t1") is False
    clock.advance(1)
    assert await limiter.limit("t1") is True
    with pytest.raises(ValueError):
        FixedWindowRateLimiter(limit=2, period_seconds=30, clock=clock)


def test_wrangler_declares_the_binding_with_the_settings_numbers() -> None:
    config = tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text())
    (limiter,) = [r for r in config["ratelimits"] if r["name"] == "EMBED_RATE_LIMITER"]
    defaults = Settings()
    assert limiter["simple"] == {
        "limit": defaults.embed_rate_limit,
        "period": defaults.embed_rate_period,
    }
