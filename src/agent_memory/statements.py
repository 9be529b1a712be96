"""D1's statement limits, and slicing work to fit them.

D1 binds at most 100 parameters per statement and a batch runs as one transaction, so the
core slices id lists into statements of `IDS_PER_STATEMENT` ids (leaving room for the
tenant id and a few other parameters) and statements into batches of
`STATEMENTS_PER_BATCH`. One place for both, so every tier and job slices the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

IDS_PER_STATEMENT = 90  # + the tenant id and a few others stays under D1's 100
STATEMENTS_PER_BATCH = 50


def chunks(items: Sequence[T], size: int = IDS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size` (≥ 1)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
