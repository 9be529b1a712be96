"""The conversion helpers, and the fake's fidelity on the points the adapters rely on."""

from __future__ import annotations

import pytest

from tests.fakes.js_runtime import (
    NULL,
    FakeJsRuntime,
    JSArray,
    JSPlainObject,
    data_to_js,
)


def test_to_py_turns_raw_results_with_nulls_into_plain_python(js_runtime: FakeJsRuntime) -> None:
    from pyodide.ffi import jsnull

    from bindings.cloudflare import ffi

    raw = js_runtime.proxy(
        JSPlainObject({"a": NULL, "b": JSArray([1.0, NULL, JSPlainObject({"c": 2.5})])})
    )
    assert raw.to_py()["a"] is jsnull  # what Pyodide 0.28 really hands back
    assert ffi.to_py(raw) == {"a": None, "b": [1, None, {"c": 2.5}]}
    assert ffi.to_py(jsnull) is None
    assert ffi.to_py(None) is None


def test_to_py_accepts_wrapped_results_and_returns_plain_dicts(js_runtime: FakeJsRuntime) -> None:
    from workers.rpc import JsDict

    from bindings.cloudflare import ffi

    wrapped = JsDict({"x": JsDict({"y": 1}), "z": [JsDict({"w": None})]})
    converted = ffi.to_py(wrapped)
    assert converted == {"x": {"y": 1}, "z": [{"w": None}]}
    assert type(converted) is dict and type(converted["x"]) is dict


def test_to_js_arg_builds_js_objects_with_null_in_raw_mode_only(js_runtime: FakeJsRuntime) -> None:
    from pyodide.ffi import JsProxy, jsnull

    from bindings.cloudflare import ffi

    payload = {"a": None, "b": [1, "x"], "c": {"d": True}}
    assert ffi.to_js_arg(payload, raw=False) is payload
    converted = ffi.to_js_arg(payload, raw=True)
    assert isinstance(converted, JsProxy)
    assert converted.constructor.name == "Object"  # not a Map
    assert converted.a is jsnull  # null, not undefined
    assert converted.c.d is True
    assert ffi.to_js_arg(None, raw=True) is jsnull
    assert ffi.to_js_arg("text", raw=True) == "text"


def test_to_js_options_leaves_out_unset_options(js_runtime: FakeJsRuntime) -> None:
    from bindings.cloudflare import ffi

    assert ffi.to_js_options(False, limit=10, cursor=None) == {"limit": 10}
    options = ffi.to_js_options(True, limit=10, cursor=None)
    assert options.object_keys() == ["limit"]


async def test_fake_raw_call_sends_python_dicts_as_opaque_proxies(
    js_runtime: FakeJsRuntime,
) -> None:
    """Without to_js, a raw binding cannot read a dict's keys: options are silently lost."""
    kv = js_runtime.kv()
    raw = js_runtime.proxy(kv)
    await raw.put("k", "v", {"expirationTtl": 120})
    assert kv.entry("k") == ("v", None, None)  # the TTL never reached KV
    await raw.put("k2", "v", expirationTtl=120)  # kwargs become a trailing JS object
    assert kv.entry("k2") == ("v", int(js_runtime.clock.now() + 120), None)


async def test_fake_wrapped_binding_converts_like_the_sdk(js_runtime: FakeJsRuntime) -> None:
    kv = js_runtime.kv()
    wrapped = js_runtime.wrapped(kv)
    await wrapped.put("k", "v", {"expirationTtl": 120, "metadata": {"n": None}})
    assert kv.entry("k") == ("v", int(js_runtime.clock.now() + 120), {"n": None})
    assert await wrapped.get("missing") is None
    raw_missing = await js_runtime.proxy(kv).get("missing")
    from pyodide.ffi import jsnull

    assert raw_missing is jsnull


def test_fake_to_py_keeps_class_instances_as_proxies(js_runtime: FakeJsRuntime) -> None:
    from pyodide.ffi import JsProxy

    value = js_runtime.proxy(JSArray([js_runtime.kv(), data_to_js({"a": 1})])).to_py()
    assert isinstance(value[0], JsProxy) and value[0].constructor.name == "KvNamespace"
    assert value[1] == {"a": 1}


def test_pyodide_0_26_has_no_jsnull_and_converts_null_to_none() -> None:
    with FakeJsRuntime(pyodide_version="0.26.0a2") as runtime:
        import pyodide.ffi

        from bindings.cloudflare import ffi

        assert not hasattr(pyodide.ffi, "jsnull")
        assert ffi.jsnull is None
        raw = runtime.proxy(JSPlainObject({"a": NULL}))
        assert raw.to_py() == {"a": None}
        assert ffi.to_py(raw) == {"a": None}


def test_fake_modules_are_removed_after_the_runtime(js_runtime: FakeJsRuntime) -> None:
    import sys

    import bindings.cloudflare.ffi  # noqa: F401

    js_runtime.uninstall()
    assert "js" not in sys.modules
    assert "workers" not in sys.modules
    assert "bindings.cloudflare.ffi" not in sys.modules
    with pytest.raises(ImportError):
        import js  # noqa: F401
    js_runtime.install()  # the fixture uninstalls again at the end
