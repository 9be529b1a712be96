"""The edge: the Worker entry, routing and request handling. Only `worker.entry` imports
`workers` (the Pyodide SDK); the rest is plain Python, run under CPython locally and in tests."""
