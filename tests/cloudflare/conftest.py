"""Fixtures: the fake Pyodide/Cloudflare runtime, installed per test and removed after.

`mode` runs a test twice: once with bindings as bare JsProxy objects (raw mode) and once as
the real workers SDK hands them out through `_EnvWrapper` (wrapped mode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.js_runtime import FakeDurableObjectStorage, FakeJsRuntime, JSValue


@pytest.fixture
def js_runtime() -> Iterator[FakeJsRuntime]:
    with FakeJsRuntime() as runtime:
        yield runtime


@pytest.fixture(params=["raw", "wrapped"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def bind(js_runtime: FakeJsRuntime, mode: str) -> Callable[[JSValue], Any]:
    """Turn a fake JS binding into what an adapter receives in the current mode."""

    def as_binding(value: JSValue) -> Any:
        if mode == "raw":
            return js_runtime.proxy(value)
        if isinstance(value, FakeDurableObjectStorage):
            return js_runtime.wrapped_storage(value)
        return js_runtime.wrapped(value)

    return as_binding
