"""The recall pipeline of one tenant: channels → live rows → fusion → scoring → top results,
the recall records written after the response, and links followed one hop.

Channels, run concurrently: `vector` (cosine in the tenant's namespace, filtered by tenant
and embedding config, top `candidate_pool` ≤ 100), `keyword` (BM25F over the tenant's
keyword index; the user's text only becomes bound parameters) and `exact` (facts whose
subject or predicate equals a string the query names). Only live rows are returned (active,
inside their validity window, matching the filters); a vector whose row is gone is dropped
and deleted. Candidates do not depend on the limit, so a longer ranking starts with what a
shorter one returns.

Recall records (the returned facts' `last_recalled_at` / `recall_count` and the
`memory_retrieved` event) are never lost silently:
* one D1 batch, idempotent: the statistics update only applies while the event id is
  absent and the event insert does nothing when present, so a retried or twice
  written-back record never counts a recall twice;
* retried `RECORD_ATTEMPTS` times with exponential back-off (well inside `waitUntil`'s 30 s);
* then carried over in KV under `recall-pending:<tenant>:<event id>` (no expiry), written
  back after the tenant's next recall (a KV list at most every `WRITE_BACK_CHECK_SECONDS`
  per isolate and tenant) and by the daily cron, deleted from KV only once D1 accepted it;
* committed after a subject erase began (its mark in `erasure_marks`): stored without the
  query text, since the erase may not have seen it;
* at most `MAX_CARRIED` records per tenant wait in KV (approximate: KV lists are eventually
  consistent); beyond it, without KV, or when KV fails too, logged at ERROR with the payload.

Reranking (`RetrievalConfig.rerank`, at the end) scores each of the best `depth` candidates as
question-passage pairs, the passage being the memory with `neighbours` memories either side
of it in its session. The reranker is the bound `Reranker` port (Workers AI's
`@cf/baai/bge-reranker-base`) or, without one, `EmbedderReranker`: the cosine of question and
the passage's closest sentence under the tenant's embedder (no cross-encoder ships its
weights in a PyPI wheel; docs/semantic-memory.md). The new order blends the fused score and
the reranker's, each min-max normalised over the head (`fused + weight · reranker`), in the
fused scores' range, so the head still ranks above the rest. A failing reranker leaves the
fused order (logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from agent_memory.governance.writes import MemoryEvent, RetrievedItem, memory_retrieved
from agent_memory.retrieval import (
    ChannelHit,
    ChannelResult,
    FusedItem,
    Parts,
    RerankConfig,
    asks,
    asks_for_several,
    breakdown,
    compound_forms,
    exact_match_candidates,
    fuse,
    lift_replies,
    query_terms,
    question_window,
    rank_candidates,
    sentences,
    spread,
)
from agent_memory.tiers.semantic import keyword_index
from agent_memory.tiers.semantic.keyword_index import KeywordQuery
from agent_memory.tiers.semantic.models import (
    BREAKDOWN_PARTS,
    ContextMemory,
    FactScope,
    MemoryInputError,
    RecalledFact,
    RecallFilters,
    RecallResult,
    check_matrix,
    delete_own_vectors,
    embedding_tag,
    ms,
    open_facts,
)
from agent_memory.tiers.semantic.statements import Candidate, current_first, holds_wanted
from bindings.ports.d1 import D1Statement
from bindings.ports.embedder import Embedder
from bindings.ports.kv import KV_MAX_LIST_LIMIT, KVNamespace
from bindings.ports.reranker import Reranker
from bindings.ports.sql import Row, SqlValue
from bindings.ports.vectorize import VECTORIZE_MAX_TOP_K

log = logging.getLogger(__name__)


RECORD_ATTEMPTS = 4
RECORD_BASE_DELAY = 0.2  # seconds: 0.2, 0.4, 0.8 between attempts
CARRY_PREFIX = "recall-pending"
MAX_CARRIED = 1_000  # per tenant, in KV
# Written back after one recall: two D1 statements each, inside the free plan's 50 queries
# per invocation together with the recall's own ~7.
WRITE_BACK_AFTER_RECALL = 10
MAX_WRITE_BACK = 100  # per call of `write_back` (the daily cron's share per tenant)
WRITE_BACK_CHECK_SECONDS = 300.0
# An erase whose mark is up to this much older than the recall counts as concurrent with it:
# the two may run in isolates whose clocks differ slightly.
ERASE_CLOCK_MARGIN_MS = 60_000


class RecallRecord(BaseModel):
    """What one recall leaves behind: its event and the facts whose statistics it bumps.
    Kept in KV as its JSON (`model_dump_json`)."""

    event: MemoryEvent
    fact_ids: list[str]
    now: float


def carry_prefix(tenant_id: str) -> str:
    """The KV prefix of the tenant's carried-over records."""
    return f"{CARRY_PREFIX}:{tenant_id}:"


