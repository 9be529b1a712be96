"""The memory lifecycle of ADR-0051: the jobs that keep each tenant's memory healthy —
`reconciler` (dedup, conflicts, updates, promotion, decay, linking), `prune` (archive to the
cold tier, then delete; cold expiry), `brief` (how full memory is), `retention` (settings,
tenant list, agent instances), `erase` (every trace of one subject) and `inspect` (read-only
views). Started by the crons, the admin routes and the CLI, never on a request's hot path.
Imports `tiers`, `governance` and `retrieval`, none of which import it.
"""
