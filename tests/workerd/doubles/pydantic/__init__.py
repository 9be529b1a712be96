"""Double of `pydantic` (pydantic-core has no Pyodide 0.28 wheel offline).

`worker/entry.py` imports one name from it, `ValidationError`, to turn a bad var into the
API's JSON 500; nothing in the tier raises it (the `build_bindings` double does not validate).
"""


class ValidationError(ValueError):
    """Stands in for pydantic's: only caught, never raised, here."""
