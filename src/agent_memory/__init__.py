"""The memory core: tiers, scoring, lifecycle and policies, in plain Python.

Never imports `js`, `pyodide` or `workers`; talks to storage only through `bindings.ports`.
"""
