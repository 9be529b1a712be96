"""A local `RateLimiter` like Cloudflare's Rate Limiting binding: a fixed window of
`period_seconds` (10 or 60, as the binding allows) per key, `limit` calls per window.

Faithful to the documented behaviour: the call that is refused still counts nothing
extra, windows are aligned to the clock, and a period other than 10 or 60 is refused
(wrangler refuses it too). Cloudflare counts per location and is eventually consistent;
a single local process has one location, so this is the strict reading.
"""

from __future__ import annotations

from bindings.ports.clock import Clock

ALLOWED_PERIODS = (10, 60)


class FixedWindowRateLimiter:
    def __init__(self, *, limit: int, period_seconds: int, clock: Clock) -> None:
        if period_seconds not in ALLOWED_PERIODS:
            raise ValueError("a rate limit period must be 10 or 60 seconds")
        if limit < 1:
            raise ValueError("a rate limit must allow at least one call")
        self.limit_per_period = limit
        self.period_seconds = period_seconds
        self._clock = clock
        self._counts: dict[tuple[str, int], int] = {}

    async def limit(self, key: str) -> bool:
        window = int(self._clock.now() // self.period_seconds)
        # Forget finished windows so the map stays small.
        for stale in [k for k in self._counts if k[1] < window]:
            del self._counts[stale]
        used = self._counts.get((key, window), 0)
        if used >= self.limit_per_period:
            return False
        self._counts[(key, window)] = used + 1
        return True
