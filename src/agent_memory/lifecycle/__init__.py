"""The memory lifecycle of ADR-0051: the jobs that keep each tenant's memory healthy.

* `reconciler`: per tenant, after the daily brief: dedup, conflicts, promotion, decay and
  linking over the semantic and episodic tiers;
* `prune` (archive format in `cold`): weekly, rows past the tenant's retention are
  archived to the cold tier, then deleted, in budgeted, resumable jobs;
* `brief`: the daily brief of how full each tenant's memory is;
* `retention`: per-tenant retention and episode limit, and the tenant list;
* `erase`: removing every trace of one subject from every tier and the archives;
* `inspect`: read-only views for the memory inspector (facts with status, supersession
  chains, links, provenance, events); imported as `agent_memory.lifecycle.inspect`.
Started by the crons, the admin routes and the CLI, over the tiers; never called on a
request's hot path. Imports `tiers`, `governance` and `retrieval`, none of which import it.
Modules starting with `_` are this package's own.
"""

from agent_memory.lifecycle.brief import Brief, TenantBrief, build_brief
from agent_memory.lifecycle.cold import decode_archive, iso_week, parse_archive_key, week_bounds
from agent_memory.lifecycle.erase import EraseReport, SubjectEraser, validate_subject
from agent_memory.lifecycle.prune import (
    PruneBudget,
    Pruner,
    PruneReport,
    TenantPruneCounts,
    resume_unfinished,
    weekly_prune_id,
)
from agent_memory.lifecycle.reconciler import ReconcileConfig, Reconciler, ReconcileReport
from agent_memory.lifecycle.retention import (
    LifecycleUpdate,
    TenantLifecycle,
    get_lifecycle,
    known_tenants,
    set_lifecycle,
)

__all__ = [
    "Brief",
    "EraseReport",
    "LifecycleUpdate",
    "PruneBudget",
    "PruneReport",
    "Pruner",
    "ReconcileConfig",
    "ReconcileReport",
    "Reconciler",
    "SubjectEraser",
    "TenantBrief",
    "TenantLifecycle",
    "TenantPruneCounts",
    "build_brief",
    "decode_archive",
    "get_lifecycle",
    "iso_week",
    "known_tenants",
    "parse_archive_key",
    "resume_unfinished",
    "set_lifecycle",
    "validate_subject",
    "week_bounds",
    "weekly_prune_id",
]
