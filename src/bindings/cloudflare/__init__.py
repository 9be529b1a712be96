"""Cloudflare adapters: the only code (with `worker.entry`) that speaks to `js`/`pyodide`.

Each module wraps one runtime object and implements the matching port in
`bindings.ports`; `environment.build_bindings(env, ctx)` assembles them per request.
Importing any of them outside Pyodide needs the test fakes (`tests/fakes/js_runtime.py`).
"""
