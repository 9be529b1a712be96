"""Deterministic stand-ins for ports, for unit tests (no model, no network)."""
