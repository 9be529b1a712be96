"""The four memory tiers (working in KV, episodic in D1, semantic in D1 + Vectorize,
procedural in DO SQLite and D1), each bound to one tenant (and instance) at construction.
Every write goes through `governance`'s write gate; the tiers never import `lifecycle` or
`agent`, which work on top of them."""
