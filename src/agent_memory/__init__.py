"""The memory core, in plain Python: never imports `js`, `pyodide` or `workers`, and talks
to storage only through `bindings.ports`.

Rooms, bottom to top (a room imports only from rooms below it; `tests/core/test_layout.py`):
`ids`, `cursors`, `placement`, `directory` (ULIDs, hashes and D1's statement limits;
pagination cursors; the hot/warm/cold placement table; which shard holds a tenant) →
`namespace`, `retrieval` (naming; ranking) → `governance/` (agent types, write policy, event
log, personal data) → `tiers/` (working, episodic and procedural, semantic; each store owns
its tables) → `lifecycle/` (reconciler, prune, brief, retention, erase, moves) →
`hot_warm_cold` → `memory` (`Memory`, the one way in) → `agent/` (one agent turn).
"""
