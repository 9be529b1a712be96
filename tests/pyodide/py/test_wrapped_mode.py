"""The "wrapped" mode of these tests is the production path: every binding an adapter gets
there is the workers SDK's own wrapper, as `self.env` / `self.ctx.storage` give it to a Worker
on Cloudflare.

The SDK wraps a binding only when its JS `constructor.name` is one workerd's bindings have
(workers-runtime-sdk `rpc.py`, `_EnvWrapper._BINDING_TYPES`; `DurableObjectContext` checks
"DurableObjectStorage"). Miniflare's binding proxies answer "constructor" and the JS models
were named otherwise, so until tests/pyodide/bindings.mjs dressed them as workerd's classes
the "wrapped" runs handed the adapters bare JsProxy objects (this test failed then for KV, D1,
R2, Rate Limiting, Workers AI and Vectorize).
"""

from __future__ import annotations

from typing import Any

import harness_js
from support import binding, env
from workers import DurableObject
from workers.rpc import _BindingWrapper

from bindings.cloudflare import ffi

ENV_BINDINGS = ("KV", "DB", "COLD", "EMBED_RATE_LIMITER")


class ProbeObject(DurableObject):  # type: ignore[misc]
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


def _kind(value: Any) -> str:
    return f"{type(value).__name__} ({getattr(getattr(value, 'constructor', None), 'name', '?')})"


def test_every_binding_is_an_sdk_wrapper_in_wrapped_mode() -> None:
    not_wrapped = []
    for name in ENV_BINDINGS:
        wrapped = binding(name, "wrapped")
        if not isinstance(wrapped, _BindingWrapper) or ffi.is_raw(wrapped):
            not_wrapped.append(f"{name}: {_kind(wrapped)}")
        assert ffi.is_raw(binding(name, "raw")), name
    models = env("wrapped", AI=harness_js.newWorkersAI(), VECTORIZE=harness_js.newVectorize(4))
    for name in ("AI", "VECTORIZE"):
        wrapped = getattr(models, name)
        if not isinstance(wrapped, _BindingWrapper):
            not_wrapped.append(f"{name}: {_kind(wrapped)}")
    assert not not_wrapped, f"handed over unwrapped: {not_wrapped}"


def test_durable_object_storage_its_sql_and_cursors_are_sdk_wrappers() -> None:
    obj = ProbeObject(harness_js.newDurableObjectState(harness_js.newStorage()), harness_js.env)
    storage = obj.ctx.storage
    assert isinstance(storage, _BindingWrapper), _kind(storage)
    assert isinstance(storage.sql, _BindingWrapper), _kind(storage.sql)
    cursor = storage.sql.exec("SELECT 1 AS one")
    assert isinstance(cursor, _BindingWrapper), _kind(cursor)
    # workerd's names for what `exec` and `raw()` return (printed inside workerd).
    assert cursor._binding.constructor.name == "Cursor"
    assert cursor._binding.raw().constructor.name == "RawIterator"
