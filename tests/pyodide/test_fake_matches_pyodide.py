"""The fake pins, fake side: tests/fakes/js_runtime.py must give what real Pyodide gives for
the same scenarios: the KV / D1 / DO-SQL transcript on workerd
(tests/pyodide/py/scenario_fake_pin.py, raw and wrapped) and the `waitUntil` outcome table
(tests/pyodide/py/scenario_wait_until.py). The fake stays because the port contract suites
and the app-level entry tests run on it under pytest in CPython; this keeps it faithful."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest

from bindings.ports.clock import FixedClock
from tests.fakes.js_runtime import (
    FakeD1Database,
    FakeDurableObjectStorage,
    FakeJsRuntime,
    FakeKvNamespace,
)
from tests.pyodide.conftest import FAKE_PIN_ID, PY_TESTS, WAIT_UNTIL_PIN_ID, PyodideRun


def scenario(name: str = "scenario_fake_pin") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, PY_TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def fake_transcript(mode: str) -> list[Any]:
    with FakeJsRuntime() as runtime:
        from bindings.cloudflare.d1 import CloudflareD1Database
        from bindings.cloudflare.do_sql import CloudflareDurableObjectStorage
        from bindings.cloudflare.kv import CloudflareKVNamespace

        kv, db, storage = (
            FakeKvNamespace(FixedClock()),
            FakeD1Database(),
            FakeDurableObjectStorage(),
        )
        if mode == "raw":
            bound = (runtime.proxy(kv), runtime.proxy(db), runtime.proxy(storage))
        else:
            bound = (runtime.wrapped(kv), runtime.wrapped(db), runtime.wrapped_storage(storage))
        transcript: list[Any] = await scenario().run(
            CloudflareKVNamespace(bound[0]),
            CloudflareD1Database(bound[1]),
            CloudflareDurableObjectStorage(bound[2]),
            f"pin-{mode}",
        )
        return transcript


@pytest.mark.parametrize("mode", ["raw", "wrapped"])
async def test_the_fake_gives_the_transcript_pyodide_gives_on_workerd(
    mode: str, pyodide_run: PyodideRun
) -> None:
    if pyodide_run.failure is not None:
        pytest.fail(pyodide_run.failure, pytrace=False)
    assert pyodide_run.results is not None
    real = pyodide_run.results[FAKE_PIN_ID]
    assert real["outcome"] == "passed", real["traceback"]
    fake = await fake_transcript(mode)
    expected = real["data"][mode]
    for (step, real_outcome), (fake_step, fake_outcome) in zip(expected, fake, strict=True):
        assert step == fake_step
        assert fake_outcome == real_outcome, (
            f"{mode} {step}: fake {fake_outcome!r}, workerd {real_outcome!r}"
        )


async def test_the_fakes_wait_until_behaves_like_pyodides(pyodide_run: PyodideRun) -> None:
    from tests.fakes.js_runtime import FakeDurableObjectState, JSError

    if pyodide_run.failure is not None:
        pytest.fail(pyodide_run.failure, pytrace=False)
    assert pyodide_run.results is not None
    real = pyodide_run.results[WAIT_UNTIL_PIN_ID]
    assert real["outcome"] == "passed", real["traceback"]

    with FakeJsRuntime() as runtime:

        async def drain(ctx: Any) -> list[str]:
            js_ctx = getattr(ctx, "_ctx", ctx)  # the SDK wraps a Durable Object's state
            outcomes = await js_ctx._js.drain()
            return [item.message for item in outcomes if isinstance(item, JSError)]

        table = await scenario("scenario_wait_until").run(
            lambda: runtime.proxy(FakeDurableObjectState("pin")),
            lambda: runtime.proxy(runtime.execution_context()),
            runtime.proxy(runtime.env()),
            drain,
        )
    assert table == real["data"]
