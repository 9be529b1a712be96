"""numpy's stand-in inside the Pyodide 314 harness (tests/pyodide/real_app.mjs).

Pyodide's numpy wheel is on its CDN only, which the tests never reach. The project imports
numpy in its vector code (embeddings, recall, procedural memory), never at the module
level of anything that runs here; so importing this stub is allowed, and touching any
attribute fails loudly: a path that needs real numpy cannot pass unnoticed.
"""

from __future__ import annotations

STUB = True


def __getattr__(name: str) -> object:
    raise AttributeError(f"numpy is a stub in the Pyodide 314 harness: numpy.{name} is not here")
