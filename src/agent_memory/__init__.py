"""The memory core, in plain Python: never imports `js`, `pyodide` or `workers`, and talks
to storage only through `bindings.ports`.

Rooms, bottom to top (a room imports only from rooms below it):
* `ids`, `scope`, `statements`, `cursors`, `placement`: ULIDs and hashes; tenant / agent /
  instance naming rules; D1's statement limits and slicing ids to fit them; opaque
  pagination cursors; the hot/warm/cold data-placement table;
* `namespace`: the namespace key contract (`<service>:<tenant>:<session>:<kind>:<entity>`);
* `retrieval/`: terms, fusion and scoring — how memories are ranked and explained;
* `governance/`: agent types, write proposals and policy, the memory event log;
* `tiers/`: working, episodic, semantic and procedural memory;
* `lifecycle/`: reconciler, weekly prune to cold, daily brief, retention, subject erase;
* `agent/`: one agent turn — context assembly, the tool loop, the memory tools;
* `tiered/`: the hot/warm/cold `MemoryClient` over KV, D1 and R2 (reads the prune's archives).
`tests/core/test_layout.py` enforces the order and that no room imports another's
private (`_`-prefixed) modules.
"""
