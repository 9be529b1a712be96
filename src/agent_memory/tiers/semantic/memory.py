"""Tier 3, semantic memory: facts in D1 (source of truth) + one vector each in Vectorize.

`SemanticMemory` is bound to one tenant at construction and cannot name another: every D1
statement starts with `tenant_id = ?`, every vector query passes the tenant's namespace and
`tenant_id` and `embedding` filters, so vectors of different embedding configs are never
compared. Writes (`writes.py`) are idempotent per (tenant, subject, content hash); a batch
whose embedding fails writes nothing (ADR-0030); a row left `pending_vector` is never
recalled until `complete_pending`, learning it again or the tenant's next successful write
(up to 10) finishes it. `FactHistory` holds the D1-only views the inspector and eraser read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from agent_memory.directory import TENANT_CODE
from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.writes import EventLog, WriteGate
from agent_memory.ids import count_then_delete, delete_ids
from agent_memory.namespace import TENANT_RE
from agent_memory.retrieval import RetrievalConfig
from agent_memory.tiers.semantic.models import (
    DEFAULT_AGENT_TYPE,
    DEFAULT_TOP_K,
    MAX_RANK_LIMIT,
    DeleteResult,
    Fact,
    FactInput,
    FactScope,
    FactStatus,
    LearnResult,
    MemoryInputError,
    RecallFilters,
    RecallRequest,
    RecallResult,
    namespace_for_tenant,
    open_facts,
)
from agent_memory.tiers.semantic.recall import (
    MAX_WRITE_BACK,
    Recaller,
    RecallRecorder,
)
from agent_memory.tiers.semantic.writes import FactWriter
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.embedder import Embedder
from bindings.ports.kv import KVNamespace
from bindings.ports.reranker import Reranker
from bindings.ports.sql import Row, SqlValue
from bindings.ports.vectorize import VectorIndex


class SemanticMemory:
    """Semantic memory of one tenant. Construct per request; the tenant cannot change.
    The write path and the recall pipeline share one `FactScope` built here."""

    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        vectors: VectorIndex,
        embedder: Embedder | None,
        clock: Clock,
        config: RetrievalConfig | None = None,
        agent_type: str = DEFAULT_AGENT_TYPE,
        run_id: str | None = None,
        gate: WriteGate | None = None,
        background: BackgroundTasks | None = None,
        personal: PersonalData | None = None,
        kv: KVNamespace | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        if not isinstance(tenant_id, str) or not TENANT_RE.fullmatch(tenant_id):
            raise ValueError(f"invalid tenant id {tenant_id!r}")
        events = EventLog(tenant_id, db)
        self._s = FactScope(
            tenant_id=tenant_id,
            namespace=namespace_for_tenant(tenant_id),
            db=db,
            vectors=vectors,
            embedder=embedder,
            clock=clock,
            config=config or RetrievalConfig(),
            agent_type=agent_type,
            run_id=run_id,
            events=events,
            # Writes are proposals checked by the write policy; committed facts get a
            # `memory_written` event (ADR-0051, `agent_memory.governance.writes`).
            gate=gate or WriteGate(tenant_id, clock=clock, events=events),
            background=background,
            # Without one, marked personal data is refused (never stored in plaintext).
            personal=personal or PersonalData(tenant_id, None, None),
            kv=kv,
            reranker=reranker,
        )

    # Built on first use: a recall needs no writer, a write no recaller.
    @cached_property
    def _writer(self) -> FactWriter:
        return FactWriter(self._s)

    @cached_property
    def _recaller(self) -> Recaller:
        return Recaller(self._s)

    @property
    def namespace(self) -> str:
        return self._s.namespace

    # ------------------------------------------------------------------ writes

    async def learn(self, fact: FactInput | Mapping[str, Any]) -> LearnResult:
        """Learn one fact (idempotent per subject and content). See the module docstring."""
        return (await self.learn_many([fact]))[0]

    async def learn_many(self, facts: Sequence[FactInput | Mapping[str, Any]]) -> list[LearnResult]:
        """Learn facts in bulk with batched embedding; results are in input order. All are
        validated first (one bad input: nothing is written); batches commit one after the
        other, so a failing batch leaves earlier ones learned, and a retry with the same facts
        is safe (found by hash, not embedded twice)."""
        return await self._writer.learn_many(facts)

    async def complete_pending(self, limit: int = 100) -> int:
        """Write the vectors of up to `limit` facts left `pending_vector` (oldest first) and
        activate them. Returns how many became active. Safe to run any time."""
        return await self._writer.complete_pending(limit)

    async def write_back_recall_records(self, limit: int = MAX_WRITE_BACK) -> int:
        """Write up to `limit` recall records that D1 refused earlier (kept in KV) and
        delete them from KV. Returns how many; stops at the first D1 failure."""
        return await RecallRecorder(self._s).write_back(limit)

    async def delete(self, fact_id: str) -> DeleteResult:
        """Delete a fact's row and its vector (admin only; ADR-0030). Idempotent: deleting
        an absent fact is a no-op that still removes a vector left behind earlier."""
        return await self._writer.delete(fact_id)

    # ------------------------------------------------------------------ reads

    async def get(self, fact_id: str) -> Fact | None:
        """The fact's row (any status), or None."""
        row = await self._s.sql(
            "SELECT * FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?", fact_id
        ).first()
        return (await open_facts([row], self._s.personal))[0] if row is not None else None

    async def list_active(self, limit: int, offset: int = 0) -> list[Fact]:
        """The tenant's active facts, newest first (`limit` from `offset`)."""
        result = await self._s.sql(
            "SELECT * FROM semantic_facts WHERE tenant_id = ? AND status = 'active' "
            "ORDER BY created_at DESC, fact_id DESC LIMIT ? OFFSET ?",
            limit,
            offset,
        ).all()
        return await open_facts(result.results, self._s.personal)

    async def count(self, status: FactStatus = "active") -> int:
        value = await self._s.sql(
            "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND status = ?", status
        ).first_value("n")
        return int(value or 0)

    async def recall(
        self,
        query: str,
        top_k: int = DEFAULT_TOP_K,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        *,
        query_vector: Sequence[float] | None = None,
    ) -> RecallResult:
        """The `top_k` (1-20) best live facts for `query`, each with its score breakdown.

        Updates the returned facts' recall stats and writes a `memory_retrieved` event.
        `query_vector` skips the embedding call (benchmarks; callers that already have it).
        Raises `MemoryInputError` for an empty query, a `top_k` out of range or bad filters.
        """
        raw_filters = filters.model_dump() if isinstance(filters, RecallFilters) else filters
        try:
            request = RecallRequest.model_validate(
                {"query": query, "top_k": top_k, "filters": raw_filters}
            )
        except ValidationError as exc:
            raise MemoryInputError.from_validation(exc, "recall") from None
        return await self._recaller.run(
            request.query, request.top_k, request.filters, query_vector, record=True
        )

    async def rank(
        self,
        query: str,
        limit: int,
        filters: RecallFilters | None = None,
        *,
        query_vector: Sequence[float] | None = None,
        record: bool = False,
    ) -> RecallResult:
        """The same pipeline as `recall` without the tool's 20-result cap (evaluation and
        maintenance): up to `limit` (≤ 1000) facts, best first. The candidates are what the
        channels found (≤ `candidate_pool` each), so the list can be shorter than `limit`;
        its head is exactly what `recall` returns. Records nothing unless asked."""
        if not query.strip():
            raise MemoryInputError(
                "query must not be empty", [{"field": "query", "problem": "empty"}]
            )
        if not 1 <= limit <= MAX_RANK_LIMIT:
            raise MemoryInputError(
                f"limit must be between 1 and {MAX_RANK_LIMIT}",
                [{"field": "limit", "problem": "out of range"}],
            )
        return await self._recaller.run(query.strip(), limit, filters, query_vector, record=record)

    async def record(self, query: str, top_k: int, shown: RecallResult) -> str:
        """Record what a caller showed of a `rank(..., record=False)` result (`shown`: its
        results cut to those), as `recall` records its own: a `memory_retrieved` event and
        the facts' recall statistics, after the response. Returns the event id."""
        return await self._recaller.record(query.strip(), top_k, shown)


