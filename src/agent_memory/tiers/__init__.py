"""The four memory tiers: working (KV, `working`), episodic (D1) and procedural (DO SQLite and
D1), both in `episodic`, semantic (D1 + Vectorize, `semantic/`). Every write goes through
`governance`'s write gate; the tiers never import `lifecycle` or `agent`."""
