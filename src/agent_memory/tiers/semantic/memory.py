"""Tier 3, semantic memory: facts in D1 (source of truth) + one vector each in Vectorize.

`SemanticMemory(tenant_id, ...)` is bound to one tenant at construction and has no way to
name another: every D1 statement starts its WHERE clause with `tenant_id = ?`, and every
vector query passes the tenant's namespace, a `tenant_id` filter and an `embedding` filter
(the embedder's `EmbeddingConfig.key`), so vectors of different embedding configs are
never compared.

Writes (`learn`, `learn_many`) — idempotent per (tenant, subject, content hash):
  1. validate every input (nothing is written if one is bad);
  2. look the hashes up; a fact that is already `active` is returned as it is (no
     embedding call), one left `pending_vector` is completed;
  3. embed the new contents, batched (an embedding failure raises; nothing of that batch
     is written — ADR-0030 "a failed embed throws; nothing is written");
  4. insert the rows with status `pending_vector`;
  5. upsert the vectors;
  6. mark the rows `active`.
  If step 5 or 6 fails the rows stay `pending_vector`: recall does not return them, and
  the retry path finishes them: `complete_pending()` (for a scheduled job), learning the
  same content again, or — automatically — the tenant's next successful write, which
  also completes up to 10 pending facts.

Reads (`recall`): three channels run concurrently —
  * vector: cosine similarity in the tenant's namespace (top `candidate_pool`, ≤ 100);
  * keyword: D1 FTS5 over fact content, ranked by `bm25()`, the user's text quoted term by
    term so punctuation and FTS5 operators are searched for, never parsed;
  * exact: facts whose subject or predicate equals a string the query names;
  then fused (`fusion.py`), scored (`scoring.py`) and cut to `top_k`. Only rows that are
  live (`active`, inside their validity window) are returned: a vector whose row is gone
  is dropped and deleted from the index (reconciliation), so recall never returns a fact
  whose row was deleted. Each recall updates `last_recalled_at` / `recall_count` of what
  it returned and writes a `memory_retrieved` event, in one D1 batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_memory.governance.events import EventLog, RetrievedItem, memory_retrieved
from agent_memory.governance.policy import WriteDenied, WriteGate, WriteProposal
from agent_memory.ids import content_hash, is_ulid, new_ulid, sha256_hex
from agent_memory.retrieval.fusion import ChannelDetail, ChannelHit, ChannelResult, fuse
from agent_memory.retrieval.scoring import (
    RetrievalConfig,
    ScoreBreakdown,
    Tier,
    breakdown,
    information_density,
    score_parts,
)
from agent_memory.retrieval.terms import exact_match_candidates, fts5_match_expression
from agent_memory.scope import AGENT_TYPE_PATTERN, TENANT_RE
from agent_memory.tiers.semantic.links import linked_rows
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.embedder import Embedder, EmbeddingConfig
from bindings.ports.sql import Row, SqlValue
from bindings.ports.vectorize import (
    VECTORIZE_MAX_BATCH,
    VECTORIZE_MAX_METADATA_BYTES,
    VECTORIZE_MAX_NAMESPACE_BYTES,
    VECTORIZE_MAX_TOP_K,
    VectorIndex,
    VectorRecord,
)

log = logging.getLogger(__name__)

# Vectorize indexes the first 64 bytes of a string metadata value (metadata-filtering.mdx).
VECTORIZE_MAX_INDEXED_STRING_BYTES = 64

NAMESPACE_PREFIX = "agent_memory_semantic:"
# Tenant ids never contain "~" (scope.TENANT_PATTERN), so a hashed name cannot equal a
# plain one.
HASHED_NAMESPACE_PREFIX = NAMESPACE_PREFIX + "~"
MAX_CONTENT_CHARS = 8_192  # semantic_facts.content CHECK
MAX_QUERY_CHARS = 2_048
MAX_METADATA_BYTES = VECTORIZE_MAX_METADATA_BYTES  # 10 KiB, Vectorize's metadata limit
MAX_TOP_K = 20  # ADR-0030 recall_memory schema
MAX_RANK_LIMIT = 1_000
DEFAULT_TOP_K = 5
DEFAULT_SUBJECT = "general"
DEFAULT_PREDICATE = "states"
DEFAULT_CONFIDENCE = 0.7
DEFAULT_AGENT_TYPE = "default"
EMBED_BATCH = 100  # Workers AI takes ≤ 100 texts per call
STATEMENTS_PER_BATCH = 50
IDS_PER_STATEMENT = 90  # + a few other parameters stays under D1's 100
PENDING_RETRY_ON_WRITE = 10
PAIRS_PER_STATEMENT = 45  # (subject, hash) pairs: 2 parameters each + tenant

# What ranking needs of a candidate row; full rows are read for the returned ones only.
_SCORING_COLUMNS = (
    "fact_id, status, valid_to, agent_type, subject, predicate, confidence, content, updated_at"
)

FactStatus = Literal["pending_vector", "active", "superseded"]
T = TypeVar("T")


def namespace_for_tenant(tenant_id: str) -> str:
    """`agent_memory_semantic:{tenant_id}`, or `agent_memory_semantic:~{sha256[:40]}` when
    that would exceed Vectorize's 64-byte namespace limit (stable across deploys)."""
    plain = NAMESPACE_PREFIX + tenant_id
    if len(plain.encode("utf-8")) <= VECTORIZE_MAX_NAMESPACE_BYTES:
        return plain
    return HASHED_NAMESPACE_PREFIX + sha256_hex(tenant_id)[:40]