# The daily brief's figures on this store's tables: scalar subqueries the brief joins into
# one statement per tenant (?1 tenant, ?2 now in ms; `lifecycle.brief`).
BRIEF_FIGURES = (
    "(SELECT COUNT(*) FROM semantic_facts WHERE tenant_id = ?1 AND status = 'active') "
    "AS facts_active, "
    "(SELECT COUNT(*) FROM semantic_facts WHERE tenant_id = ?1 AND status = 'pending_vector') "
    "AS facts_pending_vector, "
    "(SELECT COUNT(*) FROM semantic_facts WHERE tenant_id = ?1 AND status = 'superseded') "
    "AS facts_superseded, "
    "(SELECT COUNT(*) FROM memory_links WHERE tenant_id = ?1) AS links"
)


class FactHistory:
    """Read-only views of one tenant's facts, their supersession, links and provenance (the
    memory inspector's): D1 only, so they work where Vectorize is not bound."""

    def __init__(self, db: D1Database, tenant_id: str) -> None:
        self._db = db
        self.tenant_id = tenant_id

    def _sql(self, sql: str, *params: SqlValue) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant_id, *params)

    async def fact_rows(
        self,
        *,
        where: Sequence[tuple[str, Sequence[SqlValue]]] = (),
        after: tuple[int, str] | None = None,
        limit: int,
    ) -> list[Row]:
        """Fact rows newest first: `where` are extra clauses on `semantic_facts` (each with its
        parameters), `after` the (created_at, fact_id) of the previous page's last row."""
        if after is not None:
            page = ("(created_at < ? OR (created_at = ? AND fact_id < ?))", (after[0], *after))
            where = [*where, page]
        clauses = " AND ".join(["tenant_id = ?", *(clause for clause, _ in where)])
        result = await self._sql(
            f"SELECT * FROM semantic_facts WHERE {clauses} "
            "ORDER BY created_at DESC, fact_id DESC LIMIT ?",
            *(value for _, values in where for value in values),
            limit,
        ).all()
        return list(result.results)

    async def superseded_by_any(self, fact_ids: Sequence[str], limit: int) -> list[Row]:
        """Rows of the facts that `fact_ids` superseded, oldest first."""
        marks = ",".join("?" for _ in fact_ids)
        result = await self._sql(
            f"SELECT * FROM semantic_facts WHERE tenant_id = ? AND superseded_by IN ({marks}) "
            "ORDER BY created_at, fact_id LIMIT ?",
            *fact_ids,
            limit,
        ).all()
        return list(result.results)

    async def links_of(self, fact_id: str, outgoing: bool, limit: int) -> list[Row]:
        """The fact's links (`other_id`, `score`) with the linked fact's content, status and
        validity, strongest first."""
        mine, other = ("from_fact_id", "to_fact_id") if outgoing else ("to_fact_id", "from_fact_id")
        result = await self._sql(
            f"SELECT l.{other} AS other_id, l.score AS score, f.content AS content, "
            "f.status AS status, f.valid_to AS valid_to FROM memory_links AS l "
            f"LEFT JOIN semantic_facts AS f ON f.tenant_id = l.tenant_id AND f.fact_id = l.{other} "
            f"WHERE l.tenant_id = ? AND l.{mine} = ? ORDER BY l.score DESC LIMIT ?",
            fact_id,
            limit,
        ).all()
        return list(result.results)

    async def provenance_of(self, fact_id: str, limit: int) -> list[Row]:
        """Where the fact came from (`fact_provenance`): each source with the run and text of
        an episode source, or the text of a fact source."""
        result = await self._sql(
            "SELECT p.source_kind AS source_kind, p.source_id AS source_id, "
            "p.relation AS relation, p.created_at AS created_at, e.run_id AS run_id, "
            "COALESCE(e.content, f.content) AS content FROM fact_provenance AS p "
            "LEFT JOIN memory_episodes AS e ON p.source_kind = 'episode' "
            "AND e.tenant_id = p.tenant_id AND e.episode_id = p.source_id "
            "LEFT JOIN semantic_facts AS f ON p.source_kind = 'fact' "
            "AND f.tenant_id = p.tenant_id AND f.fact_id = p.source_id "
            "WHERE p.tenant_id = ? AND p.fact_id = ? ORDER BY p.created_at, p.source_id LIMIT ?",
            fact_id,
            limit,
        ).all()
        return list(result.results)

    # -------------------------------------------------------------- a subject's erase

    async def subject_facts(self, subject: str) -> dict[str, str]:
        """The facts about or naming `subject`, with the history they superseded
        (transitively): fact id -> content hash."""
        # Facts superseded by an erased fact (duplicates merged into it, earlier values it
        # replaced) are its history: they go too (the recursive part). The derived key
        # (migration 0005) is lower-cased: a free-text fact stored under the catch-all
        # subject is still about the entity its text names.
        result = await self._sql(
            "WITH RECURSIVE found(fact_id, content_hash) AS ("
            "SELECT fact_id, content_hash FROM semantic_facts WHERE tenant_id = ?1 "
            "AND (subject = ?2 OR object = ?2 OR instr(content, ?2) > 0 "
            "OR instr(metadata, ?2) > 0 OR (key_entity <> '' AND key_entity = lower(?2))) "
            "UNION SELECT f.fact_id, f.content_hash FROM semantic_facts AS f "
            "JOIN found ON f.tenant_id = ?1 AND f.superseded_by = found.fact_id) "
            "SELECT fact_id, content_hash FROM found",
            subject,
        ).all()
        return {str(row["fact_id"]): str(row["content_hash"]) for row in result.results}

    async def _delete_where(self, table: str, column: str, ids: Sequence[str]) -> int:
        sql = f"DELETE FROM {table} WHERE tenant_id = ? AND {column} IN ({{marks}})"
        return await delete_ids(self._db, sql, self.tenant_id, ids)

    async def delete_links(self, fact_ids: Sequence[str]) -> int:
        """Delete every link from or to one of `fact_ids`; how many."""
        outgoing = await self._delete_where("memory_links", "from_fact_id", fact_ids)
        return outgoing + await self._delete_where("memory_links", "to_fact_id", fact_ids)

    async def delete_provenance(self, fact_ids: Sequence[str], sources: Sequence[str]) -> int:
        """Delete the provenance of `fact_ids` and every provenance row naming one of
        `sources` (facts, episodes or runs); how many."""
        of_facts = await self._delete_where("fact_provenance", "fact_id", fact_ids)
        return of_facts + await self._delete_where("fact_provenance", "source_id", sources)

    async def delete_facts(self, fact_ids: Sequence[str]) -> int:
        """Delete the rows (the keyword index's triggers remove their postings)."""
        return await count_then_delete(
            self._db, "semantic_facts", "fact_id", self.tenant_id, fact_ids
        )

    async def tidy_keyword_index(self) -> bool:
        """Drop term statistics no fact has any more (the delete trigger only decrements a
        term's document count, so its text would stay); True when no posting names a fact
        that is gone."""
        await self._sql(
            f"DELETE FROM semantic_term_stats WHERE tenant_id = {TENANT_CODE} AND df <= 0"
        ).run()
        orphans = await self._sql(
            f"SELECT COUNT(*) AS n FROM semantic_terms t WHERE t.tenant_id = {TENANT_CODE} "
            "AND NOT EXISTS (SELECT 1 FROM semantic_facts f WHERE f.tenant_id = ? "
            "AND f.fts_rowid = t.fts_rowid)",
            self.tenant_id,
        ).first_value("n")
        return int(orphans or 0) == 0
