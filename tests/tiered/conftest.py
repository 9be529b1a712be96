"""The tiered-memory tests run on the lifecycle tests' runtime: migrated, on a clock the test
moves (so KV TTLs and the prune's retention follow it)."""

from tests.lifecycle.conftest import clock, rt

__all__ = ["clock", "rt"]
