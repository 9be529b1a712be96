"""`build_bindings(env, ctx)`: every binding from `env`, settings from the vars."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.fakes.js_runtime import FakeJsRuntime, JSPlainObject
from tests.fakes.queue import FakeQueue
from tests.fakes.r2 import FakeR2Bucket

VARS = {
    "ENVIRONMENT": "test",
    "EMBEDDING_PROVIDER": "workers-ai",
    "EMBEDDING_MODEL": "@cf/baai/bge-small-en-v1.5",
    "EMBEDDING_DIMENSIONS": "384",
    "MAX_BODY_BYTES": "2048",
}


def full_env(runtime: FakeJsRuntime, **overrides: Any) -> JSPlainObject:
    members: dict[str, Any] = {
        "KV": runtime.kv(),
        "DB": runtime.d1(),
        "VECTORIZE": runtime.vectorize(),
        "AI": runtime.ai(),
        "AGENT_RUNTIME": runtime.do_namespace(),
        "COLD": FakeR2Bucket(runtime.clock),
        "FEED": FakeQueue(),
        **VARS,
    }
    members.update(overrides)
    return runtime.env(**members)


def as_env(runtime: FakeJsRuntime, env: JSPlainObject, mode: str) -> Any:
    import workers

    raw = runtime.proxy(env)
    return raw if mode == "raw" else workers._EnvWrapper(raw)


async def test_every_binding_is_built_and_vars_are_typed(
    js_runtime: FakeJsRuntime, mode: str
) -> None:
    from bindings.cloudflare.environment import build_bindings

    env = as_env(js_runtime, full_env(js_runtime), mode)
    bindings = build_bindings(env, js_runtime.proxy(js_runtime.execution_context()))
    assert bindings.present() == {
        "kv": True,
        "d1": True,
        "vectorize": True,
        "ai_embedder": True,
        "llm": True,
        "agent_runtime": True,
        "cold": True,
        "feed": True,
    }
    assert bindings.llm is not None
    assert bindings.llm.model == bindings.settings.llm_model  # Workers AI through env.AI
    assert bindings.settings.environment == "test"
    assert bindings.settings.max_body_bytes == 2048
    assert bindings.embedder is not None
    assert bindings.embedder.config.model == "@cf/baai/bge-small-en-v1.5#pooling=cls"
    # The adapters are live: a KV round trip goes through env.KV.
    assert bindings.kv is not None
    await bindings.kv.put("k", "v")
    assert await bindings.kv.get("k") == "v"


def test_missing_bindings_are_none(js_runtime: FakeJsRuntime, mode: str) -> None:
    from bindings.cloudflare.environment import build_bindings

    env = as_env(js_runtime, js_runtime.env(ENVIRONMENT="development"), mode)
    bindings = build_bindings(env, js_runtime.proxy(js_runtime.execution_context()))
    assert not any(bindings.present().values())
    assert bindings.settings.environment == "development"
    assert bindings.settings.embedding_provider == "workers-ai"


def test_openai_provider_uses_the_secret(js_runtime: FakeJsRuntime, mode: str) -> None:
    from bindings.cloudflare.environment import build_bindings

    env = full_env(
        js_runtime,
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_MODEL="text-embedding-3-small",
        EMBEDDING_DIMENSIONS="512",
        OPENAI_API_KEY="sk-test",
    )
    bindings = build_bindings(
        as_env(js_runtime, env, mode), js_runtime.proxy(js_runtime.execution_context())
    )
    assert bindings.embedder is not None
    config = bindings.embedder.config
    assert (config.provider, config.model, config.dimensions) == (
        "openai",
        "text-embedding-3-small",
        512,
    )


def test_every_outbound_call_goes_through_the_fetch_transport(
    js_runtime: FakeJsRuntime, mode: str
) -> None:
    # Pyodide's default httpx transport lets fetch follow redirects (credential included);
    # the Cloudflare transport never does (tests/pyodide/py/test_http.py).
    from bindings.cloudflare.environment import build_bindings
    from bindings.cloudflare.http import CloudflareFetchTransport

    env = full_env(
        js_runtime,
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_MODEL="text-embedding-3-small",
        EMBEDDING_DIMENSIONS="512",
        OPENAI_API_KEY="sk-test",
        LLM_PROVIDER="openai",
    )
    bindings = build_bindings(
        as_env(js_runtime, env, mode), js_runtime.proxy(js_runtime.execution_context())
    )
    assert isinstance(bindings.http_transport, CloudflareFetchTransport)
    assert bindings.embedder is not None and bindings.llm is not None
    assert bindings.embedder._transport is bindings.http_transport  # type: ignore[attr-defined]
    assert bindings.llm._transport is bindings.http_transport  # type: ignore[attr-defined]
    client = bindings.http_client()
    assert client._transport is bindings.http_transport


def test_openai_provider_without_a_key_has_no_embedder(js_runtime: FakeJsRuntime) -> None:
    from bindings.cloudflare.environment import build_bindings

    env = full_env(js_runtime, EMBEDDING_PROVIDER="openai", EMBEDDING_MODEL="m")
    bindings = build_bindings(
        js_runtime.proxy(env), js_runtime.proxy(js_runtime.execution_context())
    )
    assert bindings.embedder is None


def test_a_bad_var_is_refused_with_its_name(js_runtime: FakeJsRuntime) -> None:
    from bindings.cloudflare.environment import build_bindings

    env = full_env(js_runtime, MAX_BODY_BYTES="lots")
    with pytest.raises(ValidationError, match="max_body_bytes"):
        build_bindings(js_runtime.proxy(env), js_runtime.proxy(js_runtime.execution_context()))


async def test_settings_are_validated_once_per_set_of_values(
    js_runtime: FakeJsRuntime, mode: str
) -> None:
    """Requests of one isolate share the validated settings; a different value (another
    deployment's vars) is validated afresh, a bad one still refused."""
    from bindings.cloudflare.environment import read_settings

    first = read_settings(as_env(js_runtime, full_env(js_runtime), mode))
    assert read_settings(as_env(js_runtime, full_env(js_runtime), mode)) is first
    other = read_settings(as_env(js_runtime, full_env(js_runtime, MAX_BODY_BYTES="4096"), mode))
    assert other is not first and other.max_body_bytes == 4096
    with pytest.raises(ValidationError):
        read_settings(as_env(js_runtime, full_env(js_runtime, MAX_BODY_BYTES="lots"), mode))
