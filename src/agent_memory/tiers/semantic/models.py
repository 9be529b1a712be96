"""The semantic tier's vocabulary: limits, errors, the models facts travel in, and `FactScope`.

`namespace_for_tenant` and `embedding_tag` name and tag a tenant's vectors; both are stable
across deploys (changing them would orphan stored vectors). Vector ids are unique per index,
not per namespace, so an id alone is never trusted: `own_vectors` (a vector in the
tenant's namespace *and* carrying its `tenant_id`) is the one ownership check before any
delete. `FactScope` names one tenant's stores once for every part of the tier.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_memory.governance.personal_data import PersonalData, Sealable
from agent_memory.governance.writes import EventLog, WriteGate
from agent_memory.ids import IDS_PER_STATEMENT, chunks, sha256_hex
from agent_memory.namespace import AGENT_TYPE_PATTERN, DEFAULT_SUBJECT
from agent_memory.retrieval import ChannelDetail, RetrievalConfig, ScoreBreakdown
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.embedder import Embedder, EmbeddingConfig
from bindings.ports.kv import KVNamespace
from bindings.ports.reranker import Reranker
from bindings.ports.sql import Row, SqlValue
from bindings.ports.vectorize import (
    VECTORIZE_MAX_METADATA_BYTES,
    VECTORIZE_MAX_NAMESPACE_BYTES,
    VectorIndex,
    VectorRecord,
)
from http_messages import MAX_EPOCH_SECONDS, CodedError

# Vectorize indexes the first 64 bytes of a string metadata value (metadata-filtering.mdx).
VECTORIZE_MAX_INDEXED_STRING_BYTES = 64
NAMESPACE_PREFIX = "agent_memory_semantic:"
# Tenant ids never contain "~" (namespace.TENANT_PATTERN), so a hashed name cannot equal a
# plain one.
HASHED_NAMESPACE_PREFIX = NAMESPACE_PREFIX + "~"
MAX_CONTENT_CHARS = 8_192  # semantic_facts.content CHECK
MAX_QUERY_CHARS = 2_048
MAX_METADATA_BYTES = VECTORIZE_MAX_METADATA_BYTES  # 10 KiB, Vectorize's metadata limit
MAX_TOP_K = 20  # ADR-0030 recall_memory schema
MAX_RANK_LIMIT = 1_000
DEFAULT_TOP_K = 5
DEFAULT_PREDICATE = "states"
DEFAULT_CONFIDENCE = 0.7
DEFAULT_AGENT_TYPE = "default"
IDS_PER_CALL = 100  # vector ids per Vectorize get/delete
EMBED_BATCH = 100  # Workers AI takes ≤ 100 texts per call

FactStatus = Literal["pending_vector", "active", "superseded"]


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


# --------------------------------------------------------------------------- errors


class MemoryInputError(CodedError, ValueError):
    """Bad input: nothing was read or written. `code` is stable; `problems` lists fields."""

    status = 422

    def __init__(
        self, message: str, problems: list[dict[str, str]] | None = None, code: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code or "validation_error"
        self.message = message
        self.problems = problems or []
        self.details = {"problems": self.problems}

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
    # Epoch seconds, at most the end of year 9999: stored as milliseconds, which D1 binds.
    valid_from: float | None = Field(default=None, gt=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False)
    valid_to: float | None = Field(default=None, gt=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False)
    # The session / run / thread this memory was written in (default: the run it was learned
    # from). A memory with a session is indexed with the memories around it in that session
    # (contextual indexing, docs/semantic-memory.md).
    session: str | None = Field(default=None, min_length=1, max_length=256)

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


class TimeWindow(BaseModel):
    """A recall's dates, epoch seconds: only memories whose `valid_from` (when they became
    true) lies in [valid_from_after, valid_from_before) ("what did we discuss in May?"), and
    when the question is asked (`reference_date`, default now), for the dates it names
    relative to then ("last May", "two weeks ago"): without an explicit window, memories
    dated in the period the question names rank higher (`RetrievalConfig.question_dates`)."""

    valid_from_after: float | None = Field(
        default=None, ge=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False
    )
    valid_from_before: float | None = Field(
        default=None, gt=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False
    )
    reference_date: float | None = Field(
        default=None, gt=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False
    )

    @model_validator(mode="after")
    def _time_window(self) -> Self:
        after, before = self.valid_from_after, self.valid_from_before
        if after is not None and before is not None and before <= after:
            raise ValueError("valid_from_before must be after valid_from_after")
        return self


class RecallFilters(TimeWindow):
    """Optional narrowing of a recall (ADR-0030 `MemoryQuery.filters`)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    predicate: str | None = Field(default=None, min_length=1, max_length=128)
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    # Epoch seconds: answer with what was believed then — facts written by then and not yet
    # superseded then (their validity interval contains it), superseded ones included.
    as_of: float | None = Field(default=None, gt=0, le=MAX_EPOCH_SECONDS, allow_inf_nan=False)
    # Not filters but how results come back: `neighbours` memories either side of each
    # result in its session, as its `context` (at most `context_budget` in all, best results
    # first); `diversify` spreads the top over sessions (None: the configuration decides,
    # `RetrievalConfig.auto_diversify`).
    neighbours: int | None = Field(default=None, ge=0, le=3)
    context_budget: int | None = Field(default=None, ge=1, le=60)
    diversify: bool | None = None


