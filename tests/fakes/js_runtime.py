"""A fake Pyodide + Cloudflare runtime for CPython tests of the FFI adapters.

What is faked, and how faithfully:

* **The Pyodide FFI** (`pyodide.ffi`): `JsProxy` (with Pyodide's capability subclasses:
  callable, awaitable, iterable, array, buffer), `jsnull`, `JsException`, `to_js`,
  `create_proxy`. Conversions follow the Pyodide type-conversion rules: calling a JS function
  converts only immutable Python values (None -> `undefined`), a dict/list argument reaches JS
  as an opaque PyProxy, kwargs become a trailing options object, JS numbers come back as
  `int` when integral, JS `null` arrives as `jsnull` (Pyodide 0.28 / Python 3.13) or `None`
  (Pyodide 0.26 / Python 3.12, `pyodide_version="0.26.0a2"`), and `.to_py()` converts plain
  objects/arrays deeply while leaving class instances as proxies (or handing them to a
  `default_converter`). `to_js(dict)` gives a Map unless `dict_converter=Object.fromEntries`.
* **`js`**: the globals the SDK and adapters use (`Object`, `Array`, `JSON`, `Date`, `Error`,
  `Headers`, `Request`, `Response`, `queueMicrotask`).
* **The runtime helpers** `_pyodide_entrypoint_helper` and `_cloudflare_compat_flags`, just
  enough for the **real** `workers` SDK (installed in the venv) to import on top of these
  fakes. Tests therefore exercise the genuine `_EnvWrapper`/`_BindingWrapper`/
  `DurableObjectContext`/`Request`/`Response` code for wrapped mode, not a re-implementation.
* **Bindings** as JS objects. KV, D1 and Durable Object storage are the JS face of the
  local runtime's adapters (`local_runtime.adapters.kv/d1/do_sql`), whose rules, limits and
  error texts are themselves checked against real workerd by the Miniflare contract suites:
  this fake adds only the JS boundary (argument shapes, `undefined` vs `null`, BigInt,
  PyProxy, error objects). Vectorize (`VectorizeIndexImpl`: cosine, namespaces, metadata
  filters, topK limits, `VECTOR_*_ERROR (code = ...)` errors) and Workers AI (`Ai`:
  deterministic bge-like embeddings with a `pooling` echo) are modelled here. So are
  Durable Object namespaces with RPC stubs (structured clone both ways), the
  `ExecutionContext`, `DurableObjectState` (blockConcurrencyWhile as an input gate) and the
  cron `ScheduledController`.

A JS object that receives a PyProxy where it expects a plain object behaves like the real one
would: property reads see nothing (so a raw-mode dict sent without `to_js` silently loses its
options), and storing it fails. That is what makes the raw-mode tests meaningful.

Limits of the fake: KV and Vectorize writes are visible immediately (the real ones are
eventually consistent); DO SQL refuses boolean bindings (workerd stores them as the text
'true'/'false'); Vectorize and Workers AI error texts are modelled on, not copied from, the
real services.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import sys
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from typing import Any

from bindings.ports.clock import FixedClock
from bindings.ports.errors import BindingError, BindingLimitError

# Pyodide's int <-> Number boundary, inclusive (type-conversions.md).
PYODIDE_INT_LIMIT = 2**53

# --------------------------------------------------------------------------------------
# JS value model (the "JS side"): primitives are Python str/int/float/bool plus these.
# --------------------------------------------------------------------------------------


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False


class _Null:
    def __repr__(self) -> str:
        return "null"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Any = _Undefined()
NULL: Any = _Null()


class JSBigInt:
    """A JS BigInt primitive: what Pyodide sends for a Python int outside +-2^53."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"{self.value}n"


class JSError(Exception):
    """A JS exception in flight on the JS side (becomes `JsException` in Python)."""

    def __init__(self, name: str, message: str, py_exc: BaseException | None = None) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.py_exc = py_exc


class JSValue:
    """Base of every JS object in the fake."""

    js_class = "Object"

    def js_get(self, key: str) -> Any:
        return UNDEFINED

    def js_set(self, key: str, value: Any) -> None:
        raise JSError("TypeError", f"cannot set {key} on {self.js_class}")

    def js_keys(self) -> list[str]:
        return []

    def js_callable(self) -> bool:
        return False

    def js_call(self, args: list[Any]) -> Any:
        raise JSError("TypeError", f"{self.js_class} is not a function")

    def js_construct(self, args: list[Any]) -> Any:
        raise JSError("TypeError", f"{self.js_class} is not a constructor")

    def js_iter(self) -> Iterator[Any] | None:
        return None

    def js_thenable(self) -> bool:
        return False


class JSPlainObject(JSValue):
    def __init__(self, props: dict[str, Any] | None = None) -> None:
        self.props: dict[str, Any] = dict(props or {})

    def js_get(self, key: str) -> Any:
        return self.props.get(key, UNDEFINED)

    def js_set(self, key: str, value: Any) -> None:
        self.props[key] = value

    def js_keys(self) -> list[str]:
        return list(self.props)

    def __repr__(self) -> str:
        return f"JSPlainObject({self.props!r})"


class JSArray(JSValue):
    js_class = "Array"

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.items: list[Any] = list(items)

    def js_get(self, key: str) -> Any:
        if key == "length":
            return len(self.items)
        if key.isdigit() and int(key) < len(self.items):
            return self.items[int(key)]
        return UNDEFINED

    def js_iter(self) -> Iterator[Any]:
        return iter(list(self.items))

    def __repr__(self) -> str:
        return f"JSArray({self.items!r})"


class JSMap(JSValue):
    """What `to_js(dict)` makes without `dict_converter`: entries are not properties."""

    js_class = "Map"

    def __init__(self, entries: dict[Any, Any]) -> None:
        self.entries = dict(entries)

    def js_get(self, key: str) -> Any:
        if key == "size":
            return len(self.entries)
        if key == "get":
            return JSFunction(lambda k=UNDEFINED: self.entries.get(k, UNDEFINED), "get")
        return UNDEFINED

    def js_iter(self) -> Iterator[Any]:
        return (JSArray([k, v]) for k, v in self.entries.items())


class JSSet(JSValue):
    js_class = "Set"

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = list(items)

    def js_iter(self) -> Iterator[Any]:
        return iter(list(self.items))


class JSArrayBuffer(JSValue):
    js_class = "ArrayBuffer"

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)

    def js_get(self, key: str) -> Any:
        return len(self.data) if key == "byteLength" else UNDEFINED


class JSUint8Array(JSValue):
    js_class = "Uint8Array"

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)

    def js_get(self, key: str) -> Any:
        if key in ("length", "byteLength"):
            return len(self.data)
        if key == "buffer":
            return JSArrayBuffer(self.data)
        return UNDEFINED

    def js_iter(self) -> Iterator[Any]:
        return iter(list(self.data))


class JSFunction(JSValue):
    js_class = "Function"

    def __init__(
        self,
        impl: Callable[..., Any] | None,
        name: str = "",
        construct: Callable[..., Any] | None = None,
        statics: dict[str, Any] | None = None,
    ) -> None:
        self.impl = impl
        self.name = name
        self.construct = construct
        self.statics = dict(statics or {})

    def js_get(self, key: str) -> Any:
        if key == "name":
            return self.name
        return self.statics.get(key, UNDEFINED)

    def js_callable(self) -> bool:
        return self.impl is not None

    def js_call(self, args: list[Any]) -> Any:
        if self.impl is None:
            raise JSError(
                "TypeError", f"Class constructor {self.name} cannot be invoked without 'new'"
            )
        return self.impl(*args)

    def js_construct(self, args: list[Any]) -> Any:
        if self.construct is None:
            raise JSError("TypeError", f"{self.name} is not a constructor")
        return self.construct(*args)


