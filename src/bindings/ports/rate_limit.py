"""Rate limiter port: Cloudflare's Rate Limiting binding (`env.X.limit({key})`).

`limit(key)` counts one call against `key` and answers whether it is within the budget
(`{success}` on Cloudflare). The binding reports no reset time, so callers use
`period_seconds` (the binding's configured period, 10 or 60) for `Retry-After`.
"""

from __future__ import annotations

from typing import Protocol


class RateLimiter(Protocol):
    period_seconds: int

    async def limit(self, key: str) -> bool:
        """Count one call for `key`; True when it is within the limit."""
        ...