async def carried_tenants(kv: KVNamespace) -> list[str]:
    """Tenants with records waiting in KV (from at most 10 list pages), sorted."""
    tenants: set[str] = set()
    cursor: str | None = None
    for _ in range(10):
        page = await kv.list(prefix=f"{CARRY_PREFIX}:", cursor=cursor)
        tenants.update(key.name.split(":")[1] for key in page.keys)
        if page.list_complete or not page.cursor:
            break
        cursor = page.cursor
    return sorted(tenants)


# Per isolate, per tenant: when its KV carry-over was last looked at (clock seconds). Only
# saves KV list calls; the records themselves are in KV. Absent: look at the next recall.
_CHECKED: dict[str, float] = {}


class RecallRecorder:
    """Writes one tenant's recall records after the response."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope

    def _statements(self, record: RecallRecord) -> list[D1Statement]:
        event_id = record.event.event_id
        return [
            self._s.sql(
                "UPDATE semantic_facts SET last_recalled_at = ?2, recall_count = recall_count + 1 "
                "WHERE tenant_id = ?1 AND fact_id IN (SELECT value FROM json_each(?3)) AND NOT "
                "EXISTS (SELECT 1 FROM memory_events AS e WHERE e.tenant_id = ?1 "
                "AND e.event_id = ?4)",
                ms(record.now),
                json.dumps(record.fact_ids),
                event_id,
            ),
            self._s.events.statement(record.event, if_absent=True),
            # A subject erase that began since the recall (its mark, migration 0013) may have
            # looked for the subject before this event existed: the event then keeps no query
            # text. Same transaction, so the erase either sees the event or this sees the mark.
            self._s.events.redact_if_erasing_statement(
                event_id, ms(record.now) - ERASE_CLOCK_MARGIN_MS
            ),
        ]

    async def _write(self, record: RecallRecord, attempts: int = RECORD_ATTEMPTS) -> bool:
        for attempt in range(attempts):
            try:
                # Stats and event commit together (one D1 batch is one transaction).
                await self._s.db.batch(self._statements(record))
                return True
            except Exception as exc:
                log.warning(
                    "recording recall %s (tenant %s), attempt %d failed: %s",
                    record.event.event_id,
                    self._s.tenant_id,
                    attempt + 1,
                    exc,
                )
                if attempt + 1 < attempts and RECORD_BASE_DELAY > 0:
                    await asyncio.sleep(RECORD_BASE_DELAY * 2**attempt)
        return False

    async def write(self, record: RecallRecord) -> None:
        """Write `record`; carry it over in KV if D1 refuses it every time. After a write
        D1 accepted, write back records carried over earlier (when due)."""
        if await self._write(record):
            await self._write_back_if_due()
            return
        await self._carry_over(record)

    def _lost(self, record: RecallRecord, why: str) -> None:
        log.error(
            "recall record %s of tenant %s not written (%s): %s",
            record.event.event_id,
            self._s.tenant_id,
            why,
            record.model_dump_json(),
        )

    async def _carry_over(self, record: RecallRecord) -> None:
        kv = self._s.kv
        if kv is None:
            self._lost(record, f"D1 failed {RECORD_ATTEMPTS} times and no KV is bound")
            return
        prefix = carry_prefix(self._s.tenant_id)
        try:
            waiting = await kv.list(prefix=prefix, limit=min(MAX_CARRIED, KV_MAX_LIST_LIMIT))
            if len(waiting.keys) >= MAX_CARRIED:
                self._lost(record, f"{MAX_CARRIED} records already wait in KV")
                return
            await kv.put(prefix + record.event.event_id, record.model_dump_json())
        except Exception as exc:
            self._lost(record, f"D1 failed {RECORD_ATTEMPTS} times, then KV: {exc}")
            return
        # This isolate knows one waits: look at the tenant's next recall.
        _CHECKED.pop(self._s.tenant_id, None)
        log.warning(
            "recall record %s of tenant %s kept in KV until D1 accepts it",
            record.event.event_id,
            self._s.tenant_id,
        )

    async def _write_back_if_due(self) -> None:
        tenant = self._s.tenant_id
        now = self._s.clock.now()
        last = _CHECKED.get(tenant)
        if self._s.kv is None or (last is not None and now - last < WRITE_BACK_CHECK_SECONDS):
            return
        _CHECKED[tenant] = now
        try:
            if await self.write_back(WRITE_BACK_AFTER_RECALL) == WRITE_BACK_AFTER_RECALL:
                _CHECKED.pop(tenant, None)  # maybe more: continue at the next recall
        except Exception as exc:  # they stay in KV for the next recall or the cron
            log.warning("writing back recall records of tenant %s failed: %s", tenant, exc)

    async def write_back(self, limit: int = MAX_WRITE_BACK) -> int:
        """Write up to `limit` of the tenant's carried-over records to D1 (one attempt
        each, oldest event first), deleting each from KV once D1 accepted it. Stops at the
        first D1 failure. Returns how many were written."""
        kv = self._s.kv
        if kv is None:
            return 0
        page = await kv.list(
            prefix=carry_prefix(self._s.tenant_id), limit=min(limit, KV_MAX_LIST_LIMIT)
        )
        written = 0
        for key in page.keys:
            text = await kv.get(key.name)
            if text is None:  # written back by another isolate meanwhile
                continue
            try:
                record = RecallRecord.model_validate_json(text)
                if record.event.tenant_id != self._s.tenant_id:
                    raise ValueError("the record names another tenant")
            except ValueError as exc:
                log.error("unreadable recall record %s dropped (%s): %s", key.name, exc, text)
                await kv.delete(key.name)
                continue
            if not await self._write(record, attempts=1):
                break  # D1 still refuses: the rest wait too
            await kv.delete(key.name)
            written += 1
        return written


# Fields of `RecallFilters` that say how results come back, not which facts qualify.
NOT_FILTERS = {"reference_date", "neighbours", "context_budget", "diversify"}

# What ranking needs of a candidate row; full rows are read for the returned ones only.
SCORING_COLUMNS = (
    "fact_id, status, valid_from, valid_to, created_at, agent_type, subject, predicate, "
    "confidence, content, updated_at, key_entity, key_attribute, key_source, session_key, "
    "f.fts_rowid AS fts_rowid, "
    # The next memory of its session (`lift_replies`): one seek of semantic_facts_by_session.
    "(SELECT n.fact_id FROM semantic_facts AS n WHERE n.tenant_id = f.tenant_id "
    "AND n.session_key = f.session_key AND n.fts_rowid > f.fts_rowid "
    "ORDER BY n.fts_rowid LIMIT 1) AS reply_id"
)


# Candidates scored exactly and looked at by the later stages: at least this many.
HEAD_WINDOW = 30


class Recaller:
    """Ranks one tenant's live facts for a query."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope
        self._recorder = RecallRecorder(scope)

    async def run(
        self,
        query: str,
        limit: int,
        filters: RecallFilters | None,
        query_vector: Sequence[float] | None,
        *,
        record: bool,
    ) -> RecallResult:
        filters = filters or RecallFilters()
        now = self._s.clock.now()
        # An as-of recall scores recency as it was then.
        scored_at = min(now, filters.as_of) if filters.as_of is not None else now
        # Candidates do not depend on `limit`: `rank(q, 500)` starts with what
        # `recall(q, 5)` returns, in the same order.
        vector_hits, keyword_hits, exact_hits, exact_complete, rows = await self._candidates(
            query, query_vector, filters, now
        )
        stray = [h.id for h in vector_hits if h.id not in rows]
        dropped = list(stray)
        if stray:
            await self.drop_stray(stray)
        # The keyword channel's rows passed the filters in SQL; the others carry `live`.
        live = {fid: row for fid, row in rows.items() if row.get("live", 1)}
        dropped += [fid for fid in rows if fid not in live]
        # The keyword channel is normalised over every channel's candidates, not its own
        # top `pool` only: each live candidate has its exact BM25F score (0 if no term).
        keyword_live = sorted(
            (
                ChannelHit(id=fid, score=float(row["keyword_score"]))
                for fid, row in live.items()
                if float(row["keyword_score"]) > 0
            ),
            key=lambda h: (-h.score, h.id),
        )

        candidates_named = set(exact_match_candidates(query))
        strength = {
            fid: 0.5 * (row["subject"] in candidates_named)
            + 0.5 * (row["predicate"] in candidates_named)
            for fid, row in live.items()
        }
        channels = [
            ChannelResult(
                name="vector",
                hits=[h for h in vector_hits if h.id in live],
                sigmas=self._s.config.fusion.vector_sigmas,
            ),
            ChannelResult(name="keyword", hits=keyword_live, floor=0.0),
        ]
        feature: dict[str, dict[str, float]] = {}
        if exact_complete:
            exact_live = [
                ChannelHit(id=h.id, score=strength.get(h.id, 0.0))
                for h in exact_hits
                if h.id in live and strength.get(h.id, 0.0) > 0
            ]
            exact_live.sort(key=lambda h: (-h.score, h.id))
            channels.append(ChannelResult(name="exact", hits=exact_live, normalize=False))
        else:
            # Too many facts share the named subject/predicate to list them all: the match
            # only scores the other channels' candidates.
            feature["exact"] = {fid: s for fid, s in strength.items() if s > 0}
        embedder = self._s.embedder
        fusion = self._s.config.fusion
        if embedder is not None:
            fusion = fusion.for_model(embedder.config.model)
        fused = fuse(channels, fusion, feature_scores=feature)
        weights = self._s.config.weights_for("semantic")
        need = max(HEAD_WINDOW, 2 * limit)
        period = None
        share = self._s.config.question_dates
        if filters.valid_from_after is None and filters.valid_from_before is None and share > 0:
            period = question_window(query, filters.reference_date or now)
        # A period reorders the whole list: every candidate is then scored exactly.
        ranked = rank_candidates(fused, live, weights, scored_at, len(fused) if period else need)
        total = {item.id: parts[0] for parts, item in ranked}

        def by_total(pair: tuple[Parts, FusedItem]) -> tuple[float, float, str]:
            """Best current total first, then the better relevance, then the id."""
            return (-total[pair[1].id], -pair[0][1], pair[1].id)

        if period is not None:
            start, end = ms(period[0]), ms(period[1])
            for fid in total:
                inside = start <= int(live[fid]["valid_from"]) < end
                total[fid] = (1 - share) * total[fid] + share * inside
            ranked.sort(key=by_total)
        replies = self._s.config.replies
        if replies.depth:
            best = [item.id for _, item in ranked[: replies.depth]]
            lifted = lift_replies(
                best,
                {fid: live[fid].get("reply_id") for fid in best},
                {fid: asks(str(live[fid]["content"]), replies.said) for fid in best},
                total,
                replies,
            )
            if lifted:
                total.update(lifted)
                ranked.sort(key=by_total)
        rerank = self._s.config.rerank
        texts = [str(live[item.id]["content"]) for _, item in ranked[: rerank.depth]]
        applies = rerank.applies(self._s.tenant_id, texts)
        reranker = self._s.reranker if applies and rerank.scorer == "bound" else None
        if applies and reranker is None and embedder is not None:
            reranker = EmbedderReranker(embedder)
        if applies and reranker is not None:
            head = [(item.id, total[item.id], live[item.id]) for _, item in ranked[: rerank.depth]]
            total.update(await rerank_head(self._s, reranker, rerank, query, head) or {})
            ranked[: rerank.depth] = sorted(
                ranked[: rerank.depth], key=lambda pair: (-total[pair[1].id], pair[1].id)
            )
        window = self._s.config.current.window
        if self._s.config.answer_kind > 0:
            holding = [
                item.id
                for _, item in ranked[:window]
                if holds_wanted(query, str(live[item.id]["content"]))
            ]
            total.update({fid: total[fid] * (1 + self._s.config.answer_kind) for fid in holding})
            ranked[:window] = sorted(ranked[:window], key=by_total)
        # What is true now (`statements.current_first`): among the best candidates, one
        # about another entity than the question's goes below those about it, and the
        # newest of the statements that answer the question alike comes first (the older
        # stay, just below, marked possibly outdated). Read off the words at recall time,
        # so nothing is lost when the reading is wrong; supersession is the reconciler's.
        statements = [
            Candidate(
                fact_id=item.id,
                score=total[item.id],
                text=str(live[item.id]["content"]),
                stated=(int(live[item.id]["valid_from"]), int(live[item.id]["created_at"])),
                similarity=item.channels["vector"].raw if "vector" in item.channels else None,
                session=live[item.id].get("session_key"),
            )
            for _, item in ranked[:window]
        ]
        # A question about a period ("last month") asks what was true then, not now.
        moved, stale = (
            ({}, {}) if period else current_first(query, statements, self._s.config.current)
        )
        if moved:
            total.update(moved)
            ranked.sort(key=by_total)
        several = filters.diversify
        if several is None:
            several = self._s.config.auto_diversify and asks_for_several(query)
        if several and self._s.config.session_spread > 0:
            by_id = {item.id: (parts, item) for parts, item in ranked[:need]}
            sessions = {fid: live[fid].get("session_key") for fid in by_id}
            spread_head = spread(list(by_id), sessions, total, self._s.config.session_spread)
            total.update({fid: max(0.0, score) for fid, score in spread_head})
            ranked[:need] = [by_id[fid] for fid, _ in spread_head]
        top = ranked[:limit]
        # Full rows only for what is returned (content and metadata can be large).
        full = await self._s.load_rows([item.id for _, item in top])
        opened = {f.fact_id: f for f in await open_facts(list(full.values()), self._s.personal)}
        results = [
            RecalledFact(
                fact=opened[item.id],
                score=total[item.id],
                breakdown=breakdown(parts, weights),
                channels=item.channels,
                possibly_outdated=item.id in stale,
            )
            for parts, item in top
            if item.id in opened  # deleted between the two reads: never return it
        ]
        if filters.neighbours:
            await attach_context(
                self._s, results, live, filters.neighbours, filters.context_budget or 10
            )
        counts = {
            "vector": len(vector_hits),
            "keyword": len(keyword_hits),
            "exact": len(exact_hits) if exact_complete else -1,
        }
        result = RecallResult(results=results, candidates=counts, dropped=dropped)
        if record:
            result.event_id = await self.record(query, limit, result, now)
        return result

    async def _candidates(
        self,
        query: str,
        query_vector: Sequence[float] | None,
        filters: RecallFilters,
        now: float,
    ) -> tuple[list[ChannelHit], list[ChannelHit], list[ChannelHit], bool, dict[str, Row]]:
        """The vector, keyword and exact hits, whether the exact channel listed all its
        matches, and every candidate's row (`rows`) by fact id. The vector
        query is in flight while the keyword and exact channels run and their candidates'
        rows are read (on Cloudflare Vectorize answers remotely, overlapping the D1 calls),
        so only the vector-only candidates' rows wait for it."""
        pool = self._s.config.candidate_pool
        vector = asyncio.ensure_future(
            self.vector(query, query_vector, filters, min(pool, VECTORIZE_MAX_TOP_K))
        )
        try:
            (keyword_hits, rows, prepared), (exact_hits, complete) = await asyncio.gather(
                self.keyword(query, filters, pool, now),
                self.exact(query, filters, pool, now),
            )
            exact_only = [h.id for h in exact_hits if complete and h.id not in rows]
            rows.update(await self.rows(exact_only, prepared, filters, now))
        except BaseException:
            vector.cancel()
            await asyncio.gather(vector, return_exceptions=True)
            raise
        vector_hits = await vector
        rest = list(dict.fromkeys(h.id for h in vector_hits if h.id not in rows))
        rows.update(await self.rows(rest, prepared, filters, now))
        return vector_hits, keyword_hits, exact_hits, complete, rows

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
            values = [float(v) for v in matrix[0]]
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
            # tenant_id on top of the namespace (ADR-0030 defence in depth) and the embedding
            # config, so a query never compares vectors of different models (DESIGN inv. 6).
            filter={
                "tenant_id": self._s.tenant_id,
                "embedding": embedding_tag(embedder.config),
                **({} if filters.agent_type is None else {"agent_type": filters.agent_type}),
            },
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
        after, before = filters.valid_from_after, filters.valid_from_before
        for clause, value in (
            ("f.agent_type = ?", filters.agent_type),
            ("f.subject = ?", filters.subject),
            ("f.predicate = ?", filters.predicate),
            ("f.confidence >= ?", filters.min_confidence),
            ("f.valid_from >= ?", None if after is None else ms(after)),
            ("f.valid_from < ?", None if before is None else ms(before)),
        ):
            if value is not None:
                sql += f" AND {clause}"
                params.append(value)
        return sql, params

    async def keyword(
        self, query: str, filters: RecallFilters, limit: int, now: float
    ) -> tuple[list[ChannelHit], dict[str, Row], KeywordQuery | None]:
        """The keyword channel's candidates (`keyword_index.candidates`),
        their rows (as `rows` gives them), and the prepared query that scores any other
        candidate (`rows`)."""
        terms = query_terms(query)
        if not terms:
            return [], {}, None
        prepared = await keyword_index.prepare(
            self._s, terms, self._s.config.keyword.params(), compound_forms(query)
        )
        extra, params = self._row_filter_sql(filters, now)
        narrowed = filters.model_dump(exclude_none=True, exclude=NOT_FILTERS) != {}
        found = await keyword_index.candidates(
            self._s, prepared, extra, params, limit, narrowed=narrowed, columns=SCORING_COLUMNS
        )
        hits = [ChannelHit(id=str(r["fact_id"]), score=float(r["channel_score"])) for r in found]
        return hits, {str(r["fact_id"]): r for r in found}, prepared

    async def rows(
        self,
        fact_ids: Sequence[str],
        prepared: KeywordQuery | None,
        filters: RecallFilters,
        now: float,
    ) -> dict[str, Row]:
        """This tenant's rows among `fact_ids` (any status; the columns ranking needs), each
        with `keyword_score`, its exact BM25F for the query (0.0 without keyword terms), and
        `live` (0 when the row may not be returned: not live or filtered out), by fact id:
        one statement however many ids (they are one JSON parameter)."""
        if not fact_ids:
            return {}
        score, score_params = keyword_index.score_column(prepared)
        live, live_params = self._row_filter_sql(filters, now)
        result = (
            await self._s.db.prepare(
                f"SELECT {SCORING_COLUMNS}, {score} AS keyword_score, "
                f"COALESCE(1{live}, 0) AS live FROM semantic_facts AS f "
                "WHERE f.tenant_id = ? AND f.fact_id IN (SELECT value FROM json_each(?))"
            )
            .bind(*score_params, *live_params, self._s.tenant_id, json.dumps(list(fact_ids)))
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

    async def drop_stray(self, fact_ids: Sequence[str]) -> None:
        """Delete this tenant's vectors among `fact_ids` whose row is gone (a delete whose
        vector step failed). Best effort: recall already ignores them, so a failure here only
        delays the cleanup."""
        try:
            ids = list(dict.fromkeys(fact_ids))
            rows = await self._s.load_rows(ids)
            orphans = [fid for fid in ids if fid not in rows]
            await delete_own_vectors(self._s.vectors, self._s.tenant_id, orphans)
        except Exception as exc:
            log.warning(
                "could not delete %d stray vector(s) of tenant %s: %s",
                len(fact_ids),
                self._s.tenant_id,
                exc,
            )

    async def record(
        self, query: str, top_k: int, result: RecallResult, now: float | None = None
    ) -> str:
        """Record `result` (a run's, or the part of it a caller showed) at `now` (default:
        the clock's): one `memory_retrieved` event and the returned facts' recall statistics,
        after the response. Returns the event id."""
        now = self._s.clock.now() if now is None else now
        event = memory_retrieved(
            tenant_id=self._s.tenant_id,
            tier="semantic",
            now=now,
            query=query,
            top_k=top_k,
            results=[
                RetrievedItem(
                    id=r.fact.fact_id,
                    score=round(r.score, 6),
                    **{part: round(getattr(r.breakdown, part), 6) for part in BREAKDOWN_PARTS},
                )
                for r in result.results
            ],
            candidates=result.candidates,
            dropped=result.dropped,
            agent_type=self._s.agent_type,
            run_id=self._s.run_id,
        )
        # Written after the response (now, without a background), retried, never lost.
        ids = [r.fact.fact_id for r in result.results]
        record = RecallRecord(event=event, fact_ids=ids, now=now)
        await self._s.after_response(self._recorder.write(record), "recording a recall")
        return event.event_id


class EmbedderReranker:
    """The reranker when none is bound: a passage scores the cosine, under an embedder, of
    the question and the passage's closest sentence (`retrieval.sentences`, each keeping its
    line's label). A bi-encoder embeds a long memory as the average of what it says, so the
    one sentence that answers is diluted by the rest; scoring sentences lets it count whole,
    as a cross-encoder's attention would (figures: docs/semantic-memory.md)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def model(self) -> str:
        return f"embedder:{self._embedder.config.model}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        import numpy as np  # here, not at import: recall without this reranker needs none

        split = [sentences(text) for text in texts]
        flat = [s for parts in split for s in parts]
        matrix = await self._embedder.embed([query, *flat])
        check_matrix(matrix, len(flat) + 1, self._embedder.config)
        vectors = np.asarray(matrix, dtype=np.float64)
        # Each passage's best sentence: `sentences` never returns an empty list, so every
        # passage owns a non-empty run of `flat` starting at its offset.
        starts = np.cumsum([0, *(len(parts) for parts in split[:-1])])
        return [float(v) for v in np.maximum.reduceat(vectors[1:] @ vectors[0], starts)]


_SIDE = (
    "SELECT j.key AS hit, n.fact_id, n.content, n.valid_from, n.fts_rowid "
    "FROM json_each(?1) AS j, semantic_facts AS n WHERE n.tenant_id = ?2 AND n.fts_rowid IN "
    "(SELECT p.fts_rowid FROM semantic_facts AS p WHERE p.tenant_id = ?2 "
    "AND p.session_key = json_extract(j.value, '$[0]') AND p.status = 'active' "
    "AND p.fts_rowid {op} json_extract(j.value, '$[1]') ORDER BY p.fts_rowid {order} LIMIT ?{n})"
)


async def session_neighbours(
    scope: FactScope, rows: Sequence[Row], before: int, after: int
) -> dict[str, list[Row]]:
    """For each row with a session: up to `before` / `after` active memories of its session
    written just before / after it, in session order (by fact id; rows without a session
    have none). One statement however many rows."""
    keyed = [r for r in rows if r.get("session_key") is not None and r.get("fts_rowid")]
    if not keyed or before + after <= 0:
        return {}
    sides = (_SIDE.format(op="<", order="DESC", n=3), _SIDE.format(op=">", order="ASC", n=4))
    hits = [[r["session_key"], int(r["fts_rowid"])] for r in keyed]
    result = (
        await scope.db.prepare(" UNION ALL ".join(sides))
        .bind(json.dumps(hits), scope.tenant_id, before, after)
        .all()
    )
    found: dict[str, list[Row]] = {}
    for row in result.results:
        found.setdefault(str(keyed[int(row["hit"])]["fact_id"]), []).append(row)
    return {fid: sorted(near, key=lambda r: int(r["fts_rowid"])) for fid, near in found.items()}


def passage(row: Row, near: Sequence[Row]) -> str:
    """The memory with its neighbours around it, in session order."""
    own = int(row.get("fts_rowid") or 0)
    texts = [str(r["content"]) for r in near if int(r["fts_rowid"]) < own]
    texts.append(str(row["content"]))
    texts += [str(r["content"]) for r in near if int(r["fts_rowid"]) > own]
    return "\n".join(texts)


def _unit(values: Sequence[float]) -> list[float]:
    low, high = min(values), max(values)
    return [(v - low) / (high - low) if high > low else 0.0 for v in values]


async def rerank_head(
    scope: FactScope,
    reranker: Reranker,
    config: RerankConfig,
    query: str,
    head: Sequence[tuple[str, float, Row]],
) -> dict[str, float] | None:
    """New scores for `head` (fact id, fused total, row; best first), in the head's score
    range, or None when the reranker failed (the fused order stands)."""
    if len(head) < 2:
        return None
    rows = [row for _, _, row in head]
    near = await session_neighbours(scope, rows, config.neighbours, config.neighbours)
    texts = [passage(row, near.get(fid, [])) for fid, _, row in head]
    try:
        scores = await reranker.rerank(query, texts)
    except Exception as exc:  # an optional stage: recall answers without it
        log.warning(
            "reranking with %s failed for tenant %s: %s", reranker.model, scope.tenant_id, exc
        )
        return None
    fused = [total for _, total, _ in head]
    blend = [f + config.weight * r for f, r in zip(_unit(fused), _unit(scores), strict=True)]
    low, high = min(fused), max(fused)
    return {fid: low + (high - low) * b for (fid, _, _), b in zip(head, _unit(blend), strict=True)}


async def attach_context(
    scope: FactScope,
    results: Sequence[RecalledFact],
    rows: Mapping[str, Row],
    per_side: int,
    budget: int,
) -> None:
    """Give each result the memories next to it in its session (`per_side` either side, at
    most `budget` in all, best results first; none already among the results)."""
    returned = {r.fact.fact_id for r in results}
    near = await session_neighbours(
        scope, [rows[fid] for fid in returned if fid in rows], per_side, per_side
    )
    for result in results:
        session = near.get(result.fact.fact_id, [])  # in session order
        own = int(rows[result.fact.fact_id].get("fts_rowid") or 0)
        before = [m for m in session if int(m["fts_rowid"]) < own]
        after = [m for m in session if int(m["fts_rowid"]) > own]
        # Each neighbour's place: -1 just before the result, 1 just after it.
        offset = {str(m["fact_id"]): -1 - i for i, m in enumerate(reversed(before))}
        offset |= {str(m["fact_id"]): 1 + i for i, m in enumerate(after)}
        around = [n for n in session if n["fact_id"] not in returned]
        # nearest first, so a tight budget keeps the closest turns
        around.sort(key=lambda n: abs(int(n["fts_rowid"]) - own))
        for n in around[: max(0, budget)]:
            result.context.append(
                ContextMemory(
                    fact_id=str(n["fact_id"]),
                    content=str(n["content"]),
                    valid_from=int(n["valid_from"]),
                    offset=offset[str(n["fact_id"])],
                )
            )
        result.context.sort(key=lambda c: c.offset)
        budget -= len(result.context)