class JSPromise(JSValue):
    js_class = "Promise"

    def __init__(
        self,
        *,
        value: Any = UNDEFINED,
        error: JSError | None = None,
        task: asyncio.Future[Any] | None = None,
    ) -> None:
        self._value = value
        self._error = error
        self._task = task

    @classmethod
    def resolved(cls, value: Any) -> JSPromise:
        return cls(value=value)

    @classmethod
    def rejected(cls, error: JSError) -> JSPromise:
        return cls(error=error)

    @classmethod
    def from_awaitable(cls, awaitable: Any) -> JSPromise:
        async def run() -> Any:
            try:
                return py_to_js(await awaitable)
            except JSError:
                raise
            except Exception as exc:
                raise _python_error(exc) from exc

        return cls(task=asyncio.ensure_future(run()))

    def js_thenable(self) -> bool:
        return True

    def js_get(self, key: str) -> Any:
        if key in ("then", "catch", "finally"):
            return JSFunction(lambda *a: self, key)
        return UNDEFINED

    async def settle(self) -> Any:
        if self._task is not None:
            return await self._task
        if self._error is not None:
            raise self._error
        return self._value


class PyProxy(JSValue):
    """A Python object seen from JS."""

    js_class = "PyProxy"

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.destroyed = False

    def js_get(self, key: str) -> Any:
        if key == "destroy":
            return JSFunction(self._destroy, "destroy")
        if key == "getBuffer":
            return JSFunction(self._get_buffer, "getBuffer")
        # JS property access on a PyProxy is Python getattr: dict keys are NOT properties.
        try:
            return py_to_js(getattr(self.obj, key))
        except AttributeError:
            return UNDEFINED

    def _destroy(self) -> Any:
        self.destroyed = True
        return UNDEFINED

    def _get_buffer(self, *args: Any) -> Any:
        data = bytes(self.obj)
        return JSPlainObject({"data": JSUint8Array(data), "release": JSFunction(lambda: UNDEFINED)})

    def js_callable(self) -> bool:
        return callable(self.obj)

    def js_call(self, args: list[Any]) -> Any:
        try:
            result = self.obj(*[js_to_py(a) for a in args])
        except JSError:
            raise
        except Exception as exc:
            raise _python_error(exc) from exc
        return py_to_js(result)

    def js_iter(self) -> Iterator[Any] | None:
        try:
            items = iter(self.obj)
        except TypeError:
            return None
        return (py_to_js(item) for item in items)

    def js_thenable(self) -> bool:
        return asyncio.iscoroutine(self.obj) or isinstance(self.obj, asyncio.Future)


def _python_error(exc: BaseException) -> JSError:
    text = "".join(traceback.format_exception(exc))
    return JSError("PythonError", text, py_exc=exc)


def js_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expose a host-object method to JS (synchronous)."""
    fn._js_kind = "method"  # type: ignore[attr-defined]
    return fn


def js_async(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expose a host-object method to JS as an async function (returns a Promise)."""

    def wrapper(*args: Any) -> JSPromise:
        try:
            return JSPromise.resolved(fn(*args))
        except JSError as exc:
            return JSPromise.rejected(exc)

    wrapper._js_kind = "method"  # type: ignore[attr-defined]
    wrapper.__name__ = fn.__name__
    return wrapper


class js_property(property):
    """Expose a host-object attribute to JS."""


class JSHost(JSValue):
    """Base for host objects (bindings): JS sees decorated methods and js_properties."""

    def js_get(self, key: str) -> Any:
        attr = getattr(type(self), key, None)
        if isinstance(attr, js_property):
            return attr.fget(self) if attr.fget else UNDEFINED
        if attr is not None and getattr(attr, "_js_kind", None) == "method":
            return JSFunction(getattr(self, key), key)
        return UNDEFINED


def js_call(fn: Any, args: list[Any]) -> Any:
    """Call a JS callable (a JSFunction or a callable PyProxy) from the JS side."""
    if not isinstance(fn, JSValue) or not fn.js_callable():
        raise JSError("TypeError", f"{fn!r} is not a function")
    return fn.js_call(args)


def as_promise(value: Any) -> JSPromise:
    """`Promise.resolve(value)`: adopt promises and thenables (a PyProxy of a coroutine)."""
    if isinstance(value, JSPromise):
        return value
    if isinstance(value, PyProxy) and value.js_thenable():
        return JSPromise.from_awaitable(value.obj)
    return JSPromise.resolved(value)


def prop(obj: Any, key: str) -> Any:
    """`obj[key]` on the JS side (undefined for undefined/null, like optional chaining)."""
    if isinstance(obj, JSValue):
        return obj.js_get(key)
    return UNDEFINED


# --------------------------------------------------------------------------------------
# Conversions (Pyodide rules)
# --------------------------------------------------------------------------------------


class _Settings:
    # Pyodide 0.28 (Python 3.13) exposes jsnull; 0.26 (3.12) converts null to None.
    null_is_jsnull = True
    version = "0.28.2"


SETTINGS = _Settings()


def _js_number_to_py(value: int | float) -> int | float:
    if isinstance(value, int):  # includes bool
        return value
    if math.isfinite(value) and value.is_integer() and abs(value) <= PYODIDE_INT_LIMIT:
        return int(value)
    return value


def js_to_py(value: Any) -> Any:
    """Implicit JS -> Python conversion (results, attributes, callback arguments)."""
    if value is UNDEFINED:
        return None
    if value is NULL:
        return jsnull if SETTINGS.null_is_jsnull else None
    if isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        return _js_number_to_py(value)
    if isinstance(value, JSBigInt):
        return value.value
    if isinstance(value, PyProxy):
        return value.obj
    if isinstance(value, JSValue):
        return make_proxy(value)
    raise AssertionError(f"not a JS value: {value!r}")


def _py_number_to_js(value: int | float) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > PYODIDE_INT_LIMIT:
        return JSBigInt(value)
    return value


_NOT_SCALAR = object()


def _scalar_to_js(value: Any) -> Any:
    """The JS value of None, jsnull, str, bool, numbers and JsProxy; `_NOT_SCALAR` otherwise."""
    if value is None:
        return UNDEFINED
    if value is jsnull:
        return NULL
    if isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        return _py_number_to_js(value)
    if isinstance(value, JsProxy):
        return value._js
    return _NOT_SCALAR


def py_to_js(value: Any) -> Any:
    """Implicit Python -> JS conversion (call arguments, return values to JS)."""
    converted = _scalar_to_js(value)
    return PyProxy(value) if converted is _NOT_SCALAR else converted


def to_js(
    obj: Any,
    *,
    depth: int = -1,
    pyproxies: Any = None,
    create_pyproxies: bool = True,
    dict_converter: Any = None,
    default_converter: Callable[..., Any] | None = None,
    eager_converter: Any = None,
) -> Any:
    """`pyodide.ffi.to_js`: deep conversion; dicts become Maps unless a dict_converter."""

    def convert(value: Any) -> Any:
        scalar = _scalar_to_js(value)
        if scalar is not _NOT_SCALAR:
            return scalar
        if isinstance(value, dict):
            entries = [(k, convert(v)) for k, v in value.items()]
            if dict_converter is None:
                return JSMap(dict(entries))
            pairs = make_proxy(JSArray(JSArray([k, v]) for k, v in entries))
            return py_to_js(dict_converter(pairs))
        if isinstance(value, list | tuple):
            return JSArray(convert(v) for v in value)
        if isinstance(value, bytes | bytearray | memoryview):
            return JSUint8Array(bytes(value))
        if isinstance(value, set | frozenset):
            return JSSet(convert(v) for v in value)
        if default_converter is not None:
            converted = default_converter(value, lambda v: js_to_py(convert(v)), lambda *a: None)
            return py_to_js(converted)
        if not create_pyproxies:
            raise ValueError(f"cannot convert {value!r} without a PyProxy")
        return PyProxy(value)

    return js_to_py(convert(obj))


