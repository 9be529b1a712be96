"""Build the per-request `Bindings` from a Worker's `env` and `ctx`.

`env` is the SDK's `_EnvWrapper` (or a raw JsProxy); bindings are read by name as wrangler
declares them (`KV`, `DB`, `VECTORIZE`, `AI`, `AGENT_RUNTIME`, `COLD`), and the vars (`[vars]` and
secrets alike, e.g. `OPENAI_API_KEY`) by the upper-case names of `Settings` fields. A
binding the deployment lacks becomes None; `/healthz` reports it.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from bindings.cloudflare import ffi
from bindings.cloudflare.ai import WorkersAIEmbedder
from bindings.cloudflare.background import CloudflareBackgroundTasks
from bindings.cloudflare.cipher import WebCryptoCipher
from bindings.cloudflare.d1 import CloudflareD1Database
from bindings.cloudflare.durable_objects import CloudflareDurableObjectNamespace
from bindings.cloudflare.http import CloudflareFetchTransport
from bindings.cloudflare.kv import CloudflareKVNamespace
from bindings.cloudflare.llm import build_llm
from bindings.cloudflare.r2 import CloudflareObjectStore
from bindings.cloudflare.rate_limit import CloudflareRateLimiter
from bindings.cloudflare.signatures import WebCryptoSignatures
from bindings.cloudflare.vectorize import CloudflareVectorIndex
from bindings.environment import Bindings
from bindings.ports.clock import SystemClock
from bindings.ports.embedder import Embedder
from bindings.settings import Settings

log = logging.getLogger(__name__)

KV_BINDING = "KV"
D1_BINDING = "DB"
VECTORIZE_BINDING = "VECTORIZE"
AI_BINDING = "AI"
AGENT_RUNTIME_BINDING = "AGENT_RUNTIME"
COLD_BINDING = "COLD"
EMBED_RATE_LIMITER_BINDING = "EMBED_RATE_LIMITER"


def env_value(env: Any, name: str) -> Any:
    """`env.<name>`, or None when the deployment does not define it.

    A raw JsProxy raises AttributeError for a missing property (so does the SDK wrapper,
    which forwards the lookup); a JS `null` counts as missing too.
    """
    try:
        value = getattr(env, name)
    except AttributeError:
        return None
    if value is None or value is ffi.jsnull:
        return None
    return value


def read_settings(env: Any) -> Settings:
    """Settings from the Worker's vars and secrets; raises ValidationError on a bad value."""
    values: dict[str, Any] = {}
    for name in Settings.var_names():
        value = env_value(env, name)
        if value is not None:
            values[name] = ffi.to_py(value)
    return Settings.from_vars(values)


def build_bindings(env: Any, ctx: Any) -> Bindings:
    """Every port this deployment has, wrapped around `env`'s bindings.

    `ctx` is the invocation's ExecutionContext (or a Durable Object's state): its
    `waitUntil` backs `Bindings.background`. Every outbound HTTP call (gateway upstreams,
    Access JWKS, OpenAI-compatible providers) goes through `CloudflareFetchTransport`,
    which never follows a redirect.
    """
    settings = read_settings(env)
    transport = CloudflareFetchTransport()
    ai = env_value(env, AI_BINDING)
    kv = env_value(env, KV_BINDING)
    db = env_value(env, D1_BINDING)
    vectors = env_value(env, VECTORIZE_BINDING)
    agents = env_value(env, AGENT_RUNTIME_BINDING)
    cold = env_value(env, COLD_BINDING)
    limiter = env_value(env, EMBED_RATE_LIMITER_BINDING)
    return Bindings(
        settings=settings,
        clock=SystemClock(),
        background=CloudflareBackgroundTasks(ctx),
        kv=CloudflareKVNamespace(kv) if kv is not None else None,
        db=CloudflareD1Database(db) if db is not None else None,
        vectors=CloudflareVectorIndex(vectors) if vectors is not None else None,
        embedder=build_embedder(settings, ai, transport),
        llm=build_llm(settings, ai, transport),
        agents=CloudflareDurableObjectNamespace(agents) if agents is not None else None,
        cold=CloudflareObjectStore(cold) if cold is not None else None,
        http_transport=transport,
        signatures=WebCryptoSignatures(),
        cipher=WebCryptoCipher(),
        embed_rate_limiter=CloudflareRateLimiter(limiter, settings.embed_rate_period)
        if limiter is not None
        else None,
    )


def build_embedder(
    settings: Settings, ai: Any, transport: httpx.AsyncBaseTransport | None = None
) -> Embedder | None:
    """The embedder `settings.embedding_provider` names, or None if it cannot be built here."""
    provider = settings.embedding_provider
    if provider == "workers-ai":
        if ai is None:
            log.warning("EMBEDDING_PROVIDER=workers-ai but the %s binding is missing", AI_BINDING)
            return None
        return WorkersAIEmbedder(
            ai, model=settings.embedding_model, dimensions=settings.embedding_dimensions
        )
    if provider == "openai":
        if not settings.openai_api_key:
            log.warning("EMBEDDING_PROVIDER=openai but the OPENAI_API_KEY secret is not set")
            return None
        # Imported here so the Workers AI path never loads the OpenAI client module.
        from bindings.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.embedding_model,
            dimensions=settings.embedding_dimensions,
            transport=transport,
        )
    # "local-minilm" runs an ONNX model from the local runtime; it does not exist on Workers.
    log.warning("EMBEDDING_PROVIDER=%s is not available on Cloudflare", provider)
    return None
