"""Tier 3, semantic memory: one tenant's facts in D1 (source of truth) + Vectorize.

`memory` (`SemanticMemory`, the tier's one entry; `FactHistory`), `models` (what callers
pass and catch, the tenant's vector namespace, `FactScope`), `writes` (row pending → vector
→ active, repair, key backfill), `recall` (channels, fusion, scoring, links, recall
records), `rerank`, `keyword_index` (per-tenant BM25F, contextual indexing), `keys` (keys
for free text, the update rules and the evidence a supersession needs), `reconcile` (the
reconciler's store).
"""
