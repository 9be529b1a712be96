"""Test-only: the Python type of every value in a structure, in the same structure.

Values that crossed the boundary are returned to the harness as JSON, which cannot tell
`None` from a missing key's null, an int from an integral float, or a list from a tuple;
`shape` records what Python actually held on each side.
"""

from __future__ import annotations

from typing import Any


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {"dict": type(value).__name__, "items": {k: shape(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return [type(value).__name__, [shape(item) for item in value]]
    return type(value).__name__
