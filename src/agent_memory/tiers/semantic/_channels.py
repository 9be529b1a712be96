"""Recall's three candidate channels over one tenant's facts.

* `vector`: cosine similarity in the tenant's namespace, filtered by tenant and embedding
  config (top `candidate_pool`, ≤ 100);
* `keyword`: BM25F over the tenant's own keyword index (`keyword_channel`, migration 0009): the
  memory's text and, at a lower weight, its session context and date; the user's text only
  ever becomes bound parameters (a JSON list of terms);
* `exact`: facts whose subject or predicate equals a string the query names.
Each returns `ChannelHit`s, higher score better; `is_live` is the row test every result
must pass (active, inside its validity window, matching the filters).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from agent_memory.retrieval.scoring import ChannelHit
from agent_memory.retrieval.terms import exact_match_candidates, query_terms
from agent_memory.tiers.semantic._scope import FactScope, check_matrix, ms
from agent_memory.tiers.semantic.keyword_channel import KeywordIndex, KeywordQuery
from agent_memory.tiers.semantic.models import MemoryInputError, RecallFilters
from bindings.ports.sql import Row, SqlValue

# What ranking needs of a candidate row; full rows are read for the returned ones only.
SCORING_COLUMNS = (
    "fact_id, status, valid_from, valid_to, created_at, agent_type, subject, predicate, "
    "confidence, content, updated_at, key_entity, key_attribute, key_source, session_key"
)


class RecallChannels:
    """The candidate channels of one tenant's recall."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope
        self._keyword = KeywordIndex(scope)

    async def vector(
        self,
        query: str,
        query_vector: Sequence[float] | None,
        filters: RecallFilters,
        top_k: int,
    ) -> list[ChannelHit]:
        embedder = self._s.require_embedder()
        if query_vector is None:
            matrix = await embedder.embed([query])
            check_matrix(matrix, 1, embedder.config)
            values = np.asarray(matrix[0], dtype=np.float64).tolist()
        else:
            values = [float(v) for v in query_vector]
            if len(values) != embedder.config.dimensions or not all(
                math.isfinite(v) for v in values
            ):
                raise MemoryInputError("query_vector does not match the embedding config")
        result = await self._s.vectors.query(
            values,
            top_k=top_k,
            namespace=self._s.namespace,
            filter=self._s.vector_filter(embedder.config, filters.agent_type),
            return_metadata="none",
        )
        return [ChannelHit(id=m.id, score=m.score) for m in result.matches]

    def _row_filter_sql(self, filters: RecallFilters, now: float) -> tuple[str, list[SqlValue]]:
        """Conditions on a `semantic_facts AS f` row beyond the tenant: live and filtered."""
        # `+f.status`: the unary plus keeps SQLite from choosing the (tenant_id, status)
        # index, which would scan every active fact of the tenant; the selective indexes
        # (subject, predicate, the FTS rowid) must drive these queries.
        if filters.as_of is not None:
            # What was believed then: written by then, and its validity interval (closed
            # by a supersession) contains it. Superseded rows have no vector any more, so
            # only the keyword and exact channels find them.
            at = ms(filters.as_of)
            sql = (
                " AND +f.status IN ('active', 'superseded') AND f.created_at <= ?"
                " AND f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?)"
            )
            params: list[SqlValue] = [at, at, at]
        else:
            sql = " AND +f.status = 'active' AND (f.valid_to IS NULL OR f.valid_to > ?)"
            params = [ms(now)]
        if filters.agent_type is not None:
            sql += " AND f.agent_type = ?"
            params.append(filters.agent_type)
        if filters.subject is not None:
            sql += " AND f.subject = ?"
            params.append(filters.subject)
        if filters.predicate is not None:
            sql += " AND f.predicate = ?"
            params.append(filters.predicate)
        if filters.min_confidence is not None:
            sql += " AND f.confidence >= ?"
            params.append(float(filters.min_confidence))
        if filters.valid_from_after is not None:
            sql += " AND f.valid_from >= ?"
            params.append(ms(filters.valid_from_after))
        if filters.valid_from_before is not None:
            sql += " AND f.valid_from < ?"
            params.append(ms(filters.valid_from_before))
        return sql, params

    async def keyword(
        self, query: str, filters: RecallFilters, limit: int, now: float
    ) -> tuple[list[ChannelHit], dict[str, Row], KeywordQuery | None]:
        """The keyword channel's candidates (`keyword_channel.KeywordIndex.candidates`),
        their rows (as `rows` gives them), and the prepared query that scores any other
        candidate (`rows`)."""
        terms = query_terms(query)
        if not terms:
            return [], {}, None
        prepared = await self._keyword.prepare(terms, self._s.config.keyword.params())
        extra, params = self._row_filter_sql(filters, now)
        narrowed = filters.model_dump(exclude_none=True) != {}
        found = await self._keyword.candidates(
            prepared, extra, params, limit, narrowed=narrowed, columns=SCORING_COLUMNS
        )
        hits = [ChannelHit(id=str(r["fact_id"]), score=float(r["channel_score"])) for r in found]
        return hits, {str(r["fact_id"]): r for r in found}, prepared

    async def rows(self, fact_ids: Sequence[str], prepared: KeywordQuery | None) -> dict[str, Row]:
        """This tenant's rows among `fact_ids` (any status; the columns ranking needs), each
        with `keyword_score`, its exact BM25F for the query (0.0 without keyword terms), by
        fact id: one statement however many ids (they are one JSON parameter)."""
        if not fact_ids:
            return {}
        score, score_params = self._keyword.score_column(prepared)
        result = (
            await self._s.db.prepare(
                f"SELECT {SCORING_COLUMNS}, {score} AS keyword_score FROM semantic_facts AS f "
                "WHERE f.tenant_id = ? AND f.fact_id IN (SELECT value FROM json_each(?))"
            )
            .bind(*score_params, self._s.tenant_id, json.dumps(list(fact_ids)))
            .all()
        )
        return {str(row["fact_id"]): row for row in result.results}

    async def exact(
        self, query: str, filters: RecallFilters, limit: int, now: float
    ) -> tuple[list[ChannelHit], bool]:
        """Facts whose subject or predicate equals a string the query names. Returns the
        hits and whether they are all of them (False: more than `limit` matched)."""
        names = exact_match_candidates(query)
        if not names:
            return [], True
        extra, params = self._row_filter_sql(filters, now)
        # Two index lookups (subject, predicate) rather than one OR, which SQLite may plan
        # as a scan of the tenant; each side stops at `limit + 1` rows, since a UNION is
        # built whole before its LIMIT applies (a common predicate such as "ignored", held
        # by 4% of 100K facts, cost ~40 ms that way). The names are one JSON parameter.
        cap = int(limit) + 1
        subject, predicate = (
            "SELECT fact_id FROM (SELECT f.fact_id AS fact_id FROM semantic_facts AS f "
            f"WHERE f.tenant_id = ? AND f.{column} IN (SELECT value FROM json_each(?))"
            f"{extra} LIMIT {cap})"
            for column in ("subject", "predicate")
        )
        names_json = json.dumps(names)
        result = (
            await self._s.db.prepare(f"{subject} UNION {predicate} LIMIT {cap}")
            .bind(self._s.tenant_id, names_json, *params, self._s.tenant_id, names_json, *params)
            .all()
        )
        hits = [ChannelHit(id=row["fact_id"], score=1.0) for row in result.results]
        if len(hits) > limit:
            return [], False
        return hits, True

    @staticmethod
    def is_live(row: Row, filters: RecallFilters, now: float) -> bool:
        """Whether a row may be returned: active and valid now, or — with `as_of` — written
        by then and valid then (superseded or not)."""
        if filters.as_of is not None:
            at = ms(filters.as_of)
            if row["status"] not in ("active", "superseded"):
                return False
            if int(row["created_at"]) > at or int(row["valid_from"]) > at:
                return False
            if row["valid_to"] is not None and int(row["valid_to"]) <= at:
                return False
        else:
            if row["status"] != "active":
                return False
            if row["valid_to"] is not None and int(row["valid_to"]) <= ms(now):
                return False
        if filters.agent_type is not None and row["agent_type"] != filters.agent_type:
            return False
        if filters.subject is not None and row["subject"] != filters.subject:
            return False
        if filters.predicate is not None and row["predicate"] != filters.predicate:
            return False
        if filters.valid_from_after is not None and int(row["valid_from"]) < ms(
            filters.valid_from_after
        ):
            return False
        if filters.valid_from_before is not None and int(row["valid_from"]) >= ms(
            filters.valid_from_before
        ):
            return False
        return not (
            filters.min_confidence is not None and float(row["confidence"]) < filters.min_confidence
        )
