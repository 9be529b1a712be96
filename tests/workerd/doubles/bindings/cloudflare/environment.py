"""Double of `bindings.cloudflare.environment`.

The real module imports `bindings.settings` and `bindings.environment` (pydantic) and the
Workers AI / LLM adapters (numpy, pydantic), none of which load in workerd offline. This
double reads the same binding names from the same `env` and wraps them in the **real**
Cloudflare adapters (KV, D1, R2, Durable Object namespace, background tasks), so every
binding call the other doubles make crosses the SDK's wrappers and workerd for real.
`settings.max_body_bytes` comes from the `MAX_BODY_BYTES` var (wrangler.toml's value), which
is the one setting `worker/entry.py` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bindings.cloudflare import ffi
from bindings.cloudflare.background import CloudflareBackgroundTasks
from bindings.cloudflare.d1 import CloudflareD1Database
from bindings.cloudflare.durable_objects import CloudflareDurableObjectNamespace
from bindings.cloudflare.kv import CloudflareKVNamespace
from bindings.cloudflare.r2 import CloudflareObjectStore


@dataclass(frozen=True)
class TierSettings:
    max_body_bytes: int


@dataclass(frozen=True)
class TierBindings:
    """The part of `bindings.environment.Bindings` the tier uses, plus the harness's URL."""

    settings: TierSettings
    background: CloudflareBackgroundTasks
    kv: CloudflareKVNamespace
    db: CloudflareD1Database
    cold: CloudflareObjectStore
    agents: CloudflareDurableObjectNamespace
    env: Any
    signal_url: str


def build_bindings(env: Any, ctx: Any) -> TierBindings:
    return TierBindings(
        settings=TierSettings(max_body_bytes=int(ffi.to_py(env.MAX_BODY_BYTES))),
        background=CloudflareBackgroundTasks(ctx),
        kv=CloudflareKVNamespace(env.KV),
        db=CloudflareD1Database(env.DB),
        cold=CloudflareObjectStore(env.COLD),
        agents=CloudflareDurableObjectNamespace(env.AGENT_RUNTIME),
        env=env,
        signal_url=str(ffi.to_py(env.TIER_SIGNAL_URL)),
    )
