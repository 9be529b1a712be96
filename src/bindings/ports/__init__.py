"""Ports: the minimal surface of each runtime object the core uses.

One module per binding so that an import of one port never drags in another; the
tool-proxy hot path imports `bindings.ports.kv` and nothing that reaches D1, Durable
Objects or Vectorize (checked by tests over the import graph).
"""
