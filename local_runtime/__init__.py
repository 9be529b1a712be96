"""The local runtime: a CPython stand-in for the Cloudflare Python Workers runtime.

Serves the same `worker.app.handle` on 127.0.0.1 with SQLite-backed KV, D1 and Durable
Object storage, a numpy vector index and an offline embedding model, all under one state
folder. Never shipped to Cloudflare (it lives outside `src/`).
"""
