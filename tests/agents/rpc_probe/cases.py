"""The values `tests/agents/test_do_rpc_values.py` sends over Durable Object RPC, and how an
outcome is written down, shared by the probe that ran them in real workerd (`entry.py`,
`run.mjs`, output `observed.json`) and by the test that holds the local runtime to it.

Plain Python on purpose: the same file runs in workerd's Pyodide and under CPython.
"""

from __future__ import annotations

import datetime
import enum
import math
from dataclasses import dataclass
from typing import Any


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


@dataclass
class Point:
    x: int


def _generator() -> Any:
    yield from range(2)


CASES: dict[str, Any] = {
    "tuple": lambda: (1, 2),
    "tuple_in_list_in_dict": lambda: {"a": [1, (2, 3)]},
    "bytearray": lambda: bytearray(b"ab"),
    "frozenset": lambda: frozenset({1}),
    "dataclass": lambda: Point(1),
    "object": lambda: object(),
    "range": lambda: range(2),
    "generator": _generator,
    "set": lambda: {1, 2},
    "set_in_list": lambda: [{"a"}],
    "bytes": lambda: b"ab",
    "memoryview": lambda: memoryview(b"ab"),
    "str_enum": lambda: Color.RED,
    "int_enum": lambda: Level.ONE,
    "int_keys": lambda: {"b": 1, 10: 2, 2: 3},
    "bool_and_none_keys": lambda: {True: 1, None: 2},
    "float_keys": lambda: {1.5: 1, 2.0: 2},
    "tuple_key": lambda: {(1, 2): "a"},
    "integral_float": lambda: 3.0,
    "float": lambda: 2.5,
    "big_int": lambda: 2**60,
    "nan": lambda: float("nan"),
    "none_in_list": lambda: [None, 1],
    "nested": lambda: {"a": {"b": None, "c": [1, "x", True]}},
    "datetime": lambda: datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC),
    "exception": lambda: ValueError("boom"),
}


def describe(value: Any) -> Any:
    """A JSON-able account of a received value: its type and content, in order."""
    if value is None:
        return None
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {type(value).__name__: int(value)}
    if isinstance(value, float):
        return {"float": "nan" if math.isnan(value) else repr(value)}
    if isinstance(value, str):
        return {type(value).__name__: str.__str__(value)}
    if isinstance(value, memoryview | bytes):
        return {type(value).__name__: bytes(value).hex()}
    if isinstance(value, list):
        return {"list": [describe(item) for item in value]}
    if isinstance(value, set):
        return {"set": sorted((describe(item) for item in value), key=repr)}
    if isinstance(value, dict):
        # JsDict (the SDK's dict subclass) and dict alike: what a reader can tell apart.
        return {"dict": [[key, describe(item)] for key, item in value.items()]}
    return {"other": type(value).__name__}


def refusal(exc: BaseException) -> str:
    """Which refusal an error is: the SDK's own check, workerd's serialiser, or a key."""
    text = f"{type(exc).__name__}: {exc}"
    if "cannot be sent over RPC" in text:
        return "sdk"
    if "DataCloneError" in text:
        return "clone"
    if "as a key for a Javascript Map" in text:
        return "key"
    return f"other: {text[:120]}"
