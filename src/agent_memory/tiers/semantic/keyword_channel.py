"""Recall's keyword channel over the per-tenant index of migration 0009.

Two steps, both tenant-first:

1. `candidates`: the tenant's statistics (facts, lengths, each query term's df) in one
   batch, then one aggregate over the postings of the query's rarer terms, scored with the
   BM25F formula in SQL from the postings alone (they carry their fact's lengths), and
   only the best rows read, best `limit` first. Cost is bounded for very common words: terms
   are taken rarest first while their postings add up to at most `POSTINGS_BUDGET`; a
   term held by more facts than that drives no candidates (its postings are never scanned)
   but still scores them in step 2. When even the rarest term exceeds the budget, only its
   newest `POSTINGS_BUDGET` postings are read.
2. `score_column`: the exact BM25F (`retrieval.bm25.bm25f` states the formula; every
   query term) of a fact as a SQL column, read with the fact's row, so the union of every
   channel's candidates is scored in the statement that loads them and the keyword channel
   is normalised over the same candidates as the others: |terms| primary-key probes of the
   postings per fact, however common the words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agent_memory.retrieval.terms import Bm25Params, TenantStats, idf
from agent_memory.tiers.semantic._scope import FactScope
from bindings.ports.sql import Row, SqlValue

POSTINGS_BUDGET = 1_000
# Terms that drive candidate generation: each is one index range of postings.
MAX_DRIVING_TERMS = 16


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A query's terms with the tenant's statistics for them."""

    terms: list[str]
    df: dict[str, int]
    stats: TenantStats
    params: Bm25Params

    @property
    def idfs(self) -> dict[str, float]:
        return {t: idf(self.df.get(t, 0), self.stats.docs) for t in self.terms}


