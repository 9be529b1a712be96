"""Cloudflare adapters: the only code (with `worker.entry`) that speaks to `js`/`pyodide`; one
module per runtime object, assembled per request by `environment.build_bindings(env, ctx)`."""
