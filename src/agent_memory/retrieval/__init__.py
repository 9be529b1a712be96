"""How memories are ranked, as pure functions (ADR-0051): `terms` (words, stemmed index terms,
BM25F) and `scoring` (channel fusion, the tier-weighted score and its breakdown). The bottom
of the core: imports nothing else from `agent_memory`."""
