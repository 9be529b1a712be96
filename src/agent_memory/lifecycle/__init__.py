"""The memory lifecycle of ADR-0051: the jobs that keep each tenant's memory healthy, started
by the crons, the admin routes and the CLI, never on a request's hot path. Imports `tiers`,
`governance` and `retrieval`, none of which import it."""