class KeywordIndex:
    """One tenant's keyword index, read side."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope

    async def prepare(self, terms: Sequence[str], params: Bm25Params) -> KeywordQuery:
        """The tenant's statistics and each term's df (one D1 batch)."""
        stats_stmt = self._s.db.prepare(
            "SELECT docs, total_length, total_context_length FROM semantic_index_stats "
            "WHERE tenant_id = ?"
        ).bind(self._s.tenant_id)
        df_stmt = self._s.db.prepare(
            "SELECT term, df FROM semantic_term_stats WHERE tenant_id = ? "
            "AND term IN (SELECT value FROM json_each(?))"
        ).bind(self._s.tenant_id, json.dumps(list(terms)))
        stats_result, df_result = await self._s.db.batch([stats_stmt, df_stmt])
        row = stats_result.results[0] if stats_result.results else None
        stats = TenantStats(
            docs=int(row["docs"]) if row else 0,
            total_length=int(row["total_length"]) if row else 0,
            total_context_length=int(row["total_context_length"]) if row else 0,
        )
        df = {str(r["term"]): int(r["df"]) for r in df_result.results}
        return KeywordQuery(terms=list(terms), df=df, stats=stats, params=params)

    async def candidates(
        self,
        query: KeywordQuery,
        extra_sql: str,
        extra_params: Sequence[SqlValue],
        limit: int,
        *,
        narrowed: bool,
        columns: str,
    ) -> list[Row]:
        """The rows (`columns` of `semantic_facts AS f`, plus `keyword_score`, the exact
        BM25F of `score_column`, and `channel_score`, the BM25F over the driving terms it
        was ranked by) of up to `limit` live facts matching the query's rarer terms, best
        first (see the module docstring). `extra_sql` / `extra_params`: the row conditions
        on `f`; `narrowed`: they go beyond liveness (filters), so more postings are ranked
        before the rows are checked."""
        present = sorted(
            (t for t in query.terms if query.df.get(t, 0) > 0), key=query.df.__getitem__
        )
        driving: list[str] = []
        total = 0
        for term in present[:MAX_DRIVING_TERMS]:
            if driving and total + query.df[term] > POSTINGS_BUDGET:
                break
            driving.append(term)
            total += query.df[term]
        if not driving:
            return []
        idfs = query.idfs
        if total > POSTINGS_BUDGET:
            # One term alone exceeds the budget: its newest postings only.
            score, score_params = _posting_score(query, "?", [idfs[driving[0]]])
            postings = (
                "(SELECT * FROM semantic_terms WHERE tenant_id = ? AND term = ? "
                "ORDER BY fts_rowid DESC LIMIT ?) AS p"
            )
            postings_params: list[SqlValue] = [self._s.tenant_id, driving[0], POSTINGS_BUDGET]
        else:
            score, score_params = _posting_score(query, "w.value")
            # CROSS JOIN: the query's terms drive one index range of postings each.
            postings = "json_each(?) AS w CROSS JOIN semantic_terms AS p"
            postings += " WHERE p.tenant_id = ? AND p.term = w.key"
            postings_params = [json.dumps({t: idfs[t] for t in driving}), self._s.tenant_id]
        # Rank the postings alone (no row reads), then check the best rows: dead or filtered
        # rows are skipped, so rank more than `limit` (all of them when filters narrow).
        ranked = POSTINGS_BUDGET if narrowed else 2 * limit
        exact, exact_params = self.score_column(query)
        result = (
            await self._s.db.prepare(
                f"SELECT {columns}, {exact} AS keyword_score, k.score AS channel_score FROM "
                "(SELECT f.fts_rowid AS fts_rowid, t.score AS score FROM "
                f"(SELECT p.fts_rowid AS fts_rowid, SUM({score}) AS score "
                f"FROM {postings} GROUP BY p.fts_rowid ORDER BY score DESC LIMIT ?) AS t "
                "CROSS JOIN semantic_facts AS f "
                f"WHERE f.fts_rowid = t.fts_rowid AND f.tenant_id = ?{extra_sql} "
                "ORDER BY t.score DESC, f.fact_id ASC LIMIT ?) AS k "
                # The candidate rows themselves, read once: the channel's hits and their rows.
                "CROSS JOIN semantic_facts AS f WHERE f.fts_rowid = k.fts_rowid "
                "ORDER BY k.score DESC, f.fact_id ASC"
            )
            .bind(
                *exact_params,
                *score_params,
                *postings_params,
                ranked,
                self._s.tenant_id,
                *extra_params,
                limit,
            )
            .all()
        )
        return result.results

    @staticmethod
    def score_column(query: KeywordQuery | None) -> tuple[str, list[SqlValue]]:
        """A SQL expression on a `semantic_facts AS f` row: its exact BM25F for `query` over
        every query term, however common (0.0 when it holds none, or without a query), and
        its parameters. One primary-key probe of the postings per query term and row."""
        if query is None or not query.df:
            return "0.0", []
        idfs = query.idfs
        weights = json.dumps({t: idfs[t] for t in query.terms if query.df.get(t, 0) > 0})
        score, params = _posting_score(query, "w.value")
        return (
            f"COALESCE((SELECT SUM({score}) "
            "FROM json_each(?) AS w CROSS JOIN semantic_terms AS p "
            "WHERE p.tenant_id = f.tenant_id AND p.term = w.key AND p.fts_rowid = f.fts_rowid"
            "), 0.0)",
            [*params, weights],
        )


def _posting_score(
    query: KeywordQuery, weight: str, weight_params: Sequence[SqlValue] = ()
) -> tuple[str, list[SqlValue]]:
    """One posting's share of BM25F (`retrieval.bm25.bm25f`, which states the formula) as
    SQL over a posting `p` and its term's idf `weight`, with its parameters in text order:
    both keyword queries build it here. The tenant's average length, which moves with every
    write, is a parameter, so the statement's text stays the same (prepared once)."""
    p = query.params
    w = p.context_weight
    freq = f"(p.tf + {w!r} * p.context_tf)"
    length = f"(p.length + {w!r} * p.context_length)"
    sql = (
        f"{weight} * {freq} * {p.k1 + 1.0!r} / ({freq} + {p.k1!r} * "
        f"({1.0 - p.b!r} + {p.b!r} * {length} / ?))"
    )
    return sql, [*weight_params, query.stats.average_length(p)]