def _deep_to_py(value: Any, default_converter: Callable[..., Any] | None) -> Any:
    if value is UNDEFINED:
        return None
    if value is NULL:
        return jsnull if SETTINGS.null_is_jsnull else None
    if not isinstance(value, JSValue):
        return js_to_py(value)
    if isinstance(value, JSArray):
        return [_deep_to_py(v, default_converter) for v in value.items]
    if type(value) is JSPlainObject:
        return {k: _deep_to_py(v, default_converter) for k, v in value.props.items()}
    if isinstance(value, JSMap):
        return {k: _deep_to_py(v, default_converter) for k, v in value.entries.items()}
    if isinstance(value, JSSet):
        return {_deep_to_py(v, default_converter) for v in value.items}
    if isinstance(value, JSArrayBuffer | JSUint8Array):
        return memoryview(value.data)
    if isinstance(value, PyProxy):
        return value.obj
    proxy = make_proxy(value)
    if default_converter is not None:
        return default_converter(
            proxy, lambda v: _deep_to_py(py_to_js(v), default_converter), lambda *a: None
        )
    return proxy


# --------------------------------------------------------------------------------------
# pyodide.ffi: JsProxy and friends (the "Python side")
# --------------------------------------------------------------------------------------


class JsException(Exception):
    """`pyodide.ffi.JsException`: a JS error surfacing in Python."""

    def __init__(self, error: JSError) -> None:
        super().__init__(f"{error.name}: {error.message}")
        self.name = error.name
        self.message = error.message
        self.js_error = error


