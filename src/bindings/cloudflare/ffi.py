"""Conversions at the Pyodide boundary, for both modes a binding arrives in (workers-runtime-sdk
`workers/rpc.py`). **Wrapped** (SDK >= 1.3): the SDK converts arguments and results. **Raw** (a
bare `JsProxy`): we convert arguments (a dict would reach JS as a Map, None as `undefined`) and
results (`.to_py()`; `null` is `jsnull` on 3.13). Adapters detect the mode once (`is_raw`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from js import Object
from pyodide.ffi import JsException as JsException
from pyodide.ffi import JsProxy
from pyodide.ffi import create_proxy as create_proxy
from pyodide.ffi import to_js as _pyodide_to_js

try:
    # (pyodide-py's type stubs predate jsnull, hence the ignore for mypy.)
    from pyodide.ffi import jsnull as jsnull  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # Pyodide < 0.27 (Python 3.12): JS null already arrives as None.
    jsnull = None

E = TypeVar("E", bound=Exception)

# SQLite's own texts for limit errors, as workerd reports them (D1 and DO SQL alike).
SQLITE_LIMIT_ERRORS = re.compile(
    r"too many SQL variables|SQLITE_TOOBIG|string or blob too big|too many columns"
    r"|LIKE or GLOB pattern too complex|too many terms in compound SELECT"
    r"|Expression tree is too large|too many arguments on function"
)


def is_raw(binding: Any) -> bool:
    """True when `binding` is a bare JsProxy (raw mode), False for an SDK wrapper."""
    return isinstance(binding, JsProxy)


def to_py(value: Any) -> Any:
    """A binding's result as plain Python, whichever mode produced it: JsProxy values via
    `.to_py()`, `jsnull` anywhere in the structure as None, dicts (the SDK's `JsDict` too) as
    plain dicts, tuples as lists. A JS class instance (a statement, a stub) stays a proxy."""
    if value is None or value is jsnull:
        return None
    if isinstance(value, JsProxy):
        converted = value.to_py()
        if isinstance(converted, JsProxy):
            return converted
        value = converted
    if isinstance(value, Mapping):
        return {key: to_py(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_py(item) for item in value]
    return value


def field(obj: Any, name: str) -> Any:
    """`obj.name` for a JS object in either mode (a converted dict or an attribute holder)."""
    if obj is None or obj is jsnull:
        return None
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return None if value is jsnull else value


def epoch_ms(value: Any) -> int | None:
    """A JS Date (raw), the SDK's `datetime` (wrapped) or a number, as epoch milliseconds."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    get_time = getattr(value, "getTime", None)
    return int(get_time()) if callable(get_time) else None


def _nulls_for_none(value: Any) -> Any:
    # `to_js` turns None into `undefined`, which JSON drops and D1 rejects: we mean `null`.
    if value is None:
        return jsnull
    if isinstance(value, Mapping):
        return {key: _nulls_for_none(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_nulls_for_none(item) for item in value]
    return value


def to_js_arg(value: Any, raw: bool) -> Any:
    """One argument for a binding call. Wrapped mode: the Python value (the SDK converts it).
    Raw mode: dicts become JS Objects (not Maps), lists Arrays, bytes Uint8Arrays, None null;
    strings, numbers and booleans cross as they are."""
    if not raw:
        return value
    if value is None:
        return jsnull
    if isinstance(value, str | int | float | JsProxy):  # bool is an int
        return value
    return _pyodide_to_js(_nulls_for_none(value), dict_converter=Object.fromEntries)


def to_js_options(raw: bool, **options: Any) -> Any:
    """A JS options object from keyword arguments, leaving out those that are None: `null`
    for, say, `expirationTtl` is not the same as omitting it."""
    return to_js_arg({key: value for key, value in options.items() if value is not None}, raw)


def sql_error(exc: BaseException, plain: type[E], limit: type[E], context: str = "") -> E:
    """`plain`, or `limit` when SQLite's text names a limit, with the JS error's message."""
    message = error_message(exc)
    return (limit if SQLITE_LIMIT_ERRORS.search(message) else plain)(f"{message}{context}")


def error_message(exc: BaseException) -> str:
    """The JS error's message (`JsException.message`), falling back to `str(exc)`."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)