class RecallRequest(BaseModel):
    """A recall as a tool or route receives it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="The search query. Specific, well-formed queries return better results.",
    )
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
    # As the row keeps it: the first 24 hex characters (`writes.STORED_HASH_CHARS`).
    content_hash: str
    status: FactStatus
    superseded_by: str | None
    valid_from: int
    valid_to: int | None
    created_at: int
    updated_at: int
    last_recalled_at: int | None
    recall_count: int
    # The key derived on write (`keys.derive_key`).
    key_entity: str = ""
    key_attribute: str = ""
    key_source: str = ""
    # The session it was written in (migration 0009); None for memories without one.
    session_key: str | None = None


async def open_facts(rows: Sequence[Row], personal: PersonalData) -> list[Fact]:
    """The facts of `rows` with their sealed personal metadata opened: every read of fact
    rows goes through here (docs/personal-data.md)."""
    opened = await personal.open_many(
        "metadata",
        [
            Sealable(
                row.get("subject"), str(row["fact_id"]), json.loads(row.get("metadata") or "{}")
            )
            for row in rows
        ],
    )
    facts = []
    for row, metadata in zip(rows, opened, strict=True):
        data = {name: row.get(name) for name in Fact.model_fields} | {"metadata": metadata}
        for name in ("key_entity", "key_attribute", "key_source"):
            data[name] = data[name] or ""  # a row read without the 0005 columns
        facts.append(Fact.model_validate(data))
    return facts


class LearnResult(BaseModel):
    fact_id: str
    status: FactStatus
    created: bool
    content_hash: str
    error: str | None = None


BREAKDOWN_PARTS = ("relevance", "recency", "confidence", "density")


def breakdown_view(
    b: ScoreBreakdown, channels: Mapping[str, ChannelDetail] | None = None
) -> dict[str, Any]:
    """A score breakdown as tools and the memory API show it (rounded; channels: rank, raw)."""
    view: dict[str, Any] = {k: round(getattr(b, k), 6) for k in BREAKDOWN_PARTS}
    view["weights"] = {k: round(v, 6) for k, v in b.weights.items()}
    if channels is not None:
        view["channels"] = {
            n: {"rank": d.rank, "raw": round(d.raw, 6)} for n, d in channels.items()
        }
    return view


class ContextMemory(BaseModel):
    """A memory next to a result in its session (`RecallFilters.neighbours`)."""

    fact_id: str
    content: str
    valid_from: int
    offset: int  # its place relative to the result: -1 just before, 1 just after


class RecalledFact(BaseModel):
    fact: Fact
    score: float
    context: list[ContextMemory] = Field(default_factory=list)
    breakdown: ScoreBreakdown
    channels: dict[str, ChannelDetail]
    # A newer candidate states a new value for the same key (`keys.judge_update`) and the
    # reconciler has not superseded this one yet: the newer one ranks above it.
    possibly_outdated: bool = False

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
            # When it became true (epoch ms) and that day in UTC, for date arithmetic.
            "valid_from": fact.valid_from,
            "date": datetime.fromtimestamp(fact.valid_from / 1000, tz=UTC).date().isoformat(),
            "key": {
                "entity": fact.key_entity,
                "attribute": fact.key_attribute,
                "source": fact.key_source,
            },
            "status": fact.status,
            "superseded_by": fact.superseded_by,
            "possibly_outdated": self.possibly_outdated,
            **({"context": [c.model_dump() for c in self.context]} if self.context else {}),
            "score": round(self.score, 6),
            "score_breakdown": breakdown_view(self.breakdown, self.channels),
        }


class RecallResult(BaseModel):
    results: list[RecalledFact]
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


async def own_vectors(
    vectors: VectorIndex, tenant_id: str, ids: Sequence[str]
) -> list[VectorRecord]:
    """The vectors among `ids` that belong to `tenant_id` (its namespace and `tenant_id`)."""
    namespace = namespace_for_tenant(tenant_id)
    mine: list[VectorRecord] = []
    for chunk in chunks(list(ids), IDS_PER_CALL):
        records = await vectors.get_by_ids(list(chunk))
        mine += [
            r
            for r in records
            if r.namespace == namespace and r.metadata.get("tenant_id") == tenant_id
        ]
    return mine


async def delete_own_vectors(vectors: VectorIndex, tenant_id: str, ids: Sequence[str]) -> list[str]:
    """Delete the tenant's vectors among `ids`; returns the ids deleted."""
    mine = [r.id for r in await own_vectors(vectors, tenant_id, ids)]
    for chunk in chunks(mine, IDS_PER_CALL):
        await vectors.delete_by_ids(list(chunk))
    return mine


