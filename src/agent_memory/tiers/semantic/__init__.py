"""Tier 3, semantic memory: one tenant's facts in D1 (source of truth) + Vectorize.

`memory` (`SemanticMemory`, the tier's one entry; `FactHistory`), `models`, `writes`,
`recall` (channels, fusion, scoring, reranking, recall records), `keyword_index`, `keys`
(keys for free text and the update rules), `reconcile` (the reconciler's store).
"""
