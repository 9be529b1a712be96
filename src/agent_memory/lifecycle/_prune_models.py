"""The values one prune invocation works with: its `PruneBudget`, the `Meter` that spends
it (raising `BudgetExhausted` before an operation that would not fit), and each tenant's
`TenantPruneCounts`. No I/O.

Private to `agent_memory.lifecycle`: other packages import these names from
`agent_memory.lifecycle.prune`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

DEFAULT_BATCH_ROWS = 500
DEFAULT_MAX_OPERATIONS = 900  # under the paid plan's 1000 D1 queries per invocation
DEFAULT_MAX_SECONDS = 600.0  # under a cron invocation's 15 minutes
# select, put, and a D1 batch of 3 statements (4 for episodes: + the cold item index)
OPERATIONS_PER_BATCH = 6

StopReason = Literal["operations", "time"]


class PruneBudget(BaseModel):
    """How much one invocation may do."""

    max_operations: int = Field(default=DEFAULT_MAX_OPERATIONS, ge=OPERATIONS_PER_BATCH + 2)
    max_seconds: float = Field(default=DEFAULT_MAX_SECONDS, gt=0)
    batch_rows: int = Field(default=DEFAULT_BATCH_ROWS, ge=1, le=5_000)


class TenantPruneCounts(BaseModel):
    """One tenant's part of a prune job. `*_deleted` are job totals (exact across
    invocations); `*_now` what this invocation did."""

    tenant_id: str
    retention_days: int
    cutoff_ms: int
    episodes_deleted: int = 0
    runs_deleted: int = 0
    events_deleted: int = 0
    batches: int = 0
    episodes_now: int = 0
    runs_now: int = 0
    events_now: int = 0
    batches_now: int = 0
    archives_now: list[str] = Field(default_factory=list)
    # Archive objects this invocation deleted for being past their cold retention.
    archives_expired_now: int = 0
    done: bool = False
    # Dry runs only: what a prune would archive and delete now.
    episodes_due: int | None = None
    runs_due: int | None = None
    events_due: int | None = None
    error: str | None = None


class BudgetExhausted(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason
        # The counts of the tenant being pruned when the budget ran out.
        self.counts: TenantPruneCounts | None = None


@dataclass
class Meter:
    """Counts one invocation's D1 statements and R2 calls against its budget (one meter
    is shared by the jobs an invocation resumes)."""

    budget: PruneBudget
    clock: Callable[[], float]
    started: float = field(default=0.0)
    operations: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spend(self, n: int = 1) -> None:
        self.operations += n

    def check(self, need: int) -> None:
        """Raise `BudgetExhausted` unless `need` more operations fit in the budget."""
        if self.operations + need > self.budget.max_operations:
            raise BudgetExhausted("operations")
        if self.clock() - self.started >= self.budget.max_seconds:
            raise BudgetExhausted("time")
