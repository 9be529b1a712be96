"""The Rate Limiting adapter over workerd's real binding (Miniflare, limit 3 per 60 s),
in real Pyodide, raw and through the workers SDK's wrapper."""

from __future__ import annotations

from support import MODES, binding, unique

from bindings.cloudflare.rate_limit import CloudflareRateLimiter


async def test_calls_within_the_limit_pass_and_the_next_is_refused_per_key() -> None:
    for mode in MODES:
        limiter = CloudflareRateLimiter(binding("EMBED_RATE_LIMITER", mode), 60)
        for _ in range(2):
            key, other = unique("tenant"), unique("tenant")
            outcomes = [await limiter.limit(key) for _ in range(4)]
            # The binding's windows are fixed 60 s slots: four calls that straddle a slot
            # boundary all pass. Two attempts milliseconds apart cannot both straddle one.
            if outcomes != [True, True, True, True]:
                break
        assert outcomes == [True, True, True, False], (mode, outcomes)
        assert await limiter.limit(other) is True, mode
        assert limiter.period_seconds == 60
