"""The fake pin, fake side: tests/fakes/js_runtime.py must give the transcript real Pyodide
gives on workerd for the same scenario (tests/pyodide/py/scenario_fake_pin.py), in raw and
wrapped mode. The fake stays because the port contract suites run the Cloudflare adapters
on it under pytest (tests/cloudflare/test_port_contracts.py); this keeps it faithful."""

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
from tests.pyodide.conftest import FAKE_PIN_ID, PY_TESTS, PyodideRun


def scenario() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "scenario_fake_pin", PY_TESTS / "scenario_fake_pin.py"
    )
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
