"""How memories are ranked: pure functions, no storage (ADR-0051 retrieval scoring).

* `terms`: words and content terms of a text, the keyword index's stemmed terms and BM25F,
  exact-match candidates;
* `scoring`: channel fusion, relevance + recency + confidence + density with tier-aware
  weights (`RetrievalConfig`, overridable by `MEMORY_RETRIEVAL_CONFIG`), the breakdown every
  result carries, and ranking.
The bottom of the core: imports nothing else from `agent_memory`.
"""
