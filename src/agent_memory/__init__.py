"""The memory core, in plain Python: never imports `js`, `pyodide` or `workers`, and talks
to storage only through `bindings.ports`.

Rooms, bottom to top (a room imports only from rooms below it; `tests/core/test_layout.py`):
* `ids`, `scope`, `statements`, `cursors`, `placement`, `directory`: ULIDs and hashes; tenant
  / agent / instance naming; D1's statement limits; pagination cursors; the data-placement
  table (hot/warm/cold per memory kind); the tenant directory (which shard holds a tenant);
* `namespace`: the namespace key contract (`<service>:<tenant>:<session>:<kind>:<entity>`);
* `retrieval/`: terms and scoring — how memories are ranked and explained;
* `governance/`: agent types, write proposals and policy, the event log, personal data;
* `tiers/`: working, episodic, semantic and procedural memory, each store owning its tables;
* `lifecycle/`: reconciler, weekly prune to cold, daily brief, retention, subject erase;
* `hot_warm_cold`: the hot/warm/cold `MemoryClient` over KV, D1 and R2;
* `memory`: `Memory`, the one way in, per request and tenant;
* `agent/`: one agent turn — context assembly, the tool loop, the memory tools.
"""