class JsProxy:
    """`pyodide.ffi.JsProxy` for objects without special capabilities."""

    __slots__ = ("_js",)

    def __init__(self, value: JSValue) -> None:
        object.__setattr__(self, "_js", value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name == "constructor":
            return make_proxy(JSFunction(None, self._js.js_class))
        value = self._js.js_get(name)
        if value is UNDEFINED:
            # Pyodide raises AttributeError for a property that is not there.
            raise AttributeError(name)
        return js_to_py(value)

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            self._js.js_set(name, py_to_js(value))
        except JSError as exc:
            raise JsException(exc) from None

    def __repr__(self) -> str:
        return f"<JsProxy {self._js.js_class} {self._js!r}>"

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        return _deep_to_py(self._js, default_converter)

    def new(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return js_to_py(self._js.js_construct(_call_args(args, kwargs)))
        except JSError as exc:
            raise JsException(exc) from None

    @property
    def js_id(self) -> int:
        return id(self._js)

    @property
    def typeof(self) -> str:
        return "function" if self._js.js_callable() else "object"

    def object_keys(self) -> list[str]:
        return self._js.js_keys()

    def as_object_map(self) -> dict[str, Any]:
        return {k: js_to_py(self._js.js_get(k)) for k in self._js.js_keys()}


def _call_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    converted = [py_to_js(a) for a in args]
    if kwargs:
        # Pyodide: keyword arguments become one trailing JS object.
        converted.append(JSPlainObject({k: py_to_js(v) for k, v in kwargs.items()}))
    return converted


class JsCallable(JsProxy):
    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return js_to_py(self._js.js_call(_call_args(args, kwargs)))
        except JSError as exc:
            raise JsException(exc) from None


class JsPromiseProxy(JsProxy):
    __slots__ = ()

    def __await__(self) -> Any:
        return self._settle().__await__()

    async def _settle(self) -> Any:
        assert isinstance(self._js, JSPromise)
        try:
            value = await self._js.settle()
        except JSError as exc:
            raise JsException(exc) from None
        return js_to_py(value)


class JsIterable(JsProxy):
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        items = self._js.js_iter()
        assert items is not None
        try:
            for item in items:
                yield js_to_py(item)
        except JSError as exc:
            raise JsException(exc) from None


class JsArray(JsIterable):
    __slots__ = ()

    def __len__(self) -> int:
        assert isinstance(self._js, JSArray)
        return len(self._js.items)

    def __getitem__(self, index: int) -> Any:
        assert isinstance(self._js, JSArray)
        return js_to_py(self._js.items[index])


class JsBuffer(JsIterable):
    __slots__ = ()

    def to_bytes(self) -> bytes:
        assert isinstance(self._js, JSArrayBuffer | JSUint8Array)
        return self._js.data

    def to_memoryview(self) -> memoryview:
        return memoryview(self.to_bytes())

    def __len__(self) -> int:
        return len(self.to_bytes())


class JsCallableIterable(JsCallable, JsIterable):
    __slots__ = ()


class JsNull(JsProxy):
    """`pyodide.ffi.jsnull`'s type (Pyodide 0.28)."""

    __slots__ = ()

    def __init__(self) -> None:
        object.__setattr__(self, "_js", None)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "jsnull"


jsnull: Any = JsNull()


def make_proxy(value: JSValue) -> JsProxy:
    """The JsProxy subclass Pyodide would pick for `value`'s capabilities."""
    if isinstance(value, JSArray):
        return JsArray(value)
    if isinstance(value, JSArrayBuffer | JSUint8Array):
        return JsBuffer(value)
    if value.js_thenable():
        return JsPromiseProxy(value)
    callable_ = value.js_callable()
    iterable = value.js_iter() is not None
    if callable_ and iterable:
        return JsCallableIterable(value)
    if callable_:
        return JsCallable(value)
    if iterable:
        return JsIterable(value)
    return JsProxy(value)


def create_proxy(obj: Any, *, capture_this: bool = False, roundtrip: bool = True) -> Any:
    return make_proxy(PyProxy(obj))


def create_once_callable(obj: Callable[..., Any], *, _may_syncify: bool = False) -> Any:
    return make_proxy(PyProxy(obj))


def destroy_proxies(proxies: Any) -> None:
    return None


# --------------------------------------------------------------------------------------
# JSON-ish reading of JS values inside host objects
# --------------------------------------------------------------------------------------


def js_to_data(value: Any, *, what: str = "value") -> Any:
    """Read a JS value as JSON data the way a binding serialises it (structured clone).

    PyProxies and Maps cannot be cloned: a Python dict sent without `to_js` (or converted
    to a Map) fails loudly here, as `DataCloneError` does in workerd.
    """
    if value is UNDEFINED or value is NULL:
        return None
    if isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        return _js_number_to_py(value)
    if isinstance(value, JSBigInt):
        raise JSError("TypeError", "Do not know how to serialize a BigInt")
    if isinstance(value, JSArray):
        return [js_to_data(v, what=what) for v in value.items]
    if type(value) is JSPlainObject:
        return {k: js_to_data(v, what=what) for k, v in value.props.items() if v is not UNDEFINED}
    if isinstance(value, JSUint8Array | JSArrayBuffer):
        return value.data
    raise JSError(
        "DataCloneError", f"{what}: {getattr(value, 'js_class', value)!r} could not be cloned"
    )


def data_to_js(value: Any) -> Any:
    """Build a JS value from JSON data (host results)."""
    if value is None:
        return NULL
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return JSPlainObject({k: data_to_js(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return JSArray(data_to_js(v) for v in value)
    if isinstance(value, bytes | bytearray | memoryview):
        return JSArrayBuffer(bytes(value))
    if isinstance(value, JSValue):
        return value
    raise AssertionError(f"not data: {value!r}")


# --------------------------------------------------------------------------------------
# Cloudflare bindings
# --------------------------------------------------------------------------------------


def _local_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a local adapter's method; its coroutines never suspend, so drive them inline."""
    result = fn(*args, **kwargs)
    if not asyncio.iscoroutine(result):
        return result
    try:
        result.send(None)
    except StopIteration as done:
        return done.value
    result.close()
    raise AssertionError(f"{fn!r} suspended; the fake cannot run it inline")


# ---- KV (backed by the local SQLite KV, whose rules and texts mirror workerd's) -------


class FakeKvNamespace(JSHost):
    """Workers KV: the JS face of `local_runtime.adapters.kv.SqliteKV`.

    The local adapter raises `BindingLimitError` with workerd's own text; here that text
    becomes the JS error a Worker would catch (`TypeError` for key names, `Error` for the
    service's `KV PUT failed: 4xx ...`).
    """

    js_class = "KvNamespace"

    def __init__(self, clock: FixedClock) -> None:
        from local_runtime.adapters.kv import SqliteKV

        self.clock = clock
        self.store = SqliteKV(":memory:", clock=clock)

    def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return _local_call(fn, *args, **kwargs)
        except BindingLimitError as exc:
            message = str(exc)
            raise JSError("Error" if message.startswith("KV ") else "TypeError", message) from None
        except TypeError as exc:
            raise JSError("TypeError", str(exc)) from None

    @staticmethod
    def _key(key: Any) -> str:
        if not isinstance(key, str):
            raise JSError("TypeError", f"KV keys must be strings, got {key!r}")
        return key

    @staticmethod
    def _number(value: Any) -> int | float | None:
        if value in (UNDEFINED, NULL):
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise JSError("TypeError", f"expected a number, got {value!r}")

    def entry(self, key: str) -> tuple[str, int | None, Any] | None:
        """Test helper: (value, expiration, metadata) of a live key, or None."""
        try:
            page = _local_call(self.store.list, prefix=key)
        except BindingLimitError:  # not a key KV could hold
            return None
        for item in page.keys:
            if item.name == key:
                return _local_call(self.store.get, key), item.expiration, item.metadata
        return None

    @js_async
    def get(self, key: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        kind = options if isinstance(options, str) else prop(options, "type")
        value = self._run(self.store.get, self._key(key))
        if value is None:
            return NULL
        return data_to_js(json.loads(value)) if kind == "json" else value

    @js_async
    def getWithMetadata(self, key: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        got = self._run(self.store.get_with_metadata, self._key(key))
        return JSPlainObject(
            {
                "value": NULL if got.value is None else got.value,
                "metadata": data_to_js(got.metadata),
                "cacheStatus": NULL,
            }
        )

    @js_async
    def put(self, key: Any = UNDEFINED, value: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        if isinstance(value, JSUint8Array | JSArrayBuffer):
            value = value.data.decode()
        if not isinstance(value, str):
            raise JSError(
                "TypeError",
                "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and "
                "ReadableStreams as values.",
            )
        metadata = prop(options, "metadata")
        self._run(
            self.store.put,
            self._key(key),
            value,
            expiration_ttl=self._number(prop(options, "expirationTtl")),
            expiration=self._number(prop(options, "expiration")),
            metadata=None if metadata in (UNDEFINED, NULL) else js_to_data(metadata),
        )
        return UNDEFINED

    @js_async
    def delete(self, key: Any = UNDEFINED) -> Any:
        self._run(self.store.delete, self._key(key))
        return UNDEFINED

    @js_async
    def list(self, options: Any = UNDEFINED) -> Any:
        prefix = prop(options, "prefix")
        limit = self._number(prop(options, "limit"))
        cursor = prop(options, "cursor")
        page = self._run(
            self.store.list,
            prefix=prefix if isinstance(prefix, str) else "",
            limit=1000 if limit is None else int(limit),
            cursor=cursor if isinstance(cursor, str) else None,
        )
        keys = []
        for item in page.keys:
            entry: dict[str, Any] = {"name": item.name}
            if item.expiration is not None:
                entry["expiration"] = item.expiration
            if item.metadata is not None:
                entry["metadata"] = item.metadata
            keys.append(entry)
        result: dict[str, Any] = {
            "keys": keys,
            "list_complete": page.list_complete,
            "cacheStatus": None,
        }
        if not page.list_complete:
            result["cursor"] = page.cursor
        return data_to_js(result)


# ---- D1 (backed by the local D1: d1-api.ts binding rules on workerd's SQLite layer) ---


def _d1_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    from bindings.ports.d1 import D1Error

    try:
        return _local_call(fn, *args, **kwargs)
    except D1Error as exc:
        raise JSError("Error", str(exc)) from None
    except TypeError as exc:
        raise JSError("TypeError", str(exc)) from None


def _d1_result(result: Any) -> Any:
    meta = {
        "served_by": "fake-d1",
        "changed_db": result.meta.changes > 0,
        **dataclasses.asdict(result.meta),
    }
    return data_to_js({"success": True, "meta": meta, "results": result.results})


class FakeD1Database(JSHost):
    """D1: the JS face of `local_runtime.adapters.d1.SqliteD1`."""

    js_class = "D1Database"

    def __init__(self) -> None:
        from local_runtime.adapters.d1 import SqliteD1

        self.db = SqliteD1(":memory:")

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Test helper: rows of a statement run directly on the database."""
        return list(_local_call(self.db.prepare(sql).all).results)

    @js_method
    def prepare(self, query: Any = UNDEFINED) -> Any:
        if not isinstance(query, str):
            raise JSError("TypeError", "D1Database.prepare: query must be a string")
        return FakeD1PreparedStatement(self.db.prepare(query))

    @js_async
    def batch(self, statements: Any = UNDEFINED) -> Any:
        if not isinstance(statements, JSArray) or not all(
            isinstance(s, FakeD1PreparedStatement) for s in statements.items
        ):
            raise JSError("TypeError", "batch() expects an array of D1PreparedStatement")
        results = _d1_call(self.db.batch, [s.statement for s in statements.items])
        return JSArray(_d1_result(r) for r in results)


def _d1_param(value: Any) -> Any:
    """The value d1-api.ts's bind() would see, in the local D1's Python terms."""
    if value is UNDEFINED:
        raise JSError(
            "Error", "D1_TYPE_ERROR: Type 'undefined' not supported for value 'undefined'"
        )
    if value is NULL:
        return None
    if isinstance(value, JSBigInt):
        return value.value  # the local D1 refuses it with D1's 'bigint' text
    if isinstance(value, JSUint8Array | JSArrayBuffer):
        return value.data
    if isinstance(value, JSArray):
        return [_d1_param(v) for v in value.items]
    if type(value) is JSPlainObject:
        return {k: _d1_param(v) for k, v in value.props.items()}
    if isinstance(value, PyProxy):
        return value.obj
    return value


class FakeD1PreparedStatement(JSHost):
    js_class = "D1PreparedStatement"

    def __init__(self, statement: Any) -> None:
        self.statement = statement

    @js_method
    def bind(self, *values: Any) -> Any:
        params = [_d1_param(v) for v in values]
        return FakeD1PreparedStatement(_d1_call(self.statement.bind, *params))

    @js_async
    def all(self) -> Any:
        return _d1_result(_d1_call(self.statement.all))

    @js_async
    def run(self) -> Any:
        return _d1_result(_d1_call(self.statement.run))

    @js_async
    def first(self, column: Any = UNDEFINED) -> Any:
        if column is UNDEFINED:
            return data_to_js(_d1_call(self.statement.first))
        return data_to_js(_d1_call(self.statement.first_value, column))


# ---- Durable Object storage (backed by the local DO storage: workerd's SQL rules) -----


def _do_param(value: Any) -> Any:
    """A JS binding as workerd's SqlStorage sees it, in the local storage's Python terms.

    Deviation: workerd stores a JS boolean as the text 'true'/'false'; the local storage
    (and so this fake) refuses booleans outright.
    """
    if value is UNDEFINED or value is NULL:
        return None
    if isinstance(value, JSBigInt):
        return value.value  # refused with workerd's BigInt text
    if isinstance(value, JSUint8Array | JSArrayBuffer):
        return value.data
    if isinstance(value, str | int | float):
        return value
    raise JSError("TypeError", f"Unsupported SQL binding {value!r}")


class FakeDurableObjectStorage(JSHost):
    """`ctx.storage`: the JS face of `local_runtime.adapters.do_sql.LocalDurableObjectStorage`."""

    js_class = "DurableObjectStorage"

    def __init__(self) -> None:
        from local_runtime.adapters.do_sql import LocalDurableObjectStorage

        self.local = LocalDurableObjectStorage(":memory:")
        self._sql = FakeSqlStorage(self)

    def table_names(self) -> set[str]:
        """Test helper: the tables that exist."""
        rows = self.local.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(row["name"]) for row in rows}

    @js_property
    def sql(self) -> Any:
        return self._sql

    @js_method
    def transactionSync(self, callback: Any = UNDEFINED) -> Any:
        if not isinstance(callback, JSValue) or not callback.js_callable():
            raise JSError("TypeError", "transactionSync() requires a function")
        try:
            return self.local.transaction_sync(lambda: js_call(callback, []))
        except BindingError as exc:
            raise JSError("Error", str(exc)) from None


class FakeSqlStorage(JSHost):
    js_class = "SqlStorage"

    def __init__(self, storage: FakeDurableObjectStorage) -> None:
        self.storage = storage

    @js_property
    def databaseSize(self) -> Any:
        return self.storage.local.sql.database_size

    @js_method
    def exec(self, query: Any = UNDEFINED, *bindings: Any) -> Any:
        if not isinstance(query, str):
            raise JSError("TypeError", "SqlStorage.exec: query must be a string")
        params = [_do_param(b) for b in bindings]
        try:
            return FakeSqlCursor(self.storage.local.sql.exec(query, *params))
        except BindingError as exc:
            raise JSError("Error", str(exc)) from None


class FakeSqlCursor(JSHost):
    """A single-pass cursor (int64 already arrives as a double from the local storage)."""

    js_class = "Cursor"  # workerd's name for it (printed inside workerd)

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    @js_method
    def toArray(self) -> Any:
        return JSArray(data_to_js(row) for row in self.cursor.to_array())

    @js_method
    def one(self) -> Any:
        try:
            return data_to_js(self.cursor.one())
        except BindingError as exc:
            raise JSError("Error", str(exc)) from None

    def js_iter(self) -> Iterator[Any]:
        return (data_to_js(row) for row in self.cursor)

    @js_property
    def rowsWritten(self) -> Any:
        return self.cursor.rows_written


# ---- Vectorize and Workers AI: tested in real Pyodide against JS models ---------------
# (tests/pyodide/models.mjs, tests/pyodide/py/test_ai_vectorize.py). Here they are only
# opaque bindings, for tests that need a deployment to have them.


class FakeOpaqueBinding(JSHost):
    """A binding object with no behaviour (`env.AI`, `env.VECTORIZE` in app-level tests)."""

    def __init__(self, js_class: str) -> None:
        self.js_class = js_class  # type: ignore[misc]


# ---- Durable Objects: namespace, stubs, state ------------------------------------------


# Pyodide's text when JS uses a borrowed proxy after the call that made it returned.
BORROWED_PROXY_DESTROYED = (
    "This borrowed proxy was automatically destroyed at the end of a function call. "
    "Try using create_proxy or create_once_callable."
)


class FakeExecutionContext(JSHost):
    js_class = "ExecutionContext"

    def __init__(self) -> None:
        self.pending: list[JSPromise] = []
        self.patched = False

    @js_method
    def waitUntil(self, promise: Any = UNDEFINED) -> Any:
        if isinstance(promise, PyProxy) and promise.js_thenable() and not self.patched:
            # Unpatched (a DurableObjectState, or no SDK): workerd then-s the argument in a
            # later microtask, when Pyodide has already destroyed the borrowed proxy of the
            # coroutine; the work never runs (pinned against real Pyodide by
            # tests/pyodide/py/test_background.py and test_durable_objects_and_background.py).
            if hasattr(promise.obj, "close"):
                promise.obj.close()
            self.pending.append(JSPromise.rejected(JSError("Error", BORROWED_PROXY_DESTROYED)))
            return UNDEFINED
        self.pending.append(as_promise(promise))
        return UNDEFINED

    @js_method
    def passThroughOnException(self) -> Any:
        return UNDEFINED

    @js_property
    def props(self) -> Any:
        return JSPlainObject()

    async def drain(self) -> list[Any]:
        """Settle every waitUntil promise; returns their outcomes (values or JSErrors)."""
        outcomes: list[Any] = []
        while self.pending:
            promise = self.pending.pop(0)
            try:
                outcomes.append(await promise.settle())
            except JSError as exc:
                outcomes.append(exc)
        return outcomes


class FakeDurableObjectId(JSHost):
    js_class = "DurableObjectId"

    def __init__(self, name: str) -> None:
        self.name = name

    @js_property
    def id_name(self) -> Any:
        return self.name

    @js_method
    def toString(self) -> Any:
        return hashlib.sha256(self.name.encode()).hexdigest()


class FakeDurableObjectState(FakeExecutionContext):
    js_class = "DurableObjectState"

    def __init__(self, name: str, storage: FakeDurableObjectStorage | None = None) -> None:
        super().__init__()
        self.storage_obj = storage or FakeDurableObjectStorage()
        self.object_id = FakeDurableObjectId(name)
        self.blockers: list[JSPromise] = []

    @js_property
    def storage(self) -> Any:
        return self.storage_obj

    @js_property
    def id(self) -> Any:
        return self.object_id

    @js_method
    def blockConcurrencyWhile(self, callback: Any = UNDEFINED) -> Any:
        promise = as_promise(js_call(callback, []))
        self.blockers.append(promise)
        return promise

    async def input_gate(self) -> None:
        """Wait for every blockConcurrencyWhile callback (no event is delivered before)."""
        while self.blockers:
            await self.blockers.pop(0).settle()


def structured_clone(value: Any) -> Any:
    """RPC serialisation: plain data only (PyProxies raise DataCloneError)."""
    return data_to_js(js_to_data(value, what="RPC value"))


class FakeDurableObjectHost:
    """Runs a Python `DurableObject` subclass like workerd's Python entrypoint wrapper:
    constructor with (state, env), RPC args through `python_from_rpc`, results through
    `python_to_rpc`, and no call delivered before blockConcurrencyWhile finishes."""

    def __init__(self, cls: type, name: str, env: JSValue) -> None:
        self.state = FakeDurableObjectState(name)
        self.instance = cls(make_proxy(self.state), make_proxy(env))

    async def rpc(self, method: str, args: list[Any]) -> Any:
        import workers

        await self.state.input_gate()
        target = getattr(self.instance, method, None)
        if target is None or method.startswith("_"):
            raise JSError(
                "TypeError", f'The RPC receiver does not implement the method "{method}".'
            )
        py_args = [workers.python_from_rpc(js_to_py(structured_clone(a))) for a in args]
        try:
            result = target(*py_args)
            if asyncio.iscoroutine(result):
                result = await result
        except Exception as exc:
            raise JSError("Error", f"{type(exc).__name__}: {exc}") from exc
        return structured_clone(py_to_js(workers.python_to_rpc(result)))


class FakeDurableObjectStub(JSHost):
    """An RPC stub: any property is a remote method."""

    js_class = "DurableObject"

    def __init__(self, namespace: FakeDurableObjectNamespace, name: str) -> None:
        self.namespace = namespace
        self.name = name

    def js_get(self, key: str) -> Any:
        if key in ("then", "constructor"):
            return UNDEFINED
        if key == "fetch":
            return UNDEFINED

        def remote(*args: Any) -> Any:
            sent = [structured_clone(a) for a in args]

            async def deliver() -> Any:
                return await self.namespace.deliver(self.name, key, sent)

            return JSPromise(task=asyncio.ensure_future(deliver()))

        return JSFunction(remote, key)


class FakeDurableObjectNamespace(JSHost):
    js_class = "DurableObjectNamespace"

    def __init__(self, handler: Callable[[str, str, list[Any]], Any] | None = None) -> None:
        # Either a Python DurableObject class (set with `serve`) or a plain handler
        # `(name, method, js_args) -> js_value` for adapter tests.
        self.handler = handler
        self.cls: type | None = None
        self.env: JSValue | None = None
        self.hosts: dict[str, FakeDurableObjectHost] = {}
        self.calls: list[tuple[str, str, Any]] = []

    def serve(self, cls: type, env: JSValue) -> None:
        self.cls = cls
        self.env = env

    async def deliver(self, name: str, method: str, args: list[Any]) -> Any:
        self.calls.append((name, method, [js_to_data(a) for a in args]))
        if self.handler is not None:
            return structured_clone(self.handler(name, method, args))
        assert self.cls is not None and self.env is not None
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = FakeDurableObjectHost(self.cls, name, self.env)
        return await host.rpc(method, args)

    @js_method
    def getByName(self, name: Any = UNDEFINED) -> Any:
        if not isinstance(name, str):
            raise JSError("TypeError", "getByName() requires a string")
        return FakeDurableObjectStub(self, name)

    @js_method
    def idFromName(self, name: Any = UNDEFINED) -> Any:
        return FakeDurableObjectId(str(name))

    @js_method
    def get(self, object_id: Any = UNDEFINED) -> Any:
        if not isinstance(object_id, FakeDurableObjectId):
            raise JSError("TypeError", "get() requires a DurableObjectId")
        return FakeDurableObjectStub(self, object_id.name)


class FakeScheduledController(JSHost):
    js_class = "ScheduledController"

    def __init__(self, cron: str, scheduled_time_ms: float) -> None:
        self.cron_expr = cron
        self.time_ms = scheduled_time_ms
        self.no_retry = False

    @js_property
    def cron(self) -> Any:
        return self.cron_expr

    @js_property
    def scheduledTime(self) -> Any:
        return self.time_ms

    @js_property
    def type(self) -> Any:
        return "scheduled"

    @js_method
    def noRetry(self) -> Any:
        self.no_retry = True
        return UNDEFINED


# ---- fetch API: Headers, Request, Response ---------------------------------------------

_NULL_BODY_STATUSES = {101, 204, 205, 304}


class FakeHeaders(JSHost):
    js_class = "Headers"

    def __init__(self, init: Any = UNDEFINED) -> None:
        self.entries: list[tuple[str, str]] = []
        pairs: Iterable[Any]
        if init in (UNDEFINED, NULL):
            pairs = []
        elif isinstance(init, FakeHeaders):
            pairs = [JSArray(p) for p in init.entries]
        elif isinstance(init, JSValue) and init.js_iter() is not None:
            pairs = list(init.js_iter() or [])
        elif type(init) is JSPlainObject:
            pairs = [JSArray([k, v]) for k, v in init.props.items()]
        else:
            raise JSError("TypeError", f"Failed to construct 'Headers': {init!r}")
        for pair in pairs:
            items = list(pair.js_iter() or []) if isinstance(pair, JSValue) else []
            if len(items) != 2:
                raise JSError("TypeError", "Headers pairs must have exactly two items")
            self.entries.append((str(items[0]).lower(), str(items[1])))

    @js_method
    def get(self, name: Any = UNDEFINED) -> Any:
        values = [v for k, v in self.entries if k == str(name).lower()]
        return ", ".join(values) if values else NULL

    @js_method
    def has(self, name: Any = UNDEFINED) -> Any:
        return any(k == str(name).lower() for k, _ in self.entries)

    @js_method
    def set(self, name: Any = UNDEFINED, value: Any = UNDEFINED) -> Any:
        key = str(name).lower()
        self.entries = [(k, v) for k, v in self.entries if k != key] + [(key, str(value))]
        return UNDEFINED

    @js_method
    def append(self, name: Any = UNDEFINED, value: Any = UNDEFINED) -> Any:
        self.entries.append((str(name).lower(), str(value)))
        return UNDEFINED

    @js_method
    def getSetCookie(self) -> Any:
        return JSArray(v for k, v in self.entries if k == "set-cookie")

    def js_iter(self) -> Iterator[Any]:
        combined: dict[str, list[str]] = {}
        for key, value in self.entries:
            combined.setdefault(key, []).append(value)
        out = []
        for key in sorted(combined):
            if key == "set-cookie":
                out.extend(JSArray([key, v]) for v in combined[key])
            else:
                out.append(JSArray([key, ", ".join(combined[key])]))
        return iter(out)


def _body_bytes(body: Any) -> bytes | None:
    if body in (UNDEFINED, NULL):
        return None
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, JSUint8Array | JSArrayBuffer):
        return body.data
    raise JSError("TypeError", f"unsupported body {body!r}")


class FakeReadableStream(JSHost):
    """A body's `ReadableStream`: one reader at a time, which consumes the body (it is
    then `bodyUsed`) and gets it in chunks, as workerd delivers a body in pieces
    (`worker.entry.read_body` reads it that way to stop at the size limit)."""

    js_class = "ReadableStream"
    CHUNK_BYTES = 16 * 1024

    def __init__(self, owner: _FakeBody) -> None:
        self.owner = owner
        self.reader: FakeStreamReader | None = None
        self.bytes_read = 0  # what readers took from it so far
        self.cancelled = False

    @js_property
    def locked(self) -> Any:
        return self.reader is not None

    @js_method
    def getReader(self) -> Any:
        if self.reader is not None:
            raise JSError("TypeError", "This ReadableStream is currently locked to a reader.")
        self.reader = FakeStreamReader(self, self.owner._consume())
        return self.reader


class FakeStreamReader(JSHost):
    js_class = "ReadableStreamDefaultReader"

    def __init__(self, stream: FakeReadableStream, data: bytes) -> None:
        self.stream = stream
        self.data = data
        self.offset = 0
        self.cancelled = False

    @js_async
    def read(self) -> Any:
        if self.cancelled or self.offset >= len(self.data):
            return JSPlainObject({"done": True, "value": UNDEFINED})
        chunk = self.data[self.offset : self.offset + FakeReadableStream.CHUNK_BYTES]
        self.offset += len(chunk)
        self.stream.bytes_read += len(chunk)
        return JSPlainObject({"done": False, "value": JSUint8Array(chunk)})

    @js_async
    def cancel(self, reason: Any = UNDEFINED) -> Any:
        self.cancelled = self.stream.cancelled = True
        return UNDEFINED

    @js_method
    def releaseLock(self) -> Any:
        self.stream.reader = None
        return UNDEFINED


class _FakeBody(JSHost):
    def __init__(self, body: bytes | None) -> None:
        self.body_data = body
        self.used = False
        self.stream: FakeReadableStream | None = None

    def _consume(self) -> bytes:
        if self.used:
            raise JSError("TypeError", "Body has already been used.")
        self.used = True
        return self.body_data or b""

    @js_property
    def bodyUsed(self) -> Any:
        return self.used

    @js_property
    def body(self) -> Any:
        if self.body_data is None:
            return NULL
        if self.stream is None:
            self.stream = FakeReadableStream(self)
        return self.stream

    @js_async
    def arrayBuffer(self) -> Any:
        return JSArrayBuffer(self._consume())

    @js_async
    def text(self) -> Any:
        return self._consume().decode()


class FakeRequest(_FakeBody):
    js_class = "Request"

    def __init__(
        self,
        url: str,
        method: str = "GET",
        headers: FakeHeaders | None = None,
        body: bytes | None = None,
    ) -> None:
        super().__init__(body)
        self.url_value = url
        self.method_value = method.upper()
        self.headers_obj = headers or FakeHeaders()

    @js_property
    def url(self) -> Any:
        return self.url_value

    @js_property
    def method(self) -> Any:
        return self.method_value

    @js_property
    def headers(self) -> Any:
        return self.headers_obj

    @js_property
    def cf(self) -> Any:
        return UNDEFINED


class FakeResponse(_FakeBody):
    js_class = "Response"

    def __init__(self, body: Any = UNDEFINED, init: Any = UNDEFINED) -> None:
        data = _body_bytes(body)
        status = prop(init, "status")
        status = 200 if status is UNDEFINED else status
        if not isinstance(status, int) or (not 200 <= status <= 599 and status != 101):
            raise JSError("RangeError", f"Response status must be 200..599, got {status!r}")
        if data is not None and status in _NULL_BODY_STATUSES:
            raise JSError("TypeError", "Response with null body status cannot have body")
        super().__init__(data)
        self.status_value = status
        self.status_text = (
            prop(init, "statusText") if isinstance(prop(init, "statusText"), str) else ""
        )
        headers = prop(init, "headers")
        self.headers_obj = headers if isinstance(headers, FakeHeaders) else FakeHeaders(headers)

    @js_property
    def status(self) -> Any:
        return self.status_value

    @js_property
    def statusText(self) -> Any:
        return self.status_text

    @js_property
    def ok(self) -> Any:
        return 200 <= self.status_value <= 299

    @js_property
    def headers(self) -> Any:
        return self.headers_obj

    @js_property
    def url(self) -> Any:
        return ""

    @js_property
    def type(self) -> Any:
        return "default"

    @js_property
    def redirected(self) -> Any:
        return False


# --------------------------------------------------------------------------------------
# Module objects and installation
# --------------------------------------------------------------------------------------


class FetchResponse:
    """`pyodide.http.FetchResponse` (the subset the SDK's Response builds on)."""

    def __init__(self, url: str, js_response: Any) -> None:
        self._url = url
        self.js_response = js_response

    @property
    def url(self) -> str:
        return self._url

    @property
    def status(self) -> int:
        return int(self.js_response.status)

    @property
    def ok(self) -> bool:
        return bool(self.js_response.ok)

    @property
    def status_text(self) -> str:
        return str(self.js_response.statusText)

    @property
    def body_used(self) -> bool:
        return bool(self.js_response.bodyUsed)

    def _raise_if_failed(self) -> None:
        if self.body_used:
            raise OSError("Body already used")

    async def buffer(self) -> Any:
        self._raise_if_failed()
        return await self.js_response.arrayBuffer()

    async def bytes(self) -> bytes:
        return bytes((await self.buffer()).to_bytes())

    async def text(self) -> str:
        return (await self.bytes()).decode()

    async def json(self, **kwargs: Any) -> Any:
        return json.loads(await self.text(), **kwargs)


async def pyfetch(url: str, **kwargs: Any) -> FetchResponse:
    raise OSError("the fake runtime has no network")


def _object_from_entries(entries: Any) -> Any:
    props = {}
    for pair in entries.js_iter() or []:
        items = list(pair.js_iter() or [])
        props[str(items[0])] = items[1]
    return JSPlainObject(props)


def _js_globals() -> dict[str, Any]:
    def json_parse(text: Any = UNDEFINED) -> Any:
        return data_to_js(json.loads(text))

    def json_stringify(value: Any = UNDEFINED) -> Any:
        return json.dumps(js_to_data(value))

    def date(ms: Any = UNDEFINED) -> Any:
        moment = JSPlainObject({"ms": ms})
        moment.js_class = "Date"  # type: ignore[misc]
        moment.props["getTime"] = JSFunction(lambda: ms, "getTime")
        return moment

    def error(message: Any = UNDEFINED) -> Any:
        err = JSPlainObject({"message": message, "name": "Error"})
        err.js_class = "Error"  # type: ignore[misc]
        return err

    def promise(executor: Any = UNDEFINED) -> Any:
        # `new Promise(executor)`: the executor runs now, with resolve/reject functions.
        settled: asyncio.Future[Any] = asyncio.get_event_loop().create_future()

        def resolve(value: Any = UNDEFINED) -> Any:
            if not settled.done():
                settled.set_result(value)
            return UNDEFINED

        def reject(reason: Any = UNDEFINED) -> Any:
            if not settled.done():
                message = prop(reason, "message") if isinstance(reason, JSValue) else reason
                settled.set_exception(JSError("Error", str(message)))
            return UNDEFINED

        js_call(executor, [JSFunction(resolve, "resolve"), JSFunction(reject, "reject")])
        return JSPromise(task=settled)

    return {
        "Promise": JSFunction(None, "Promise", construct=promise),
        "Object": JSFunction(
            lambda v=UNDEFINED: v,
            "Object",
            construct=lambda *a: JSPlainObject(),
            statics={
                "fromEntries": JSFunction(_object_from_entries, "fromEntries"),
                "keys": JSFunction(lambda o: JSArray(o.js_keys()), "keys"),
            },
        ),
        "Array": JSFunction(
            lambda *a: JSArray(a),
            "Array",
            construct=lambda *a: JSArray(a),
            statics={"isArray": JSFunction(lambda v=UNDEFINED: isinstance(v, JSArray), "isArray")},
        ),
        "JSON": JSPlainObject(
            {
                "parse": JSFunction(json_parse, "parse"),
                "stringify": JSFunction(json_stringify, "stringify"),
            }
        ),
        "Date": JSFunction(None, "Date", construct=date),
        "Error": JSFunction(error, "Error", construct=error),
        "Headers": JSFunction(None, "Headers", construct=lambda init=UNDEFINED: FakeHeaders(init)),
        "Request": JSFunction(
            None,
            "Request",
            construct=lambda url, init=UNDEFINED: FakeRequest(
                str(url),
                str(prop(init, "method")) if isinstance(prop(init, "method"), str) else "GET",
                FakeHeaders(prop(init, "headers")),
                _body_bytes(prop(init, "body")),
            ),
        ),
        "Response": JSFunction(
            None,
            "Response",
            construct=lambda body=UNDEFINED, init=UNDEFINED: FakeResponse(body, init),
        ),
        "Uint8Array": JSFunction(None, "Uint8Array", construct=lambda data=b"": JSUint8Array(data)),
        "queueMicrotask": JSFunction(lambda cb=UNDEFINED: UNDEFINED, "queueMicrotask"),
    }


_MODULE_NAMES = (
    "js",
    "pyodide",
    "pyodide.ffi",
    "pyodide.http",
    "_pyodide_entrypoint_helper",
    "_cloudflare_compat_flags",
)
# Modules that captured fake objects at import time and must be re-imported per runtime.
_DEPENDENT_PREFIXES = ("workers", "bindings.cloudflare", "worker.entry")


class FakeJsRuntime:
    """Installs the fake modules in `sys.modules` and builds binding objects.

    Use as a context manager (or `install()`/`uninstall()`); afterwards `import js`,
    `import pyodide.ffi` and `import workers` (the real SDK) work under CPython.
    """

    def __init__(self, *, pyodide_version: str = "0.28.2") -> None:
        self.pyodide_version = pyodide_version
        self.null_is_jsnull = not pyodide_version.startswith("0.26")
        self.clock = FixedClock()
        self._saved: dict[str, types.ModuleType] = {}
        self._saved_settings: tuple[bool, str] | None = None

    # ---- installation
    def install(self) -> FakeJsRuntime:
        self._saved_settings = (SETTINGS.null_is_jsnull, SETTINGS.version)
        SETTINGS.null_is_jsnull = self.null_is_jsnull
        SETTINGS.version = self.pyodide_version
        self._purge_dependents()
        for name in _MODULE_NAMES:
            if name in sys.modules:
                self._saved[name] = sys.modules[name]
        for name, module in self._modules().items():
            sys.modules[name] = module
        return self

    def uninstall(self) -> None:
        self._purge_dependents()
        for name in _MODULE_NAMES:
            sys.modules.pop(name, None)
        sys.modules.update(self._saved)
        self._saved.clear()
        if self._saved_settings is not None:
            SETTINGS.null_is_jsnull, SETTINGS.version = self._saved_settings

    def __enter__(self) -> FakeJsRuntime:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @staticmethod
    def _purge_dependents() -> None:
        for name in list(sys.modules):
            if any(name == p or name.startswith(p + ".") for p in _DEPENDENT_PREFIXES):
                del sys.modules[name]
                parent, _, child = name.rpartition(".")
                if parent in sys.modules:
                    with suppress(AttributeError):
                        delattr(sys.modules[parent], child)

    def _modules(self) -> dict[str, types.ModuleType]:
        js_module = types.ModuleType("js")
        for name, value in _js_globals().items():
            setattr(js_module, name, js_to_py(value))

        pyodide = types.ModuleType("pyodide")
        pyodide.__version__ = self.pyodide_version  # type: ignore[attr-defined]
        pyodide.__path__ = []  # type: ignore[attr-defined]  # a package

        ffi = types.ModuleType("pyodide.ffi")
        exported: dict[str, Any] = {
            "JsProxy": JsProxy,
            "JsException": JsException,
            "JsBuffer": JsBuffer,
            "JsArray": JsArray,
            "JsCallable": JsCallable,
            "JsIterable": JsIterable,
            "to_js": to_js,
            "create_proxy": create_proxy,
            "create_once_callable": create_once_callable,
            "destroy_proxies": destroy_proxies,
        }
        if self.null_is_jsnull:
            exported["jsnull"] = jsnull
            exported["JsNull"] = JsNull
        for name, value in exported.items():
            setattr(ffi, name, value)

        http = types.ModuleType("pyodide.http")
        http.FetchResponse = FetchResponse  # type: ignore[attr-defined]
        http.pyfetch = pyfetch  # type: ignore[attr-defined]
        pyodide.ffi = ffi  # type: ignore[attr-defined]
        pyodide.http = http  # type: ignore[attr-defined]

        helper = types.ModuleType("_pyodide_entrypoint_helper")

        def patch_wait_until(ctx: Any) -> None:
            # workerd patches only an `[object ExecutionContext]` (the toString tag check in
            # python-entrypoint-helper.ts): a DurableObjectState stays unpatched.
            if (
                isinstance(ctx, JsProxy)
                and getattr(ctx._js, "js_class", None) == "ExecutionContext"
            ):
                ctx._js.patched = True

        async def do_an_import(name: str) -> Any:
            raise ImportError(f"the fake runtime cannot import {name}")

        helper.patchWaitUntil = patch_wait_until  # type: ignore[attr-defined]
        helper.doAnImport = do_an_import  # type: ignore[attr-defined]
        helper.cloudflareWorkersModule = None  # type: ignore[attr-defined]
        helper.cloudflareSocketsModule = None  # type: ignore[attr-defined]

        flags = types.ModuleType("_cloudflare_compat_flags")
        flags.python_workflows_implicit_dependencies = False  # type: ignore[attr-defined]
        flags.python_request_headers_preserve_commas = True  # type: ignore[attr-defined]

        return {
            "js": js_module,
            "pyodide": pyodide,
            "pyodide.ffi": ffi,
            "pyodide.http": http,
            "_pyodide_entrypoint_helper": helper,
            "_cloudflare_compat_flags": flags,
        }

    # ---- building JS objects
    @staticmethod
    def proxy(value: JSValue) -> Any:
        """The raw-mode view of a JS object: a bare JsProxy."""
        return make_proxy(value)

    def wrapped(self, value: JSValue) -> Any:
        """The wrapped-mode view: the binding as the SDK's `_EnvWrapper` hands it out."""
        import workers

        env = workers._EnvWrapper(make_proxy(JSPlainObject({"BINDING": value})))
        return env.BINDING

    def wrapped_storage(self, storage: FakeDurableObjectStorage) -> Any:
        """`ctx.storage` as a Durable Object sees it through the SDK's DurableObjectContext."""
        from workers.entrypoints import DurableObjectContext

        state = FakeDurableObjectState("wrapped", storage)
        return DurableObjectContext(make_proxy(state)).storage

    def kv(self) -> FakeKvNamespace:
        return FakeKvNamespace(self.clock)

    @staticmethod
    def d1() -> FakeD1Database:
        return FakeD1Database()

    @staticmethod
    def do_storage() -> FakeDurableObjectStorage:
        return FakeDurableObjectStorage()

    @staticmethod
    def vectorize(dimensions: int = 384) -> FakeOpaqueBinding:
        return FakeOpaqueBinding("VectorizeIndexImpl")

    @staticmethod
    def ai() -> FakeOpaqueBinding:
        return FakeOpaqueBinding("Ai")

    @staticmethod
    def do_namespace(
        handler: Callable[[str, str, list[Any]], Any] | None = None,
    ) -> FakeDurableObjectNamespace:
        return FakeDurableObjectNamespace(handler)

    @staticmethod
    def execution_context() -> FakeExecutionContext:
        return FakeExecutionContext()

    @staticmethod
    def env(**members: Any) -> JSPlainObject:
        """A Worker `env`: bindings (JS objects) and vars (strings)."""
        return JSPlainObject({k: v for k, v in members.items() if v is not None})

    @staticmethod
    def request(
        url: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> FakeRequest:
        pairs = JSArray(JSArray([k, v]) for k, v in (headers or {}).items())
        return FakeRequest(url, method, FakeHeaders(pairs), body)

    @staticmethod
    def controller(cron: str, scheduled_time_ms: float) -> FakeScheduledController:
        return FakeScheduledController(cron, scheduled_time_ms)
