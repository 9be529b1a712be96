"""The edge: the Worker entry, routing and request handling, turning HTTP into calls.

Only `worker.entry` imports `workers` (the Pyodide SDK); everything else here is plain
Python and runs under CPython in the local runtime and the tests.
"""
