"""The four memory tiers, each bound to one tenant (and instance) at construction.

* `working`: one agent instance's scratch space in KV (1 h TTL, 128 KB budget), with the
  namespace migration's legacy keys and read-repair;
* `episodic`: the tenant's agent runs and episodes in D1, written off the response path;
* `semantic`: the tenant's facts in D1 + Vectorize with hybrid, explainable recall;
* `procedural`: a Thompson-sampling bandit over an agent type's workflows (DO SQLite), and
  workflow packs promoted for every instance of a type (D1).
Every write goes through `governance`'s write gate; ranking comes from `retrieval`. The
tiers never import `lifecycle` or `agent`, which work on top of them.
"""
