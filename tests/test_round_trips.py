"""Each memory operation makes at most its floor of sequential binding round trips before it
answers (issue 24), counted by `benchmarks/round_trips.py`'s instrumentation: every binding
call of the local runtime is delayed, and calls that overlap ran concurrently. The delay is
long enough that concurrent calls always overlap (they start in the same loop iteration);
the count, not the time, is asserted. The memory API's token deny-list lookup overlaps the
operation's reads, so it adds none."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from types import ModuleType

import pytest

from tests.conftest import PROJECT_ROOT

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# benchmark run (`measured`) happens once, not once per worker.
pytestmark = pytest.mark.xdist_group("round-trips")


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "round_trips_bench", PROJECT_ROOT / "benchmarks" / "round_trips.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, object]]:
    bench = _benchmark()
    return asyncio.run(bench.run(0.08, 1, 3, False))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("operation", "floor"),
    [
        ("MCP recall_memory", 3),
        ("MCP store_memory", 3),
        ("agent run, one turn", 2),
        ("memory API ?tier=semantic&query=", 3),
        ("memory API ?query= (all tiers)", 3),
        ("memory API semantic write", 3),
        ("memory API working write", 2),
    ],
)
def test_operation_at_its_floor(
    measured: dict[str, dict[str, object]], operation: str, floor: int
) -> None:
    assert measured[operation]["rt"] <= floor, measured[operation]  # type: ignore[operator]
