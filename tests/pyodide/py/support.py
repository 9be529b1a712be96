"""Helpers for the in-Pyodide tests: the harness's JS side and both binding modes.

`harness_js` is registered by tests/pyodide/harness.mjs: real KV/D1/R2 bindings from
Miniflare (`env`), factories for Durable Object storage and the JS models, the loopback
upstream. `MODES` runs a scenario once with bindings as bare JsProxy objects (raw mode)
and once through the real workers SDK's wrappers (wrapped mode, what `self.env` gives a
Worker since workers-runtime-sdk 1.3).
"""

from __future__ import annotations

import itertools
from typing import Any

import harness_js
from workers import _EnvWrapper

MODES = ("raw", "wrapped")
_names = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test uses (tests share one KV namespace, D1 database and bucket)."""
    return f"{prefix}-{next(_names)}"


def binding(name: str, mode: str) -> Any:
    """`env.<name>` as a Worker would see it in `mode`."""
    if mode == "raw":
        return getattr(harness_js.env, name)
    return getattr(_EnvWrapper(harness_js.env), name)


def env(mode: str, **extra: Any) -> Any:
    """The harness env (plus `extra` JS objects) as a Worker sees it in `mode`."""
    from js import Object
    from pyodide.ffi import to_js

    merged = Object.assign(
        Object.new(), harness_js.env, to_js(extra, dict_converter=Object.fromEntries)
    )
    return merged if mode == "raw" else _EnvWrapper(merged)
