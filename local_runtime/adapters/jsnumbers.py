"""Numbers the way they reach Python on Cloudflare: through a JavaScript `Number`.

On Workers every SQL number crosses JavaScript before Python sees it. workerd coerces
SQLite's int64 to a double (`src/workerd/api/sql.c++`, Cursor::iteratorImpl: "int64 will
become BigInt ... We will coerce to a double here"); D1 results travel as JSON numbers.
Pyodide then converts a JS number to Python by this rule (pyodide
`docs/usage/type-conversions.md`, "JavaScript to Python"): "A number is converted to an
`int` if it is between -2^53 and 2^53 inclusive and its fractional part is zero.
Otherwise, it is converted to a float."

In the other direction, a Python `int` becomes a JS Number when it lies in
[-2^53, 2^53] and a `BigInt` otherwise (same document, "Python to JavaScript"), which D1
rejects (`D1_TYPE_ERROR: Type 'bigint' ...`) and DO SQL cannot bind.

So the local adapters pass every SQL number through these helpers: 3.0 read from SQLite
arrives as the int 3, 2**60 arrives as the float 1.152921504606847e18, and code that
works locally works the same on Cloudflare.
"""

from __future__ import annotations

# Pyodide's boundary for int <-> Number conversion (inclusive on both sides).
PYODIDE_INT_LIMIT = 2**53
# JavaScript's Number.MAX_SAFE_INTEGER: the largest integer a double holds exactly with
# no neighbour rounding onto it.
MAX_SAFE_INTEGER = 2**53 - 1


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
