"""Ports: one module per binding, so importing one never drags in another (the tool-proxy
hot path imports `bindings.ports.kv` only; tests check the import graph)."""
