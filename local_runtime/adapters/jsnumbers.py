"""Numbers the way they reach Python on Cloudflare: through a JavaScript `Number`
(docs/miniflare.md, "What crosses the boundary").

workerd coerces SQLite's int64 to a double (`src/workerd/api/sql.c++`) and D1 results travel
as JSON numbers; Pyodide turns a JS number into an `int` when it is integral and within
±2^53, else a `float`, and a Python `int` beyond ±2^53 into a `BigInt`, which D1 and DO SQL
refuse. The local adapters pass every SQL number through these helpers, so 3.0 read from
SQLite arrives as 3 and 2**60 as 1.152921504606847e18, as on Cloudflare.
"""

from __future__ import annotations

# Pyodide's boundary for int <-> Number conversion (inclusive on both sides).
PYODIDE_INT_LIMIT = 2**53


def js_number(value: float) -> int | float:
    """The Python value Pyodide produces for the JS number `value`."""
    if value.is_integer() and -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT:
        return int(value)
    return value


def from_int64(value: int) -> int | float:
    """The Python value produced for SQLite integer `value` after int64 -> double -> Python."""
    if -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT:
        return value
    # Round to the double first: 2^53 + 1 becomes 2^53, which Pyodide then hands over as an
    # int (checked against workerd); anything larger stays a float.
    return js_number(float(value))


def becomes_js_number(value: int) -> bool:
    """True when Pyodide sends the Python int `value` to JS as a Number (not a BigInt)."""
    return -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT
