"""The per-request `Bindings` from a Worker's `env` and `ctx`: bindings by their wrangler
names, settings by the upper-case names of `Settings` fields; a missing binding is None."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from bindings.cloudflare import ffi
from bindings.cloudflare.ai import WorkersAIEmbedder, WorkersAILLM, WorkersAIReranker
from bindings.cloudflare.background import CloudflareBackgroundTasks
from bindings.cloudflare.d1 import CloudflareD1Database
from bindings.cloudflare.durable_objects import CloudflareDurableObjectNamespace
from bindings.cloudflare.http import CloudflareFetchTransport
from bindings.cloudflare.kv import CloudflareKVNamespace
from bindings.cloudflare.queue import CloudflareQueue
from bindings.cloudflare.r2 import CloudflareObjectStore
from bindings.cloudflare.rate_limit import CloudflareRateLimiter
from bindings.cloudflare.vectorize import CloudflareVectorIndex
from bindings.cloudflare.webcrypto import WebCryptoCipher, WebCryptoSignatures
from bindings.environment import Bindings, Shard
from bindings.ports.clock import SystemClock
from bindings.ports.embedder import Embedder
from bindings.ports.llm import LLM
from bindings.settings import Settings

log = logging.getLogger(__name__)


def env_value(env: Any, name: str) -> Any:
    """`env.<name>`, or None when the deployment does not define it (a raw JsProxy and the
    SDK wrapper both raise AttributeError for a missing property; JS `null` counts too)."""
    try:
        value = getattr(env, name)
    except AttributeError:
        return None
    return None if value is None or value is ffi.jsnull else value


def read_settings(env: Any) -> Settings:
    """Settings from the Worker's vars and secrets; raises ValidationError on a bad value.
    Validated once per isolate and set of values (vars only change with a new deployment,
    which starts new isolates), not on every request."""
    global _settings
    raw = {name: ffi.to_py(env_value(env, name)) for name in Settings.var_names()}
    key = json.dumps(raw, sort_keys=True, default=str)
    if _settings is None or _settings[0] != key:
        _settings = (key, Settings.from_vars(raw))
    return _settings[1]


_settings: tuple[str, Settings] | None = None


def build_bindings(env: Any, ctx: Any) -> Bindings:
    """Every port this deployment has. `ctx` (an ExecutionContext or a Durable Object's state)
    backs `background`; all outbound HTTP goes through `CloudflareFetchTransport`."""
    settings = read_settings(env)
    transport = CloudflareFetchTransport()
    ai = env_value(env, "AI")

    def adapter(name: str, wrap: Any) -> Any:
        binding = env_value(env, name)
        return None if binding is None else wrap(binding)

    # Every shard MEMORY_SHARDS names (the primary is DB + VECTORIZE); a binding the
    # deployment lacks leaves that shard without it (its tenants' tiers answer 503).
    shards = tuple(
        Shard(name, adapter(d1, CloudflareD1Database), adapter(index, CloudflareVectorIndex))
        for name, d1, index in settings.shards
    )
    return Bindings(
        settings=settings,
        clock=SystemClock(),
        background=CloudflareBackgroundTasks(ctx),
        kv=adapter("KV", CloudflareKVNamespace),
        db=shards[0].db,
        vectors=shards[0].vectors,
        shards=shards,
        embedder=build_embedder(settings, ai, transport),
        llm=build_llm(settings, ai, transport),
        agents=adapter("AGENT_RUNTIME", CloudflareDurableObjectNamespace),
        cold=adapter("COLD", CloudflareObjectStore),
        feed=adapter("FEED", CloudflareQueue),
        http_transport=transport,
        signatures=WebCryptoSignatures(),
        cipher=WebCryptoCipher(),
        reranker=None if ai is None else WorkersAIReranker(ai),
        embed_rate_limiter=adapter(
            "EMBED_RATE_LIMITER", lambda b: CloudflareRateLimiter(b, settings.embed_rate_period)
        ),
        oauth_rate_limiter=adapter("OAUTH_RATE_LIMITER", lambda b: CloudflareRateLimiter(b, 60)),
    )


def build_embedder(
    settings: Settings, ai: Any, transport: httpx.AsyncBaseTransport | None = None
) -> Embedder | None:
    """The embedder `settings.embedding_provider` names, or None if it cannot be built here."""
    provider, model = settings.embedding_provider, settings.embedding_model
    if provider == "workers-ai" and ai is not None:
        return WorkersAIEmbedder(ai, model, settings.embedding_dimensions)
    if provider == "openai" and settings.openai_api_key:
        # Imported here so the Workers AI path never loads numpy with the OpenAI client.
        from bindings.openai_embedder import OpenAIEmbedder

        base, key = settings.openai_base_url, settings.openai_api_key
        return OpenAIEmbedder(base, key, model, settings.embedding_dimensions, transport)
    log.warning(
        "EMBEDDING_PROVIDER=%s: no embedder (workers-ai needs the AI binding, openai the "
        "OPENAI_API_KEY secret; local-minilm exists only locally)",
        provider,
    )
    return None


def build_llm(
    settings: Settings, ai: Any, transport: httpx.AsyncBaseTransport | None = None
) -> LLM | None:
    """The LLM `settings.llm_provider` names, or None if it cannot be built here."""
    if settings.llm_provider == "workers-ai" and ai is not None:
        return WorkersAILLM(ai, settings.llm_model)
    if settings.llm_provider == "openai" and settings.openai_api_key:
        from bindings.openai_llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.llm_model,
            transport=transport,
        )
    return None
