"""numpy's stand-in where no Emscripten numpy wheel can be had offline: the real-workerd tier
(tests/workerd) and the Pyodide 314 start-up probe (benchmarks/startup.py).

No module on the Worker's start-up or on the routes the tier exercises imports numpy (the
vector code that needs it imports it where it runs: the reconciler's near-duplicate pass, the
EmbedderReranker, the OpenAI embedder), so importing it fails loudly: a path that needs numpy
cannot pass unnoticed. On Cloudflare numpy is Pyodide 314.0.7's wheel.
"""

raise ImportError("numpy is a stub here: this code path needs the real numpy (Pyodide's wheel)")
