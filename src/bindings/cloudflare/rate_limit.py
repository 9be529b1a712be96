"""`RateLimiter` over Cloudflare's Rate Limiting binding: `await env.X.limit({key})` →
`{success}`."""

from __future__ import annotations

from typing import Any

from bindings.cloudflare.ffi import field, is_raw, to_js_options, to_py


class CloudflareRateLimiter:
    def __init__(self, binding: Any, period_seconds: int) -> None:
        self._binding = binding
        self._raw = is_raw(binding)
        self.period_seconds = period_seconds

    async def limit(self, key: str) -> bool:
        outcome = to_py(await self._binding.limit(to_js_options(self._raw, key=key)))
        return bool(field(outcome, "success"))
