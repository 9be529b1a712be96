"""Rate limiter port: Cloudflare's Rate Limiting binding (`env.X.limit({key})` → `{success}`).
It reports no reset time, so callers use `period_seconds` (10 or 60) for `Retry-After`."""

from __future__ import annotations

from typing import Protocol


class RateLimiter(Protocol):
    period_seconds: int

    async def limit(self, key: str) -> bool:
        """Count one call for `key`; True when it is within the limit."""