def embedding_tag(config: EmbeddingConfig) -> str:
    """The `embedding` metadata value of a vector: `EmbeddingConfig.key`, or
    `sha256:{hash[:40]}` of it when longer than 64 bytes, because Vectorize indexes only a
    string's first 64 bytes and two configs sharing a prefix must never match each other."""
    key = config.key
    if len(key.encode("utf-8")) <= VECTORIZE_MAX_INDEXED_STRING_BYTES:
        return key
    return "sha256:" + sha256_hex(key)[:40]


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


# --------------------------------------------------------------------------- errors


class MemoryInputError(ValueError):
    """Bad input: nothing was read or written. `code` is stable; `problems` lists fields."""

    def __init__(
        self, message: str, problems: list[dict[str, str]] | None = None, code: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code or "validation_error"
        self.message = message
        self.problems = problems or []

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.problems:
            error["details"] = {"problems": self.problems}
        return {"error": error}

    @classmethod
    def from_validation(cls, exc: ValidationError, what: str, prefix: str = "") -> MemoryInputError:
        problems = [
            {
                "field": prefix + (".".join(str(p) for p in err["loc"]) or "(input)"),
                "problem": err["msg"],
            }
            for err in exc.errors(include_url=False, include_input=False)
        ]
        return cls(f"{what} failed validation", problems)


class SemanticTierUnavailable(RuntimeError):
    """The deployment lacks a binding the semantic tier needs (D1, Vectorize, embedder)."""


# --------------------------------------------------------------------------- models


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    try:
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be JSON-serialisable: {exc}") from None
    size = len(encoded.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES} bytes (10 KiB)"
        )
    return value


class FactInput(BaseModel):
    """One fact to learn. Only `content` is required.

    `subject` / `predicate` / `object` are the ADR-043 triple (`contact:hubspot_id:123`,
    `responded_positively_to`, `direct_roi_framing`); `content` is the sentence recall
    searches. Times are epoch seconds; `valid_from` defaults to now.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    subject: str = Field(default=DEFAULT_SUBJECT, min_length=1, max_length=256)
    predicate: str = Field(default=DEFAULT_PREDICATE, min_length=1, max_length=128)
    object: str = Field(default="", max_length=1024)
    confidence: float = Field(default=DEFAULT_CONFIDENCE, ge=0.0, le=1.0, allow_inf_nan=False)
    source: str = Field(default="learn", min_length=1, max_length=64)
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    learned_from_run_id: str | None = Field(default=None, min_length=1, max_length=64)
    metadata: dict[str, Any] = Field(default_factory=dict)
    valid_from: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    valid_to: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_metadata(value)

    @model_validator(mode="after")
    def _window(self) -> FactInput:
        if (
            self.valid_from is not None
            and self.valid_to is not None
            and self.valid_to < self.valid_from
        ):
            raise ValueError("valid_to must not be before valid_from")
        return self


class RecallFilters(BaseModel):
    """Optional narrowing of a recall (ADR-0030 `MemoryQuery.filters`)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    predicate: str | None = Field(default=None, min_length=1, max_length=128)
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)


