"""The memory lifecycle of ADR-0051: the jobs that keep each tenant's memory healthy.

* `reconciler`: per tenant, after the daily brief and after enough new facts: dedup,
  conflicts (with the adjudicator for free-text updates), promotion, decay and linking over
  the semantic and episodic tiers;
* `prune`: weekly, rows past the tenant's retention are archived to the cold tier (R2,
  gzip NDJSON), then deleted, in budgeted, resumable jobs; the cold index and cold expiry;
* `brief`: the daily brief of how full each tenant's memory is;
* `retention`: per-tenant retention and episode limit, the tenant list, agent instances;
* `erase`: removing every trace of one subject from every tier and the archives;
* `inspect`: read-only views for the memory inspector.
Started by the crons, the admin routes and the CLI, over the tiers; never called on a
request's hot path. Imports `tiers`, `governance` and `retrieval`, none of which import it.
"""