log = logging.getLogger(__name__)


def ms(seconds: float) -> int:
    """Epoch seconds to the epoch milliseconds D1 stores."""
    return round(seconds * 1000)


def check_matrix(matrix: Any, rows: int, config: EmbeddingConfig) -> None:
    """Raise unless the embedder returned `rows` vectors of the configured dimensions."""
    shape = getattr(matrix, "shape", None)
    if isinstance(matrix, list):  # plain rows (bindings.ports.embedder.Vectors)
        shape = (len(matrix), *{len(row) for row in matrix})
    if shape is None or tuple(shape) != (rows, config.dimensions):
        raise RuntimeError(
            f"embedder returned shape {shape}, expected ({rows}, {config.dimensions})"
        )


@dataclass(frozen=True, slots=True)
class FactScope:
    """One tenant's semantic stores and the settings every operation on them uses."""

    tenant_id: str
    namespace: str
    db: D1Database
    vectors: VectorIndex
    embedder: Embedder | None
    clock: Clock
    config: RetrievalConfig
    agent_type: str
    run_id: str | None
    events: EventLog
    gate: WriteGate
    # Seals and opens the personal fields of fact metadata (docs/personal-data.md).
    personal: PersonalData
    # `ctx.waitUntil`: work that may finish after the response. None: done before returning.
    background: BackgroundTasks | None = None
    # Where recall records that D1 refused every time wait to be written back
    # (`recall.RecallRecorder`). None: such a record is logged at ERROR with its payload.
    kv: KVNamespace | None = None
    # The reranking stage's model (`recall.rerank_head`); None: the embedder rescores.
    reranker: Reranker | None = None

    async def after_response(self, work: Coroutine[Any, Any, object], what: str) -> None:
        """Run `work` after the response when a background is bound, else now. A failure is
        logged, never raised: `work` must be something the caller's result does not need."""

        async def guarded() -> None:
            try:
                await work
            except Exception as exc:
                log.warning("%s failed for tenant %s: %s", what, self.tenant_id, exc)

        if self.background is not None:
            self.background.wait_until(guarded())
        else:
            await guarded()

    def sql(self, sql: str, *params: SqlValue) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self.db.prepare(sql).bind(self.tenant_id, *params)

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise SemanticTierUnavailable("no embedder is bound; learn and recall need one")
        return self.embedder

    async def load_rows(self, fact_ids: Sequence[str], columns: str = "*") -> dict[str, Row]:
        """This tenant's rows among `fact_ids` (any status), by fact id."""
        rows: dict[str, Row] = {}
        for chunk in chunks(fact_ids, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = await self.sql(
                f"SELECT {columns} FROM semantic_facts WHERE tenant_id = ? "
                f"AND fact_id IN ({marks})",
                *chunk,
            ).all()
            rows.update((row["fact_id"], row) for row in result.results)
        return rows