class RecallRequest(BaseModel):
    """A recall as a tool or route receives it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: StrictInt = Field(default=DEFAULT_TOP_K, ge=1, le=MAX_TOP_K)
    filters: RecallFilters | None = None


class Fact(BaseModel):
    """A `semantic_facts` row. Times are epoch milliseconds, as stored."""

    fact_id: str
    tenant_id: str
    agent_type: str
    subject: str
    predicate: str
    object: str
    content: str
    metadata: dict[str, Any]
    confidence: float
    source: str
    learned_from_run_id: str | None
    embedding_provider: str
    embedding_model: str
    embedding_dimensions: int
    content_hash: str
    status: FactStatus
    superseded_by: str | None
    valid_from: int
    valid_to: int | None
    created_at: int
    updated_at: int
    last_recalled_at: int | None
    recall_count: int

    @classmethod
    def from_row(cls, row: Row) -> Fact:
        data = {name: row.get(name) for name in cls.model_fields}
        data["metadata"] = json.loads(row.get("metadata") or "{}")
        return cls.model_validate(data)


class LearnResult(BaseModel):
    fact_id: str
    status: FactStatus
    created: bool
    content_hash: str
    error: str | None = None


class RecalledFact(BaseModel):
    fact: Fact
    score: float
    breakdown: ScoreBreakdown
    channels: dict[str, ChannelDetail]

    def summary(self) -> dict[str, Any]:
        """What a tool returns for this result: the fact and why it ranked where it did."""
        fact = self.fact
        return {
            "id": fact.fact_id,
            "content": fact.content,
            "subject": fact.subject,
            "predicate": fact.predicate,
            "object": fact.object,
            "confidence": fact.confidence,
            "metadata": fact.metadata,
            "agent_type": fact.agent_type,
            "created_at": fact.created_at,
            "score": round(self.score, 6),
            "score_breakdown": {
                "relevance": round(self.breakdown.relevance, 6),
                "recency": round(self.breakdown.recency, 6),
                "confidence": round(self.breakdown.confidence, 6),
                "density": round(self.breakdown.density, 6),
                "weights": {k: round(v, 6) for k, v in self.breakdown.weights.items()},
                "channels": {
                    name: {"rank": d.rank, "raw": round(d.raw, 6)}
                    for name, d in self.channels.items()
                },
            },
        }


class LinkedFact(BaseModel):
    """A fact reached over one link from a recalled fact (`recall(follow_links=True)`)."""

    fact: Fact
    via: str
    link_score: float


class RecallResult(BaseModel):
    results: list[RecalledFact]
    linked: list[LinkedFact] = Field(default_factory=list)
    event_id: str | None = None
    # How many candidates each channel contributed, and vector ids dropped (no live row).
    candidates: dict[str, int] = Field(default_factory=dict)
    dropped: list[str] = Field(default_factory=list)

    @property
    def fact_ids(self) -> list[str]:
        return [r.fact.fact_id for r in self.results]


class DeleteResult(BaseModel):
    fact_id: str
    row_deleted: bool
    vector_deleted: bool
    # False when the vector delete failed: the stray vector is invisible to recall (no
    # row) and a repeated delete (or the next recall that meets it) removes it.
    complete: bool = True


@dataclass
class _VectorJob:
    """A row that needs its vector written (new, or left pending)."""

    fact_id: str
    content: str
    agent_type: str
    subject: str
    predicate: str
    object: str
    confidence: float
    learned_from_run_id: str | None
    created_at_ms: int


# --------------------------------------------------------------------------- the tier


class SemanticMemory:
    """Semantic memory of one tenant. Construct per request; the tenant cannot change."""

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
        tier: Tier = "semantic",
        gate: WriteGate | None = None,
    ) -> None:
        if not isinstance(tenant_id, str) or not TENANT_RE.match(tenant_id):
            raise ValueError(f"invalid tenant id {tenant_id!r}")
        self._tenant_id = tenant_id
        self._namespace = namespace_for_tenant(tenant_id)
        self._db = db
        self._vectors = vectors
        self._embedder = embedder
        self._clock = clock
        self._config = config or RetrievalConfig()
        self._agent_type = agent_type
        self._run_id = run_id
        self._tier: Tier = tier
        self._events = EventLog(tenant_id, db)
        # Writes are proposals checked by the write policy; committed facts get a
        # `memory_written` event (ADR-0051, `agent_memory.governance.policy`).
        self._gate = gate or WriteGate(tenant_id, clock=clock, events=self._events)

    @classmethod
    def from_bindings(
        cls,
        bindings: Any,
        tenant_id: str,
        *,
        agent_type: str = DEFAULT_AGENT_TYPE,
        run_id: str | None = None,
        config: RetrievalConfig | None = None,
    ) -> SemanticMemory:
        """Build from a request's `Bindings` (D1 + Vectorize required, embedder for
        learn/recall); raises `SemanticTierUnavailable` when D1 or Vectorize is missing."""
        if bindings.db is None or bindings.vectors is None:
            raise SemanticTierUnavailable(
                "the semantic tier needs the D1 database and the Vectorize index bound"
            )
        return cls(
            tenant_id,
            db=bindings.db,
            vectors=bindings.vectors,
            embedder=bindings.embedder,
            clock=bindings.clock,
            config=config,
            agent_type=agent_type,
            run_id=run_id,
        )

    @property
    def tenant_id(self) -> str:
        return self._tenant_id

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def config(self) -> RetrievalConfig:
        return self._config

    def _require_embedder(self) -> Embedder:
        if self._embedder is None:
            raise SemanticTierUnavailable("no embedder is bound; learn and recall need one")
        return self._embedder

    def _vector_filter(self, config: EmbeddingConfig, agent_type: str | None) -> dict[str, Any]:
        # tenant_id on top of the namespace (ADR-0030 defence in depth) and the embedding
        # config, so a query never compares vectors of different models (DESIGN inv. 6).
        flt: dict[str, Any] = {"tenant_id": self._tenant_id, "embedding": embedding_tag(config)}
        if agent_type is not None:
            flt["agent_type"] = agent_type
        return flt

    # ------------------------------------------------------------------ writes

    def _validate_facts(self, facts: Sequence[FactInput | Mapping[str, Any]]) -> list[FactInput]:
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

    async def learn(self, fact: FactInput | Mapping[str, Any]) -> LearnResult:
        """Learn one fact (idempotent per subject and content). See the module docstring."""
        return (await self.learn_many([fact]))[0]

    async def learn_many(
        self, facts: Sequence[FactInput | Mapping[str, Any]], *, embed_batch: int = EMBED_BATCH
    ) -> list[LearnResult]:
        """Learn facts in bulk with batched embedding; results are in input order.

        Batches are committed one after the other: if a later batch fails (embedding
        error, D1 error), earlier ones stay learned, and calling again with the same facts
        is safe (they are found by hash and not embedded twice).
        """
        inputs = self._validate_facts(facts)
        if not inputs:
            return []
        proposals = [self._proposal(fact) for fact in inputs]
        try:
            self._gate.check_all(proposals)
        except WriteDenied as denied:
            problems = [{"field": v.code, "problem": v.message} for v in denied.violations]
            raise MemoryInputError(str(denied), problems, code=denied.code) from None
        embedder = self._require_embedder()
        now = self._clock.now()
        hashes = [content_hash(f.content) for f in inputs]
        first_of: dict[tuple[str, str], int] = {}
        for index, fact in enumerate(inputs):
            first_of.setdefault((fact.subject, hashes[index]), index)
        existing = await self._find_by_hash(list(first_of))
        results: dict[int, LearnResult] = {}
        todo: list[int] = []  # indexes (first occurrences) that need a vector
        failed = False
        for key, index in first_of.items():
            row = existing.get(key)
            if row is not None and row["status"] != "pending_vector":
                results[index] = LearnResult(
                    fact_id=row["fact_id"],
                    status=row["status"],
                    created=False,
                    content_hash=key[1],
                )
            else:
                todo.append(index)
        for batch in _chunks(todo, max(1, min(embed_batch, EMBED_BATCH))):
            texts = [inputs[i].content for i in batch]
            matrix = await embedder.embed(texts)
            self._check_matrix(matrix, len(texts), embedder.config)
            jobs: dict[int, _VectorJob] = {}
            created: dict[int, bool] = {}
            inserts: list[tuple[int, D1Statement]] = []
            for index in batch:
                fact = inputs[index]
                row = existing.get((fact.subject, hashes[index]))
                if row is not None:  # left pending earlier: complete it now
                    jobs[index] = self._job_from_row(row, fact.content)
                    created[index] = False
                    continue
                fact_id = new_ulid(now)
                inserts.append(
                    (
                        index,
                        self._insert_statement(fact, fact_id, hashes[index], embedder.config, now),
                    )
                )
                jobs[index] = _VectorJob(
                    fact_id=fact_id,
                    content=fact.content,
                    agent_type=fact.agent_type or self._agent_type,
                    subject=fact.subject,
                    predicate=fact.predicate,
                    object=fact.object,
                    confidence=fact.confidence,
                    learned_from_run_id=fact.learned_from_run_id or self._run_id,
                    created_at_ms=_ms(now),
                )
                created[index] = True
            conflicts = await self._insert_rows(inserts)
            if conflicts:
                # Another writer learned the same fact between our lookup and our insert:
                # its row wins (and still gets its vector here if it is pending).
                won = await self._find_by_hash([(inputs[i].subject, hashes[i]) for i in conflicts])
                for index in conflicts:
                    created[index] = False
                    row = won.get((inputs[index].subject, hashes[index]))
                    if row is None:
                        raise RuntimeError("insert conflicted but no existing row was found")
                    if row["status"] == "pending_vector":
                        jobs[index] = self._job_from_row(row, inputs[index].content)
                    else:
                        del jobs[index]
                        results[index] = LearnResult(
                            fact_id=row["fact_id"],
                            status=row["status"],
                            created=False,
                            content_hash=hashes[index],
                        )
            vectors = {
                jobs[index].fact_id: matrix[pos] for pos, index in enumerate(batch) if index in jobs
            }
            error = await self._write_vectors(list(jobs.values()), vectors, embedder.config, now)
            failed = failed or error is not None
            for index in batch:
                if index in results:
                    continue
                results[index] = LearnResult(
                    fact_id=jobs[index].fact_id,
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
        await self._gate.committed(
            [proposals[i] for i in created_at], [ordered[i].fact_id for i in created_at]
        )
        if todo and not failed:
            await self._retry_pending_after_write()
        return ordered

    def _proposal(self, fact: FactInput) -> WriteProposal:
        return WriteProposal(
            tier="semantic",
            key=f"{fact.subject}|{fact.predicate}",
            value={
                "subject": fact.subject,
                "predicate": fact.predicate,
                "object": fact.object,
                "content": fact.content,
                "metadata": fact.metadata,
            },
            confidence=fact.confidence,
            source=fact.source,
            agent_type=fact.agent_type or self._agent_type,
            # The catch-all subject names nobody: personal data needs a real one.
            subject=None if fact.subject == DEFAULT_SUBJECT else fact.subject,
            run_id=fact.learned_from_run_id or self._run_id,
        )

    async def _retry_pending_after_write(self) -> None:
        """Self-healing: a write that just succeeded shows the vector store is healthy, so
        it also finishes up to `PENDING_RETRY_ON_WRITE` facts an earlier failure left
        pending (one indexed query when there are none). Best effort."""
        try:
            await self.complete_pending(PENDING_RETRY_ON_WRITE)
        except Exception as exc:
            log.warning("retrying pending facts of tenant %s failed: %s", self._tenant_id, exc)

    @staticmethod
    def _check_matrix(matrix: Any, rows: int, config: EmbeddingConfig) -> None:
        shape = getattr(matrix, "shape", None)
        if shape is None or tuple(shape) != (rows, config.dimensions):
            raise RuntimeError(
                f"embedder returned shape {shape}, expected ({rows}, {config.dimensions})"
            )

    def _job_from_row(self, row: Row, content: str) -> _VectorJob:
        return _VectorJob(
            fact_id=row["fact_id"],
            content=content,
            agent_type=row["agent_type"],
            subject=row["subject"],
            predicate=row["predicate"],
            object=row["object"],
            confidence=float(row["confidence"]),
            learned_from_run_id=row.get("learned_from_run_id"),
            created_at_ms=int(row["created_at"]),
        )

    def _insert_statement(
        self, fact: FactInput, fact_id: str, digest: str, config: EmbeddingConfig, now: float
    ) -> D1Statement:
        valid_from = _ms(fact.valid_from) if fact.valid_from is not None else _ms(now)
        valid_to = _ms(fact.valid_to) if fact.valid_to is not None else None
        if valid_to is not None and valid_to < valid_from:
            valid_to = valid_from
        return self._db.prepare(
            "INSERT INTO semantic_facts (tenant_id, fact_id, agent_type, subject, predicate, "
            "object, content, metadata, confidence, source, learned_from_run_id, "
            "embedding_provider, embedding_model, embedding_dimensions, content_hash, status, "
            "valid_from, valid_to, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending_vector', ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, subject, content_hash) DO NOTHING"
        ).bind(
            self._tenant_id,
            fact_id,
            fact.agent_type or self._agent_type,
            fact.subject,
            fact.predicate,
            fact.object,
            fact.content,
            json.dumps(fact.metadata, separators=(",", ":"), ensure_ascii=False),
            float(fact.confidence),
            fact.source,
            fact.learned_from_run_id or self._run_id,
            config.provider,
            config.model,
            config.dimensions,
            digest,
            valid_from,
            valid_to,
            _ms(now),
            _ms(now),
        )

    async def _insert_rows(self, inserts: Sequence[tuple[int, D1Statement]]) -> list[int]:
        """Insert pending rows; returns the input indexes whose insert hit an existing row."""
        conflicts: list[int] = []
        for chunk in _chunks(inserts, STATEMENTS_PER_BATCH):
            results = await self._db.batch([stmt for _, stmt in chunk])
            for (index, _), result in zip(chunk, results, strict=True):
                if result.meta.changes == 0:
                    conflicts.append(index)
        return conflicts

    async def _find_by_hash(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Row]:
        """Existing rows for (subject, content hash) pairs. `subject IN (..) AND
        content_hash IN (..)` is a range lookup on the UNIQUE (tenant_id, subject,
        content_hash) index (an OR of pairs may be planned as a scan); the few extra rows
        of the cross product are dropped here."""
        wanted = set(keys)
        found: dict[tuple[str, str], Row] = {}
        for chunk in _chunks(list(dict.fromkeys(keys)), PAIRS_PER_STATEMENT):
            subjects = list(dict.fromkeys(subject for subject, _ in chunk))
            digests = list(dict.fromkeys(digest for _, digest in chunk))
            result = (
                await self._db.prepare(
                    "SELECT fact_id, status, subject, predicate, object, agent_type, confidence, "
                    "learned_from_run_id, content_hash, created_at FROM semantic_facts "
                    f"WHERE tenant_id = ? AND subject IN ({', '.join('?' for _ in subjects)}) "
                    f"AND content_hash IN ({', '.join('?' for _ in digests)})"
                )
                .bind(self._tenant_id, *subjects, *digests)
                .all()
            )
            for row in result.results:
                key = (row["subject"], row["content_hash"])
                if key in wanted:
                    found[key] = row
        return found

    def _vector_record(self, job: _VectorJob, values: Any, config: EmbeddingConfig) -> VectorRecord:
        metadata: dict[str, Any] = {
            "tenant_id": self._tenant_id,
            "agent_type": job.agent_type,
            "fact_id": job.fact_id,
            "subject": job.subject,
            "predicate": job.predicate,
            "object": job.object,
            "confidence": job.confidence,
            "created_at": job.created_at_ms,
            "embedding": embedding_tag(config),
            "embedding_provider": config.provider,
            "embedding_model": config.model,
            "embedding_dimensions": config.dimensions,
        }
        if job.learned_from_run_id:
            metadata["learned_from_run_id"] = job.learned_from_run_id
        return VectorRecord(
            id=job.fact_id,
            values=np.asarray(values, dtype=np.float64).tolist(),
            namespace=self._namespace,
            metadata=metadata,
        )

    async def _write_vectors(
        self,
        jobs: Sequence[_VectorJob],
        vectors: Mapping[str, Any],
        config: EmbeddingConfig,
        now: float,
    ) -> str | None:
        """Upsert the jobs' vectors, then mark their rows active. Returns None on success,
        else the error text (the rows stay `pending_vector` for `complete_pending`)."""
        if not jobs:
            return None
        records = [self._vector_record(job, vectors[job.fact_id], config) for job in jobs]
        try:
            for chunk in _chunks(records, VECTORIZE_MAX_BATCH):
                await self._vectors.upsert(chunk)
        except Exception as exc:  # any vector failure leaves a retryable pending row
            log.warning(
                "vector write failed for %d fact(s) of tenant %s; rows stay pending: %s",
                len(records),
                self._tenant_id,
                exc,
            )
            return f"vector write failed: {exc}"
        try:
            await self._activate([job.fact_id for job in jobs], config, now)
        except Exception as exc:
            log.warning(
                "activating %d fact(s) of tenant %s failed; rows stay pending: %s",
                len(jobs),
                self._tenant_id,
                exc,
            )
            return f"activation failed: {exc}"
        return None

    async def _activate(self, fact_ids: Sequence[str], config: EmbeddingConfig, now: float) -> None:
        statements = []
        for chunk in _chunks(fact_ids, IDS_PER_STATEMENT - 5):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._db.prepare(
                    "UPDATE semantic_facts SET status = 'active', updated_at = ?, "
                    "embedding_provider = ?, embedding_model = ?, embedding_dimensions = ? "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks}) AND status = 'pending_vector'"
                ).bind(
                    _ms(now),
                    config.provider,
                    config.model,
                    config.dimensions,
                    self._tenant_id,
                    *chunk,
                )
            )
        for group in _chunks(statements, STATEMENTS_PER_BATCH):
            await self._db.batch(list(group))

    async def complete_pending(self, limit: int = 100) -> int:
        """Write the vectors of up to `limit` facts left `pending_vector` (oldest first) and
        activate them. Returns how many became active. Safe to run any time."""
        embedder = self._require_embedder()
        result = (
            await self._db.prepare(
                "SELECT fact_id, content, agent_type, subject, predicate, object, confidence, "
                "learned_from_run_id, created_at FROM semantic_facts "
                "WHERE tenant_id = ? AND status = 'pending_vector' ORDER BY created_at LIMIT ?"
            )
            .bind(self._tenant_id, max(1, min(limit, 1000)))
            .all()
        )
        rows = result.results
        done = 0
        for batch in _chunks(rows, EMBED_BATCH):
            matrix = await embedder.embed([row["content"] for row in batch])
            self._check_matrix(matrix, len(batch), embedder.config)
            jobs = [self._job_from_row(row, row["content"]) for row in batch]
            vectors = {job.fact_id: matrix[pos] for pos, job in enumerate(jobs)}
            error = await self._write_vectors(jobs, vectors, embedder.config, self._clock.now())
            if error is None:
                done += len(jobs)
        return done

    # ------------------------------------------------------------------ reads

    async def get(self, fact_id: str) -> Fact | None:
        """The fact's row (any status), or None."""
        row = (
            await self._db.prepare(
                "SELECT * FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?"
            )
            .bind(self._tenant_id, fact_id)
            .first()
        )
        return Fact.from_row(row) if row is not None else None

    async def count(self, status: FactStatus = "active") -> int:
        value = (
            await self._db.prepare(
                "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND status = ?"
            )
            .bind(self._tenant_id, status)
            .first_value("n")
        )
        return int(value or 0)

    async def recall(
        self,
        query: str,
        top_k: int = DEFAULT_TOP_K,
        filters: RecallFilters | Mapping[str, Any] | None = None,
        *,
        query_vector: Sequence[float] | None = None,
        follow_links: bool = False,
    ) -> RecallResult:
        """The `top_k` (1-20) best live facts for `query`, each with its score breakdown.

        Updates the returned facts' recall stats and writes a `memory_retrieved` event.
        `query_vector` skips the embedding call (benchmarks; callers that already have it).
        `follow_links` also returns, in `linked`, the live facts one link away from the
        results (the reconciler's links), strongest link first.
        Raises `MemoryInputError` for an empty query, a `top_k` out of range or bad filters.
        """
        try:
            request = RecallRequest.model_validate(
                {
                    "query": query,
                    "top_k": top_k,
                    "filters": filters.model_dump()
                    if isinstance(filters, RecallFilters)
                    else filters,
                }
            )
        except ValidationError as exc:
            raise MemoryInputError.from_validation(exc, "recall") from None
        result = await self._recall(
            request.query, request.top_k, request.filters, query_vector, record=True
        )
        if follow_links and result.results:
            hops = await linked_rows(
                self._db, self._tenant_id, result.fact_ids, now_ms=_ms(self._clock.now())
            )
            result.linked = [
                LinkedFact(fact=Fact.from_row(h.row), via=h.via, link_score=h.score) for h in hops
            ]
        return result

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
        return await self._recall(query.strip(), limit, filters, query_vector, record=record)

    async def _recall(
        self,
        query: str,
        limit: int,
        filters: RecallFilters | None,
        query_vector: Sequence[float] | None,
        *,
        record: bool,
    ) -> RecallResult:
        filters = filters or RecallFilters()
        now = self._clock.now()
        # Candidates do not depend on `limit`: `rank(q, 500)` starts with what
        # `recall(q, 5)` returns, in the same order.
        pool = self._config.candidate_pool
        vector_hits, keyword_hits, (exact_hits, exact_complete) = await asyncio.gather(
            self._vector_channel(query, query_vector, filters, min(pool, VECTORIZE_MAX_TOP_K)),
            self._keyword_channel(query, filters, pool, now),
            self._exact_channel(query, filters, pool, now),
        )
        candidate_ids = list(
            dict.fromkeys(
                [h.id for h in vector_hits]
                + [h.id for h in keyword_hits]
                + ([h.id for h in exact_hits] if exact_complete else [])
            )
        )
        rows = await self._load_rows(candidate_ids, _SCORING_COLUMNS)
        stray = [h.id for h in vector_hits if h.id not in rows]
        dropped = list(stray)
        if stray:
            await self._drop_stray_vectors(stray)
        live = {fid: row for fid, row in rows.items() if self._is_live(row, filters, now)}
        dropped += [fid for fid in rows if fid not in live]

        candidates_named = set(exact_match_candidates(query))
        strength = {
            fid: 0.5 * (row["subject"] in candidates_named)
            + 0.5 * (row["predicate"] in candidates_named)
            for fid, row in live.items()
        }
        channels = [
            ChannelResult(name="vector", hits=[h for h in vector_hits if h.id in live]),
            ChannelResult(name="keyword", hits=[h for h in keyword_hits if h.id in live]),
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
        fused = fuse(channels, self._config.fusion, feature_scores=feature)
        weights = self._config.weights_for(self._tier)
        ranked = []
        for item in fused:
            row = live[item.id]
            parts = score_parts(
                relevance=item.relevance,
                written_at=int(row["updated_at"]) / 1000.0,
                confidence=float(row["confidence"]),
                density=information_density(row["content"]),
                now=now,
                weights=weights,
            )
            ranked.append((parts, item))
        ranked.sort(key=lambda pair: (-pair[0][0], -pair[0][1], pair[1].id))
        top = ranked[:limit]
        # Full rows only for what is returned (content and metadata can be large).
        full = await self._load_rows([item.id for _, item in top])
        results = [
            RecalledFact(
                fact=Fact.from_row(full[item.id]),
                score=parts[0],
                breakdown=breakdown(parts, weights),
                channels=item.channels,
            )
            for parts, item in top
            if item.id in full  # deleted between the two reads: never return it
        ]
        counts = {
            "vector": len(vector_hits),
            "keyword": len(keyword_hits),
            "exact": len(exact_hits) if exact_complete else -1,
        }
        event_id = None
        if record:
            event_id = await self._record_recall(query, limit, results, counts, dropped, now)
        return RecallResult(results=results, event_id=event_id, candidates=counts, dropped=dropped)

    async def _vector_channel(
        self,
        query: str,
        query_vector: Sequence[float] | None,
        filters: RecallFilters,
        top_k: int,
    ) -> list[ChannelHit]:
        embedder = self._require_embedder()
        if query_vector is None:
            matrix = await embedder.embed([query])
            self._check_matrix(matrix, 1, embedder.config)
            values = np.asarray(matrix[0], dtype=np.float64).tolist()
        else:
            values = [float(v) for v in query_vector]
            if len(values) != embedder.config.dimensions or not all(
                math.isfinite(v) for v in values
            ):
                raise MemoryInputError("query_vector does not match the embedding config")
        result = await self._vectors.query(
            values,
            top_k=top_k,
            namespace=self._namespace,
            filter=self._vector_filter(embedder.config, filters.agent_type),
            return_metadata="none",
        )
        return [ChannelHit(id=m.id, score=m.score) for m in result.matches]

    def _row_filter_sql(self, filters: RecallFilters, now: float) -> tuple[str, list[SqlValue]]:
        """Conditions on a `semantic_facts AS f` row beyond the tenant: live and filtered."""
        # `+f.status`: the unary plus keeps SQLite from choosing the (tenant_id, status)
        # index, which would scan every active fact of the tenant; the selective indexes
        # (subject, predicate, the FTS rowid) must drive these queries.
        sql = " AND +f.status = 'active' AND (f.valid_to IS NULL OR f.valid_to > ?)"
        params: list[SqlValue] = [_ms(now)]
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
        return sql, params

    async def _keyword_channel(
        self, query: str, filters: RecallFilters, limit: int, now: float
    ) -> list[ChannelHit]:
        expression = fts5_match_expression(query)
        if expression is None:
            return []
        extra, params = self._row_filter_sql(filters, now)
        result = (
            await self._db.prepare(
                "SELECT f.fact_id AS fact_id, bm25(semantic_facts_fts) AS bm25 "
                "FROM semantic_facts_fts JOIN semantic_facts AS f "
                "ON f.fts_rowid = semantic_facts_fts.rowid "
                f"WHERE f.tenant_id = ? AND semantic_facts_fts MATCH ?{extra} "
                "ORDER BY bm25 ASC, f.fact_id ASC LIMIT ?"
            )
            .bind(self._tenant_id, expression, *params, limit)
            .all()
        )
        # bm25() is smaller for better matches; flip it so higher is better everywhere.
        return [ChannelHit(id=row["fact_id"], score=-float(row["bm25"])) for row in result.results]

    async def _exact_channel(
        self, query: str, filters: RecallFilters, limit: int, now: float
    ) -> tuple[list[ChannelHit], bool]:
        """Facts whose subject or predicate equals a string the query names. Returns the
        hits and whether they are all of them (False: more than `limit` matched)."""
        names = exact_match_candidates(query)
        if not names:
            return [], True
        extra, params = self._row_filter_sql(filters, now)
        marks = ", ".join("?" for _ in names)
        # Two index lookups (subject, predicate) rather than one OR, which SQLite may plan
        # as a scan of the tenant.
        result = (
            await self._db.prepare(
                "SELECT f.fact_id AS fact_id FROM semantic_facts AS f "
                f"WHERE f.tenant_id = ? AND f.subject IN ({marks}){extra} "
                "UNION "
                "SELECT f.fact_id AS fact_id FROM semantic_facts AS f "
                f"WHERE f.tenant_id = ? AND f.predicate IN ({marks}){extra} "
                "LIMIT ?"
            )
            .bind(self._tenant_id, *names, *params, self._tenant_id, *names, *params, limit + 1)
            .all()
        )
        hits = [ChannelHit(id=row["fact_id"], score=1.0) for row in result.results]
        if len(hits) > limit:
            return [], False
        return hits, True

    async def _load_rows(self, fact_ids: Sequence[str], columns: str = "*") -> dict[str, Row]:
        rows: dict[str, Row] = {}
        for chunk in _chunks(fact_ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = (
                await self._db.prepare(
                    f"SELECT {columns} FROM semantic_facts "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks})"
                )
                .bind(self._tenant_id, *chunk)
                .all()
            )
            for row in result.results:
                rows[row["fact_id"]] = row
        return rows

    @staticmethod
    def _is_live(row: Row, filters: RecallFilters, now: float) -> bool:
        if row["status"] != "active":
            return False
        if row["valid_to"] is not None and int(row["valid_to"]) <= _ms(now):
            return False
        if filters.agent_type is not None and row["agent_type"] != filters.agent_type:
            return False
        if filters.subject is not None and row["subject"] != filters.subject:
            return False
        if filters.predicate is not None and row["predicate"] != filters.predicate:
            return False
        return not (
            filters.min_confidence is not None and float(row["confidence"]) < filters.min_confidence
        )

    async def _drop_stray_vectors(self, fact_ids: Sequence[str]) -> None:
        """Delete vectors whose row is gone (a delete whose vector step failed). Best
        effort: recall already ignores them, so a failure here only delays the cleanup."""
        try:
            await self.reconcile_vectors(fact_ids)
        except Exception as exc:
            log.warning(
                "could not delete %d stray vector(s) of tenant %s: %s",
                len(fact_ids),
                self._tenant_id,
                exc,
            )

    async def reconcile_vectors(self, fact_ids: Sequence[str]) -> list[str]:
        """Delete this tenant's vectors among `fact_ids` that have no row. Returns them."""
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return []
        rows = await self._load_rows(ids)
        orphans = [fid for fid in ids if fid not in rows]
        if not orphans:
            return []
        mine = await self._own_vector_ids(orphans)
        if mine:
            await self._vectors.delete_by_ids(mine)
        return mine

    async def _own_vector_ids(self, ids: Sequence[str]) -> list[str]:
        """The ids among `ids` whose vector belongs to this tenant. Vector ids are unique
        per index, not per namespace, so a delete must never trust an id alone."""
        records = await self._vectors.get_by_ids(list(ids))
        return [
            r.id
            for r in records
            if r.namespace == self._namespace and r.metadata.get("tenant_id") == self._tenant_id
        ]

    async def _record_recall(
        self,
        query: str,
        top_k: int,
        results: Sequence[RecalledFact],
        counts: dict[str, int],
        dropped: list[str],
        now: float,
    ) -> str:
        event = memory_retrieved(
            tenant_id=self._tenant_id,
            tier=self._tier,
            now=now,
            query=query,
            top_k=top_k,
            results=[
                RetrievedItem(
                    id=r.fact.fact_id,
                    score=round(r.score, 6),
                    relevance=round(r.breakdown.relevance, 6),
                    recency=round(r.breakdown.recency, 6),
                    confidence=round(r.breakdown.confidence, 6),
                    density=round(r.breakdown.density, 6),
                )
                for r in results
            ],
            candidates=counts,
            dropped=dropped,
            agent_type=self._agent_type,
            run_id=self._run_id,
        )
        statements: list[D1Statement] = []
        ids = [r.fact.fact_id for r in results]
        for chunk in _chunks(ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._db.prepare(
                    "UPDATE semantic_facts SET last_recalled_at = ?, "
                    "recall_count = recall_count + 1 "
                    f"WHERE tenant_id = ? AND fact_id IN ({marks})"
                ).bind(_ms(now), self._tenant_id, *chunk)
            )
        statements.append(self._events.statement(event))
        # The stats and the event commit together (one D1 batch is one transaction).
        await self._db.batch(statements)
        return event.event_id

    # ------------------------------------------------------------------ deletes

    async def delete(self, fact_id: str) -> DeleteResult:
        """Delete a fact's row and its vector (admin only; ADR-0030). Idempotent: deleting
        an absent fact is a no-op that still removes a vector left behind earlier."""
        if not isinstance(fact_id, str) or not is_ulid(fact_id):
            raise MemoryInputError(
                "fact_id must be a 26-character ULID",
                [{"field": "fact_id", "problem": "not a ULID"}],
            )
        # Row first: the row is the source of truth, and a vector without its row is
        # never returned by recall.
        result = (
            await self._db.prepare("DELETE FROM semantic_facts WHERE tenant_id = ? AND fact_id = ?")
            .bind(self._tenant_id, fact_id)
            .run()
        )
        row_deleted = result.meta.changes > 0
        try:
            mine = await self._own_vector_ids([fact_id])
            if mine:
                await self._vectors.delete_by_ids(mine)
        except Exception as exc:
            log.warning(
                "deleting the vector of fact %s (tenant %s) failed: %s",
                fact_id,
                self._tenant_id,
                exc,
            )
            return DeleteResult(
                fact_id=fact_id, row_deleted=row_deleted, vector_deleted=False, complete=False
            )
        return DeleteResult(fact_id=fact_id, row_deleted=row_deleted, vector_deleted=bool(mine))
