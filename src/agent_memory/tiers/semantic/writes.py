"""The write path of semantic facts: rows, vectors and their repair.

`FactWriter.learn_many` validates every input, checks the write policy, looks the content
hashes up (an `active` fact is returned as it is, a `pending_vector` one is completed),
embeds what is new in batches, inserts rows `pending_vector`, upserts the vectors and marks
the rows `active` (on failure they stay pending for `complete_pending`). `delete` removes the
row (the source of truth) before the vector; recall deletes vectors whose row is gone
(`Recaller.drop_stray`, DESIGN invariant 5).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agent_memory.governance.personal_data import public_view
from agent_memory.governance.writes import WriteDenied, fact_proposal
from agent_memory.ids import (
    IDS_PER_STATEMENT,
    chunks,
    content_hash,
    is_ulid,
    new_ulid,
    run_batches,
    ulid_time_ms,
)
from agent_memory.tiers.semantic.keys import FactKey, derive_key, entity_candidates
from agent_memory.tiers.semantic.keyword_index import ContextPlan, extend_following, plan_context
from agent_memory.tiers.semantic.models import (
    EMBED_BATCH,
    DeleteResult,
    FactInput,
    FactScope,
    LearnResult,
    MemoryInputError,
    check_matrix,
    delete_own_vectors,
    embedding_tag,
    ms,
)
from bindings.ports.d1 import D1Statement
from bindings.ports.embedder import EmbeddingConfig, Vectors
from bindings.ports.sql import Row, SqlValue
from bindings.ports.vectorize import VECTORIZE_MAX_BATCH, VectorRecord

log = logging.getLogger(__name__)


# The columns a vector's metadata is built from (a row read back, or a new fact's values).
VECTOR_COLUMNS = (
    "fact_id, agent_type, subject, predicate, object, confidence, learned_from_run_id, created_at"
)


# What a key is derived from: (content, subject, predicate, metadata).
KeyedText = tuple[str, str, str, dict[str, Any]]


async def derive_keys(scope: FactScope, inputs: Sequence[KeyedText]) -> list[FactKey]:
    """Each input's key (`keys.derive_key`), with the names the tenant already has facts
    about found in one indexed lookup (`known_subject`)."""
    names = [name for content, *_ in inputs for name in entity_candidates(content)]
    wanted = list(dict.fromkeys(names))[:IDS_PER_STATEMENT]
    known: set[str] = set()
    if wanted:
        marks = ", ".join("?" for _ in wanted)
        result = await scope.sql(
            "SELECT DISTINCT key_entity FROM semantic_facts WHERE tenant_id = ? "
            f"AND key_entity IN ({marks})",
            *wanted,
        ).all()
        known = {str(row["key_entity"]) for row in result.results}
    return [
        derive_key(
            content,
            subject=subject,
            predicate=predicate,
            # Personal fields never feed a derived, indexed value (docs/personal-data.md).
            metadata=public_view(metadata),
            known_entities=known,
        )
        for content, subject, predicate, metadata in inputs
    ]


# A fact's content hash as `semantic_facts` keeps it: the first 24 hex characters (96 bits;
# two texts about one subject would have to share them to be taken for one fact), about 80
# bytes a fact fewer than all 64 in the row and its UNIQUE index. `LearnResult` says all of it.
STORED_HASH_CHARS = 24
PENDING_RETRY_ON_WRITE = 10
PAIRS_PER_STATEMENT = 45  # (subject, hash) pairs: 2 parameters each + tenant


async def find_by_hash(
    scope: FactScope, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], Row]:
    """Existing rows for (subject, content hash) pairs, by the pairs asked for. `subject IN
    (..) AND content_hash IN (..)` is a range lookup on the UNIQUE (tenant_id, subject,
    content_hash) index (an OR of pairs may be planned as a scan); the few extra rows
    of the cross product are dropped here. Rows hold the hash cut to `STORED_HASH_CHARS`."""
    found: dict[tuple[str, str], Row] = {}
    for chunk in chunks(list(dict.fromkeys(keys)), PAIRS_PER_STATEMENT):
        subjects = list(dict.fromkeys(subject for subject, _ in chunk))
        digests = list(dict.fromkeys(digest for _, digest in chunk))
        result = await scope.sql(
            f"SELECT status, content_hash, {VECTOR_COLUMNS} FROM semantic_facts WHERE"
            f" tenant_id = ? AND subject IN ({', '.join('?' for _ in subjects)}) "
            f"AND content_hash IN (SELECT value FROM json_each(?))",
            *subjects,
            json.dumps([digest[:STORED_HASH_CHARS] for digest in digests]),
        ).all()
        by_stored = {(s, d[:STORED_HASH_CHARS]): (s, d) for s, d in chunk}
        for row in result.results:
            key = by_stored.get((row["subject"], str(row["content_hash"])))
            if key is not None:
                found[key] = row
    return found


def new_row(
    scope: FactScope,
    fact: FactInput,
    fact_id: str,
    digest: str,
    config: EmbeddingConfig,
    now: float,
    key: FactKey,
    plan: ContextPlan,
    metadata: dict[str, Any],
    event_in_row: bool,
) -> dict[str, SqlValue]:
    """The `semantic_facts` row of one new fact (status `pending_vector`), with its derived
    key and its keyword-index plan; `event_in_row`: the row is its write's event
    (`WriteGate.event_in_row`)."""
    valid_from = ms(fact.valid_from) if fact.valid_from is not None else ms(now)
    valid_to = ms(fact.valid_to) if fact.valid_to is not None else None
    return {
        "tenant_id": scope.tenant_id,
        "fact_id": fact_id,
        "agent_type": fact.agent_type or scope.agent_type,
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object": fact.object,
        "content": fact.content,
        "metadata": json.dumps(metadata, separators=(",", ":"), ensure_ascii=False),
        "confidence": float(fact.confidence),
        "source": fact.source,
        "learned_from_run_id": fact.learned_from_run_id or scope.run_id,
        "embedding_provider": config.provider,
        "embedding_model": config.model,
        "embedding_dimensions": config.dimensions,
        "content_hash": digest[:STORED_HASH_CHARS],
        "status": "pending_vector",
        "valid_from": valid_from,
        "valid_to": None if valid_to is None else max(valid_to, valid_from),
        # The id's own time: the event log orders in-row events by id (`EventLog.rows`).
        "created_at": ulid_time_ms(fact_id),
        "updated_at": ms(now),
        "key_entity": key.entity,
        "key_attribute": key.attribute,
        "key_source": key.source,
        "session_key": plan.session,
        "index_terms": plan.entry.index_terms,
        "index_length": plan.entry.length,
        "context_length": plan.entry.context_length,
        **({"event_in_row": 1} if event_in_row else {}),  # the column's default is 0
    }


def insert_statement(scope: FactScope, row: dict[str, SqlValue]) -> D1Statement:
    """The INSERT of `row`; a (subject, content hash) already present is left as it is."""
    return scope.db.prepare(
        f"INSERT INTO semantic_facts ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)}) "
        "ON CONFLICT (tenant_id, subject, content_hash) DO NOTHING"
    ).bind(*row.values())


def _found(row: Row, digest: str) -> LearnResult:
    """The result of learning a fact that is already stored (`row`); `digest`: its full
    content hash (the row may hold only its first characters)."""
    return LearnResult(
        fact_id=row["fact_id"], status=row["status"], created=False, content_hash=digest
    )


class FactWriter:
    """Learns and deletes one tenant's facts, and writes and completes their vectors."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope

    def _vector_record(self, job: Row, values: Any, config: EmbeddingConfig) -> VectorRecord:
        metadata: dict[str, Any] = {
            "tenant_id": self._s.tenant_id,
            "agent_type": job["agent_type"],
            "fact_id": job["fact_id"],
            # No subject, predicate or object: nothing reads them from Vectorize (recall asks
            # for no metadata), and a vector left by a crash before its row was written must
            # hold no text an erase could not reach (vectors are found through their rows).
            "confidence": float(job["confidence"]),
            "created_at": int(job["created_at"]),
            "embedding": embedding_tag(config),
            "embedding_provider": config.provider,
            "embedding_model": config.model,
            "embedding_dimensions": config.dimensions,
        }
        if job.get("learned_from_run_id"):
            metadata["learned_from_run_id"] = job["learned_from_run_id"]
        return VectorRecord(
            id=job["fact_id"],
            values=[float(v) for v in values],
            namespace=self._s.namespace,
            metadata=metadata,
        )

    async def upsert(
        self, jobs: Sequence[Row], vectors: Mapping[str, Any], config: EmbeddingConfig
    ) -> str | None:
        """Upsert the jobs' vectors: None on success, else the error text."""
        records = [self._vector_record(job, vectors[job["fact_id"]], config) for job in jobs]
        try:
            for chunk in chunks(records, VECTORIZE_MAX_BATCH):
                await self._s.vectors.upsert(chunk)
        except Exception as exc:  # any vector failure leaves a retryable pending row
            log.warning(
                "vector write failed for %d fact(s) of tenant %s; rows stay pending: %s",
                len(records),
                self._s.tenant_id,
                exc,
            )
            return f"vector write failed: {exc}"
        return None

    async def activate(
        self,
        jobs: Sequence[Row],
        config: EmbeddingConfig,
        now: float,
        also: Sequence[D1Statement] = (),
    ) -> str | None:
        """Mark the jobs' rows active (with `also` in the same batch): None on success, else
        the error text (the rows stay `pending_vector`)."""
        if not jobs and not also:
            return None
        try:
            statements = list(also)
            for chunk in chunks([job["fact_id"] for job in jobs], IDS_PER_STATEMENT - 5):
                marks = ", ".join("?" for _ in chunk)
                statements.append(
                    self._s.db.prepare(
                        "UPDATE semantic_facts SET status = 'active', updated_at = ?, "
                        "embedding_provider = ?, embedding_model = ?, embedding_dimensions = ? "
                        f"WHERE tenant_id = ? AND fact_id IN ({marks}) "
                        "AND status = 'pending_vector'"
                    ).bind(
                        ms(now),
                        config.provider,
                        config.model,
                        config.dimensions,
                        self._s.tenant_id,
                        *chunk,
                    )
                )
            await run_batches(self._s.db, statements)
        except Exception as exc:
            log.warning(
                "activating %d fact(s) of tenant %s failed; rows stay pending: %s",
                len(jobs),
                self._s.tenant_id,
                exc,
            )
            return f"activation failed: {exc}"
        return None

    async def complete_pending(self, limit: int = 100) -> int:
        """`SemanticMemory.complete_pending`."""
        embedder = self._s.require_embedder()
        result = await self._s.sql(
            f"SELECT content, {VECTOR_COLUMNS} FROM semantic_facts WHERE"
            " tenant_id = ? AND status = 'pending_vector' ORDER BY created_at LIMIT ?",
            max(1, min(limit, 1000)),
        ).all()
        done = 0
        for batch in chunks(result.results, EMBED_BATCH):
            matrix = await embedder.embed([row["content"] for row in batch])
            check_matrix(matrix, len(batch), embedder.config)
            vectors = {row["fact_id"]: matrix[pos] for pos, row in enumerate(batch)}
            # The vectors, then the rows active; on failure they stay pending for the next run.
            error = await self.upsert(batch, vectors, embedder.config) or await self.activate(
                batch, embedder.config, self._s.clock.now()
            )
            done += len(batch) if error is None else 0
        return done

    def validate_facts(self, facts: Sequence[FactInput | Mapping[str, Any]]) -> list[FactInput]:
        out: list[FactInput] = []
        for index, fact in enumerate(facts):
            if isinstance(fact, FactInput):
                out.append(fact)
                continue
            if not isinstance(fact, Mapping):
                raise MemoryInputError(
                    "a fact must be a JSON object",
                    [{"field": f"[{index}]", "problem": "not an object"}],
                )
            try:
                out.append(FactInput.model_validate(dict(fact)))
            except ValidationError as exc:
                prefix = f"[{index}]." if len(facts) > 1 else ""
                raise MemoryInputError.from_validation(exc, "fact", prefix) from None
        return out

    async def learn_many(self, facts: Sequence[FactInput | Mapping[str, Any]]) -> list[LearnResult]:
        """`SemanticMemory.learn_many`."""
        inputs = self.validate_facts(facts)
        if not inputs:
            return []
        proposals = [
            fact_proposal(
                dict(fact),
                agent_type=fact.agent_type or self._s.agent_type,
                run_id=fact.learned_from_run_id or self._s.run_id,
                in_row=True,
            )
            for fact in inputs
        ]
        try:
            self._s.gate.check_all(proposals)
        except WriteDenied as denied:
            problems = [{"field": v.code, "problem": v.message} for v in denied.violations]
            raise MemoryInputError(str(denied), problems, code=denied.code) from None
        if not self._s.personal.can_seal and any(
            p.personal_fields() is not None for p in proposals
        ):
            raise MemoryInputError(
                "personal data cannot be stored: this deployment has no MEMORY_PII_KEKS "
                "(docs/personal-data.md); nothing was written",
                code="personal_data_unavailable",
            )
        embedder = self._s.require_embedder()
        now = self._s.clock.now()
        hashes = [content_hash(f.content) for f in inputs]
        first_of: dict[tuple[str, str], int] = {}
        for index, fact in enumerate(inputs):
            first_of.setdefault((fact.subject, hashes[index]), index)
        items = [
            (
                fact.session or fact.learned_from_run_id or self._s.run_id,
                fact.content,
                fact.valid_from if fact.valid_from is not None else now,
            )
            for fact in inputs
        ]
        # One round trip for every lookup; the embedding joins it when no text needs its
        # session's earlier memories (a fact without a session is embedded as written), at
        # the cost of embedding a text the hash lookup then finds stored.
        firsts = list(first_of.values())
        early = len(firsts) <= EMBED_BATCH and all(items[i][0] is None for i in firsts)
        existing, keys, (plans, before_call), early_matrix, _ = await asyncio.gather(
            find_by_hash(self._s, list(first_of)),
            derive_keys(self._s, [(f.content, f.subject, f.predicate, f.metadata) for f in inputs]),
            plan_context(self._s, items),
            embedder.embed([inputs[i].content for i in firsts]) if early else asyncio.sleep(0),
            self._s.gate.admitted(),  # nothing is written before the caller is admitted
        )
        if early_matrix is not None:
            check_matrix(early_matrix, len(firsts), embedder.config)
            early_rows = {index: early_matrix[pos] for pos, index in enumerate(firsts)}
        results: dict[int, LearnResult] = {}
        todo: list[int] = []  # indexes (first occurrences) that need a vector
        failed = False
        for key, index in first_of.items():
            row = existing.get(key)
            if row is not None and row["status"] != "pending_vector":
                results[index] = _found(row, hashes[index])
            else:
                todo.append(index)
        for batch in chunks(todo, EMBED_BATCH):
            if early_matrix is not None:
                matrix: Vectors = [early_rows[i] for i in batch]
            else:
                texts = [plans[i].embed_text for i in batch]
                matrix = await embedder.embed(texts)
                check_matrix(matrix, len(texts), embedder.config)
            jobs: dict[int, Row] = {}
            created: dict[int, bool] = {}
            inserts: list[tuple[int, D1Statement]] = []
            for index in batch:
                fact = inputs[index]
                row = existing.get((fact.subject, hashes[index]))
                if row is not None:  # left pending earlier: complete it now
                    jobs[index] = row
                    created[index] = False
                    continue
                fact_id = new_ulid(now)
                # Sealed here, once: the row holds only ciphertext of the personal fields.
                metadata = await self._s.personal.seal(
                    fact.subject, fact_id, "metadata", fact.metadata
                )
                jobs[index] = new_row(
                    self._s,
                    fact,
                    fact_id,
                    hashes[index],
                    embedder.config,
                    now,
                    keys[index],
                    plans[index],
                    metadata,
                    self._s.gate.event_in_row(proposals[index]),
                )
                inserts.append((index, insert_statement(self._s, jobs[index])))
                created[index] = True
            vectors = {
                jobs[index]["fact_id"]: matrix[pos]
                for pos, index in enumerate(batch)
                if index in jobs
            }
            # The pending rows and the vectors are written together: a vector whose row is
            # missing is never recalled (recall drops vectors without a live row), and the
            # row turns active only after both (ADR-0030's order, in two round trips).
            upserted = list(jobs.values())
            inserted, error = await asyncio.gather(
                self._insert_rows(inserts),
                self.upsert(upserted, vectors, embedder.config),
                return_exceptions=True,
            )
            if isinstance(inserted, BaseException):
                # No row: the new rows' vectors must not outlive the failed write (an erase
                # finds vectors through their rows only).
                if error is None:
                    try:
                        lost = [jobs[i]["fact_id"] for i, _ in inserts]
                        await delete_own_vectors(self._s.vectors, self._s.tenant_id, lost)
                    except Exception as exc:
                        log.warning("vectors of failed rows (%s) kept: %s", self._s.tenant_id, exc)
                raise inserted
            conflicts = inserted
            assert not isinstance(error, BaseException)  # upsert reports, never raises
            if conflicts:
                # Another writer learned the same fact between our lookup and our insert:
                # its row wins (and still gets its vector here if it is pending); the
                # vector just written for our row that lost is deleted after the response.
                lost = [jobs[i]["fact_id"] for i in conflicts]
                await self._s.after_response(
                    delete_own_vectors(self._s.vectors, self._s.tenant_id, lost),
                    "deleting the vectors of rows that lost",
                )
                won = await find_by_hash(
                    self._s, [(inputs[i].subject, hashes[i]) for i in conflicts]
                )
                for index in conflicts:
                    created[index] = False
                    row = won.get((inputs[index].subject, hashes[index]))
                    if row is None:
                        raise RuntimeError("insert conflicted but no existing row was found")
                    if row["status"] == "pending_vector":
                        jobs[index] = row
                        vectors[row["fact_id"]] = matrix[batch.index(index)]
                    else:
                        del jobs[index]
                        results[index] = _found(row, hashes[index])
                won_jobs = [jobs[i] for i in conflicts if i in jobs]
                error = error or await self.upsert(won_jobs, vectors, embedder.config)
            if error is None:  # activated with the created facts' events, in one batch
                made = [i for i in batch if created.get(i) and i in jobs]
                # Insert-if-absent, id = the fact's id.
                found = (
                    self._s.gate.event_statement(proposals[i], jobs[i]["fact_id"]) for i in made
                )
                events = [statement for statement in found if statement is not None]
                error = await self.activate(list(jobs.values()), embedder.config, now, events)
            failed = failed or error is not None
            for index in batch:
                if index in results:
                    continue
                results[index] = LearnResult(
                    fact_id=jobs[index]["fact_id"],
                    status="pending_vector" if error else "active",
                    created=created[index],
                    content_hash=hashes[index],
                    error=error,
                )
        ordered: list[LearnResult] = []
        for index, fact in enumerate(inputs):
            first = first_of[(fact.subject, hashes[index])]
            result = results[first]
            if first != index:
                result = result.model_copy(update={"created": False})
            ordered.append(result)
        created_at = [i for i, r in enumerate(ordered) if r.created]
        # An active fact's event went with its activation; a pending one's is recorded here.
        unrecorded = [i for i in created_at if ordered[i].status != "active"]
        await self._s.gate.committed(
            [proposals[i] for i in unrecorded], [ordered[i].fact_id for i in unrecorded]
        )
        if created_at:
            created_items = [items[i] for i in created_at]
            await self._s.after_response(
                extend_following(self._s, before_call, created_items),
                "adding later context to earlier memories",
            )
        if todo and not failed:
            await self._s.after_response(
                self._retry_pending_after_write(), "retrying pending facts"
            )
        return ordered

    async def _retry_pending_after_write(self) -> None:
        """Self-healing: a write that just succeeded shows the vector store is healthy, so
        it also finishes up to `PENDING_RETRY_ON_WRITE` facts an earlier failure left
        pending (one indexed query when there are none). Best effort."""
        try:
            await self.complete_pending(PENDING_RETRY_ON_WRITE)
        except Exception as exc:
            log.warning("retrying pending facts of tenant %s failed: %s", self._s.tenant_id, exc)

    async def _insert_rows(self, inserts: Sequence[tuple[int, D1Statement]]) -> list[int]:
        """Insert pending rows; returns the input indexes whose insert hit an existing row."""
        results = await run_batches(self._s.db, [statement for _, statement in inserts])
        return [
            i for (i, _), result in zip(inserts, results, strict=True) if not result.meta.changes
        ]

    async def delete(self, fact_id: str) -> DeleteResult:
        """`SemanticMemory.delete`."""
        if not isinstance(fact_id, str) or not is_ulid(fact_id):
            raise MemoryInputError(
                "fact_id must be a 26-character ULID",
                [{"field": "fact_id", "problem": "not a ULID"}],
            )
        # Row first: the row is the source of truth, and a vector without its row is
        # never returned by recall.
        result = await self._s.sql(
            "DELETE FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?", fact_id
        ).run()
        row_deleted = result.meta.changes > 0
        try:
            mine = await delete_own_vectors(self._s.vectors, self._s.tenant_id, [fact_id])
        except Exception as exc:
            log.warning(
                "deleting the vector of fact %s (tenant %s) failed: %s",
                fact_id,
                self._s.tenant_id,
                exc,
            )
            return DeleteResult(
                fact_id=fact_id, row_deleted=row_deleted, vector_deleted=False, complete=False
            )
        return DeleteResult(fact_id=fact_id, row_deleted=row_deleted, vector_deleted=bool(mine))
