"""Tier 3, semantic memory: one tenant's facts in D1 (source of truth) + Vectorize.

* `memory`: `SemanticMemory`, bound to one tenant at construction: learn, recall, rank and
  delete facts — the tier's one entry;
* `models`: what callers pass and catch (`FactInput`, `RecallFilters`, `Fact`,
  `RecallResult`, `MemoryInputError`, `SemanticTierUnavailable`), the tenant's vector
  namespace and `FactScope`, the stores every part shares;
* `writes`: the write path (row pending → vector → active), vector repair, key backfill;
* `recall`: the recall pipeline (vector, keyword and exact channels, fusion, scoring),
  links, and recall records written after the response;
* `keyword_index`: the per-tenant BM25F keyword index, contextual indexing, its reindex job;
* `keys`: keys for free text and the update rules that let a statement supersede another.
"""
