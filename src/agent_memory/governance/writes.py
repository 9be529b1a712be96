"""What may be written to memory and the record of what was (ADR-0051): write proposals, the
policy that checks them before they commit, and the memory event log (docs/lifecycle.md "Write
policy" gives the rules, the events and what a denial leaves: nothing written). A caller putting
`EventLog.statement(event)` into its own `db.batch` commits the event with its change.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.agent_types import BUILT_IN, AgentType
from agent_memory.governance.feed import ChangeFeed
from agent_memory.ids import delete_ids, new_ulid, run_batches, sha256_hex
from agent_memory.namespace import DEFAULT_SUBJECT, TENANT_RE
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock, SystemClock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import Row, SqlValue
from http_messages import CodedError

EventKind = Literal["memory_retrieved", "memory_written"]

EventTier = Literal["working", "episodic", "semantic", "procedural"]
# A SQL condition and its `?` parameters, and a statement written only if one holds.
Condition = tuple[str, tuple[SqlValue, ...]]
Recorder = Callable[[Condition], D1Statement]

QUERY_PREVIEW_CHARS = 1_000


class MemoryEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str = Field(min_length=26, max_length=26)
    tenant_id: str
    kind: EventKind
    tier: EventTier
    agent_type: str | None = None
    run_id: str | None = None
    content_hash: str | None = Field(default=None, min_length=64, max_length=64)
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at_ms: int = Field(gt=0)


class RetrievedItem(BaseModel):
    """One result as the `memory_retrieved` event lists it (stored as an array of
    `RETRIEVED_FIELDS`)."""

    id: str
    score: float
    relevance: float
    recency: float
    confidence: float
    density: float


RETRIEVED_FIELDS = ("id", "score", "relevance", "recency", "confidence", "density")


def stored_payload(kind: str, payload: Mapping[str, Any]) -> str:
    """`payload` as `memory_events.payload` holds it: JSON without spaces, a
    `memory_retrieved` event's results as arrays of `RETRIEVED_FIELDS`."""
    results = payload.get("results")
    if kind == "memory_retrieved" and isinstance(results, list):
        payload = {
            **payload,
            "results": [
                [r.get(f) for f in RETRIEVED_FIELDS] if isinstance(r, dict) else r for r in results
            ],
        }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def loaded_payload(text: str | None) -> dict[str, Any]:
    """A stored payload (`stored_payload`) as the event carries it: each result stored as an
    array becomes its object again."""
    payload: dict[str, Any] = json.loads(text or "{}")
    if isinstance(results := payload.get("results"), list):
        payload["results"] = [dict(zip(RETRIEVED_FIELDS, r, strict=False)) for r in results]
    return payload


def memory_retrieved(
    *,
    tenant_id: str,
    tier: EventTier,
    now: float,
    query: str,
    top_k: int,
    results: list[RetrievedItem],
    candidates: dict[str, int],
    dropped: list[str] | None = None,
    agent_type: str | None = None,
    run_id: str | None = None,
) -> MemoryEvent:
    """The event one recall emits: which ids it returned, with their scores."""
    return MemoryEvent(
        event_id=new_ulid(now),
        tenant_id=tenant_id,
        kind="memory_retrieved",
        tier=tier,
        agent_type=agent_type,
        run_id=run_id,
        payload={
            "query": query[:QUERY_PREVIEW_CHARS],
            "top_k": top_k,
            "results": [item.model_dump() for item in results],
            "candidates": candidates,
            "dropped": dropped or [],
        },
        created_at_ms=int(now * 1000),
    )


def memory_written(
    *,
    tenant_id: str,
    tier: EventTier,
    now: float,
    content_hash: str | None,
    payload: dict[str, Any],
    agent_type: str | None = None,
    run_id: str | None = None,
) -> MemoryEvent:
    """The event a committed write emits, carrying the content hash (ADR-0051)."""
    return MemoryEvent(
        event_id=new_ulid(now),
        tenant_id=tenant_id,
        kind="memory_written",
        tier=tier,
        agent_type=agent_type,
        run_id=run_id,
        content_hash=content_hash,
        payload=payload,
        created_at_ms=int(now * 1000),
    )


# The daily brief's figure on this store's table (`lifecycle.brief`): pairs the update
# adjudicator was unsure about in the last 24 hours.
BRIEF_FIGURES = (
    "(SELECT COUNT(*) FROM memory_events WHERE tenant_id = ?1 AND kind = 'memory_written' "
    "AND created_at > ?2 - 86400000 AND json_extract(payload, '$.decision') = 'unsure') "
    "AS updates_unsure"
)


# The facts and episodes that are their own `memory_written` event (migration 0019,
# `WriteGate.event_in_row`), as rows of `memory_events`, each newest first, with the columns
# their event's hash and payload are made of (`w_*`, `_filled_in`). A fact's created_at is its
# id's time to the millisecond, so its index on (tenant_id, fact_id) gives the order; an
# episode's is the caller's, so memory_episodes_by_age does. The hash and payload are filled
# in after the read: a filter on them (SQL NULL and `{}`) costs no read of the rows. ?: the
# tenant.
IN_ROW_EVENTS = (
    "SELECT * FROM (SELECT tenant_id, fact_id AS event_id, 'memory_written' AS kind, "
    "'semantic' AS tier, agent_type, learned_from_run_id AS run_id, NULL AS content_hash, "
    "'{}' AS payload, created_at, subject AS w_subject, predicate AS w_predicate, "
    "object AS w_object, content AS w_content, metadata AS w_metadata, source AS w_source, "
    "confidence AS w_confidence FROM semantic_facts WHERE tenant_id = ? AND event_in_row = 1) "
    "WHERE {where} ORDER BY event_id DESC LIMIT ?",
    "SELECT * FROM (SELECT tenant_id, episode_id AS event_id, 'memory_written' AS kind, "
    "'episodic' AS tier, agent_type, run_id, NULL AS content_hash, '{}' AS payload, "
    "created_at, kind AS w_kind, subject AS w_subject, content AS w_content, data AS w_data, "
    "importance AS w_importance FROM memory_episodes WHERE tenant_id = ? AND event_in_row = 1) "
    "WHERE {where} ORDER BY created_at DESC, event_id DESC LIMIT ?",
)


def _filled_in(row: Row) -> Row:
    """An in-row event with the hash and payload the full event of its write would carry,
    from its row's `w_*` columns (the tier's proposal, rebuilt as the tier builds it)."""
    w = {key[2:]: value for key, value in row.items() if key.startswith("w_")}
    event = {key: value for key, value in row.items() if not key.startswith("w_")}
    if event["tier"] == "semantic":
        proposal = fact_proposal({**w, "metadata": json.loads(str(w["metadata"]))})
    else:
        data = json.loads(str(w["data"]))
        proposal = episode_proposal({**w, "episode_id": event["event_id"], "data": data})
    payload = json.dumps(written_payload(proposal))
    return {**event, "content_hash": proposal.content_hash, "payload": payload}


class EventLog:
    """Reads and writes `memory_events` for one tenant (and reads the facts that are their
    own event)."""

    def __init__(self, tenant_id: str, db: D1Database) -> None:
        if not TENANT_RE.fullmatch(tenant_id):
            raise ValueError(f"invalid tenant id {tenant_id!r}")
        self.tenant_id = tenant_id
        self._db = db

    def _sql(self, sql: str, *params: SqlValue) -> D1Statement:
        return self._db.prepare(sql).bind(self.tenant_id, *params)

    def statement(
        self, event: MemoryEvent, *, if_absent: bool = False, when: Condition | None = None
    ) -> D1Statement:
        """The INSERT for `event`, to run alone or inside the caller's batch. `if_absent`:
        do nothing when the event id is taken (a retried write recording its event again);
        `when` (SQL, parameters): only if that holds (the change it records happened)."""
        if event.tenant_id != self.tenant_id:
            raise ValueError("event belongs to another tenant")
        conflict = " ON CONFLICT (tenant_id, event_id) DO NOTHING" if if_absent else ""
        where, also = when or ("1", ())
        return self._db.prepare(
            "INSERT INTO memory_events (tenant_id, event_id, kind, tier, agent_type, run_id, "
            f"content_hash, payload, created_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE {where}"
            f"{conflict}"
        ).bind(
            self.tenant_id,
            event.event_id,
            event.kind,
            event.tier,
            event.agent_type,
            event.run_id,
            event.content_hash,
            stored_payload(event.kind, event.payload),
            event.created_at_ms,
            *also,
        )

    async def record(self, event: MemoryEvent) -> None:
        await self.statement(event).run()

    async def record_many(self, events: Sequence[MemoryEvent], *, if_absent: bool = False) -> None:
        """Write `events` in D1 batches (each batch one transaction)."""
        await run_batches(self._db, [self.statement(e, if_absent=if_absent) for e in events])

    async def rows(self, sql_where: str, *params: SqlValue, limit: int) -> list[Row]:
        """This tenant's event rows matching `sql_where` (its own clauses on the columns of
        `memory_events`, `?` parameters), newest first, at most `limit`: the event rows and
        the facts and episodes that are their own event (`IN_ROW_EVENTS`), in one round
        trip."""
        own = (
            f"SELECT * FROM memory_events WHERE tenant_id = ? AND {sql_where} "
            "ORDER BY created_at DESC, event_id DESC LIMIT ?"
        )
        results = await self._db.batch(
            [
                self._sql(sql, *params, limit)
                for sql in (own, *(arm.replace("{where}", sql_where) for arm in IN_ROW_EVENTS))
            ]
        )
        rows = [row for result in results for row in result.results]
        rows.sort(key=lambda row: (row["created_at"], row["event_id"]), reverse=True)
        return [_filled_in(row) if "w_content" in row else row for row in rows[:limit]]

    async def written(self, fact_id: str, content_hash: str, limit: int) -> list[Row]:
        """The `memory_written` events of semantic writes of this content hash, and the
        compact one of the write that created `fact_id` (its id, no hash: `WriteGate.event`)."""
        return await self.rows(
            "kind = 'memory_written' AND tier = 'semantic' AND (content_hash = ? OR event_id = ?)",
            content_hash,
            fact_id,
            limit=limit,
        )

    async def supersessions(self, fact_id: str, limit: int) -> list[Row]:
        """The `memory_written` events of supersessions and merges naming `fact_id`, as
        winner (`key`) or loser (`supersedes`), and their undos and replays (`fact_id`)."""
        return await self.rows(
            "kind = 'memory_written' AND (json_extract(payload, '$.supersedes') = ? "
            "OR json_extract(payload, '$.fact_id') = ? "
            "OR (json_extract(payload, '$.key') = ? "
            "AND json_extract(payload, '$.supersedes') IS NOT NULL))",
            fact_id,
            fact_id,
            fact_id,
            limit=limit,
        )

    async def retrieving(self, item_id: str, limit: int) -> list[Row]:
        """The `memory_retrieved` events that returned `item_id`."""
        return await self.rows(
            "kind = 'memory_retrieved' AND EXISTS (SELECT 1 FROM json_each(payload, "
            "'$.results') AS r WHERE json_extract(r.value, '$[0]') = ?)",
            item_id,
            limit=limit,
        )

    async def page_after(self, after: str, limit: int) -> list[Row]:
        """Events by id after `after` (the subject erase pages through all of them)."""
        result = await self._sql(
            "SELECT event_id, run_id, content_hash, payload FROM memory_events "
            "WHERE tenant_id = ? AND event_id > ? ORDER BY event_id LIMIT ?",
            after,
            limit,
        ).all()
        return list(result.results)

    def scrub_statement(self, event_id: str, payload: dict[str, Any]) -> D1Statement:
        """Replace an event's payload (an erase scrubbing erased ids out of it)."""
        return self._db.prepare(
            "UPDATE memory_events SET payload = ? WHERE tenant_id = ? AND event_id = ?"
        ).bind(
            json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
            self.tenant_id,
            event_id,
        )

    async def delete(self, event_ids: Sequence[str]) -> int:
        """Delete the events among `event_ids`; how many went."""
        sql = "DELETE FROM memory_events WHERE tenant_id = ? AND event_id IN ({marks})"
        return await delete_ids(self._db, sql, self.tenant_id, event_ids)

    async def mark_erase_start(self, now_ms: int, kept_ms: int) -> None:
        """Record that a subject erase starts now (`erasure_marks`, migration 0013) and drop
        marks older than `kept_ms`."""
        insert = (
            "INSERT INTO erasure_marks (tenant_id, started_at) VALUES (?, ?) "
            "ON CONFLICT (tenant_id, started_at) DO NOTHING"
        )
        delete = "DELETE FROM erasure_marks WHERE tenant_id = ? AND started_at < ?"
        await self._db.batch([self._sql(insert, now_ms), self._sql(delete, now_ms - kept_ms)])

    def redact_if_erasing_statement(self, event_id: str, since_ms: int) -> D1Statement:
        """Drop the query text of event `event_id` if an erase has started since `since_ms`
        (a recall record racing a subject erase keeps no text the erase could miss)."""
        return self._db.prepare(
            "UPDATE memory_events SET payload = json_set(json_remove(payload, '$.query'), "
            "'$.query_redacted', json('true')) "
            "WHERE tenant_id = ? AND event_id = ? AND EXISTS (SELECT 1 FROM erasure_marks "
            "WHERE tenant_id = ? AND started_at >= ?)"
        ).bind(self.tenant_id, event_id, self.tenant_id, since_ms)

    async def adjudicated_since(self, since_ms: int, adjudicator: str) -> int:
        """How many update pairs adjudicators named `adjudicator…` decided since then (the
        `memory_written` events of applied and of other decisions)."""
        count = await self._sql(
            "SELECT COUNT(*) AS n FROM memory_events WHERE tenant_id = ? "
            "AND kind = 'memory_written' AND created_at > ? "
            "AND coalesce(json_extract(payload, '$.adjudicator'), "
            "json_extract(payload, '$.decision.adjudicator')) LIKE ?",
            since_ms,
            f"{adjudicator}%",
        ).first_value("n")
        return int(count or 0)


Tier = EventTier


PERSONAL_MARK = "_personal"


ViolationCode = Literal[
    "too_large",
    "tier_not_allowed",
    "confidence_too_low",
    "personal_data_tier",
    "personal_data_without_subject",
    "personal_field_missing",
    "invalid_proposal",
]


class WriteProposal(BaseModel):
    """One memory write, as the policy sees it."""

    model_config = ConfigDict(frozen=True)

    tier: Tier
    key: str = Field(min_length=1, max_length=512)
    value: Any
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    source: str
    supersedes: str | None = None
    agent_type: str | None = None
    subject: str | None = None
    run_id: str | None = None
    # Why the write was made, copied into its `memory_written` event as `decision` (the
    # reconciler's update step: decision, reason, adjudicator). Never personal data.
    decision: dict[str, str] | None = None
    # The tier's own row, the event's id, holds what the hash and payload would say (a fact:
    # subject, predicate, content, source, confidence): the event is compact, no hash and
    # only the marked fields (~240 bytes fewer a fact), or with none marked no event row at
    # all: the row is the event (`WriteGate.event_in_row`); the inspector fills it in.
    in_row: bool = False

    @property
    def content(self) -> bytes:
        """The canonical JSON of the value (sorted keys, no spaces): what is hashed and sized."""
        return canonical_json(self.value)

    @property
    def content_hash(self) -> str:
        return sha256_hex(self.content)

    def personal_fields(self) -> tuple[str, ...] | None:
        """The marked personal fields: None when nothing is marked, () for the whole entry."""
        return personal_marking(self.value)


def written_payload(proposal: WriteProposal) -> dict[str, Any]:
    """The payload of `proposal`'s full `memory_written` event: never the value, only its
    key, source, confidence and size, and the subject, supersession and decision it names."""
    optional = {
        "subject": proposal.subject,
        "supersedes": proposal.supersedes,
        "decision": proposal.decision,
    }
    return {
        "key": proposal.key,
        "source": proposal.source,
        "confidence": proposal.confidence,
        "bytes": len(proposal.content),
        **{name: value for name, value in optional.items() if value},
    }


def feed_change(proposal: WriteProposal, item_id: str) -> tuple[str, dict[str, Any]]:
    """A committed write as a change-feed entry: its type and ids, never its value."""
    op = (proposal.decision or {}).get("op")
    kind = "merged" if op == "merged" else "superseded" if proposal.supersedes else "written"
    data = {"tier": proposal.tier, "id": item_id, "key": proposal.key, "source": proposal.source}
    optional = {"subject": proposal.subject, "supersedes": proposal.supersedes, "op": op}
    return kind, data | {name: value for name, value in optional.items() if value}


def fact_proposal(fact: Mapping[str, Any], **writer: Any) -> WriteProposal:
    """The write proposal of a fact (its `subject`, `predicate`, `object`, `content`,
    `metadata`, `source`, `confidence`), built alike where the semantic tier writes it and
    where its event is read back from its row; `writer`: `agent_type`, `run_id`, `in_row`."""
    subject = str(fact["subject"])
    return WriteProposal(
        tier="semantic",
        key=f"{subject}|{fact['predicate']}",
        value={
            name: fact[name] for name in ("subject", "predicate", "object", "content", "metadata")
        },
        confidence=fact["confidence"],
        source=fact["source"],
        # The catch-all subject names nobody: personal data needs a real one.
        subject=None if subject == DEFAULT_SUBJECT else subject,
        **writer,
    )


def episode_proposal(episode: Mapping[str, Any], **writer: Any) -> WriteProposal:
    """The write proposal of an episode (its `episode_id`, `kind`, `subject`, `content`,
    `data`, `importance`), built alike where the episodic tier writes it and where its event
    is read back from its row; `writer`: `agent_type`, `run_id`."""
    return WriteProposal(
        tier="episodic",
        key=episode["episode_id"],
        value={
            name: episode[name] for name in ("kind", "subject", "content", "data", "importance")
        },
        source=f"episode:{episode['kind']}",
        subject=episode["subject"],
        **writer,
    )


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: ViolationCode
    message: str


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    violations: list[Violation] = Field(default_factory=list)


class WriteDenied(CodedError, ValueError):
    """The policy refused a proposal; nothing was written. `violations` says why."""

    status, code = 422, "memory_write_denied"

    def __init__(self, proposal: WriteProposal, violations: Sequence[Violation]) -> None:
        reasons = "; ".join(f"{v.code}: {v.message}" for v in violations)
        super().__init__(f"memory write to {proposal.tier} {proposal.key!r} denied: {reasons}")
        self.proposal = proposal
        self.violations = list(violations)
        self.details = {
            "tier": proposal.tier,
            "key": proposal.key,
            "violations": [v.model_dump() for v in self.violations],
        }


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def personal_marking(value: Any) -> tuple[str, ...] | None:
    """Read the `_personal` mark of a JSON object value (docs/lifecycle.md, rule 4)."""
    if not isinstance(value, Mapping) or PERSONAL_MARK not in value:
        return _nested_marking(value)
    mark = value[PERSONAL_MARK]
    if mark is True:
        return ()
    if mark is False or mark is None:
        return _nested_marking(value)
    if isinstance(mark, list) and all(isinstance(item, str) for item in mark):
        return tuple(mark)
    return ("<invalid _personal mark>",)


def _nested_marking(value: Any) -> tuple[str, ...] | None:
    # A mark one level down (`{"data": {"_personal": [...]}}`, a fact's metadata) counts too.
    if isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(item, Mapping) and PERSONAL_MARK in item:
                inner = personal_marking(item)
                if inner is not None:
                    return tuple(f"{name}.{field}" for field in inner) or (name,)
    return None


log = logging.getLogger(__name__)


DEFAULT_MAX_BYTES: dict[Tier, int] = {
    # Working memory's real bound is its 128 KiB per-instance budget (`working.py`), which
    # it reports with the numbers; this is only a backstop.
    "working": 1024 * 1024,
    "episodic": 64 * 1024,
    "semantic": 24 * 1024,
    "procedural": 16 * 1024,
}


DEFAULT_CONFIDENCE_FLOOR: dict[Tier, float] = {"semantic": 0.1}  # other tiers: 0


class WritePolicy(BaseModel):
    """The rules' parameters. The defaults are the deployment's policy."""

    model_config = ConfigDict(frozen=True)

    max_bytes: dict[Tier, int] = Field(default_factory=lambda: dict(DEFAULT_MAX_BYTES))
    confidence_floor: dict[Tier, float] = Field(
        default_factory=lambda: dict(DEFAULT_CONFIDENCE_FLOOR)
    )
    personal_data_tiers: frozenset[Tier] = frozenset({"episodic", "semantic"})
    # The deployment's agent types (`agent_types.catalog`): whose writes rule 2 limits.
    agent_types: Mapping[str, AgentType] = Field(default_factory=lambda: dict(BUILT_IN))

    def allowed_tiers(self, agent_type: str | None) -> frozenset[Tier] | None:
        """The tiers an agent type of the deployment may write; None = not limited here."""
        found = self.agent_types.get(agent_type) if agent_type else None
        if found is None:
            return None
        tiers: set[Tier] = {"episodic", "procedural"}
        if found.memory.working_memory:
            tiers.add("working")
        if found.memory.long_term_enabled:
            tiers.add("semantic")
        return frozenset(tiers)

    def evaluate(self, proposal: WriteProposal) -> Decision:
        """Check `proposal` against every rule; all violations are reported."""
        found: list[Violation] = []

        def deny(code: ViolationCode, message: str) -> None:
            found.append(Violation(code=code, message=message))

        tier, agent = proposal.tier, proposal.agent_type
        try:
            size = len(proposal.content)
        except (TypeError, ValueError) as exc:
            deny("invalid_proposal", f"value is not JSON: {exc}")
            size = 0
        limit = self.max_bytes.get(tier, 0)
        if size > limit:
            deny("too_large", f"{size} bytes of JSON; the {tier} tier takes at most {limit}")
        # Only an agent writing during one of its runs is held to its type's tiers; the
        # same type name on a platform write (an operator, a test) is just a label.
        allowed = self.allowed_tiers(agent) if proposal.run_id else None
        if allowed is not None and tier not in allowed:
            names = ", ".join(sorted(allowed))
            deny("tier_not_allowed", f"agent type {agent!r} may write {names}, not {tier}")
        floor = self.confidence_floor.get(tier, 0.0)
        if proposal.confidence < floor:
            message = f"confidence {proposal.confidence:g} is below the {tier} floor {floor:g}"
            deny("confidence_too_low", message)
        if not 1 <= len(proposal.source) <= 64:
            deny("invalid_proposal", "source must be 1-64 chars")
        if proposal.supersedes is not None and proposal.supersedes == proposal.key:
            deny("invalid_proposal", "an entry cannot supersede itself")
        fields = proposal.personal_fields()
        if fields is not None:
            what = f"personal data ({', '.join(fields) if fields else 'the whole entry'})"
            if tier not in self.personal_data_tiers:
                tiers = ", ".join(sorted(self.personal_data_tiers))
                deny("personal_data_tier", f"{what} may only be written to {tiers}, not {tier}")
            if not proposal.subject:
                deny(
                    "personal_data_without_subject",
                    f"{what} must name the subject it is about, so that erasing the subject "
                    "removes it",
                )
            if missing := [f for f in fields if not _has_path(proposal.value, f)]:
                message = f"fields marked personal are not in the value: {', '.join(missing)}"
                deny("personal_field_missing", message)
        return Decision(allowed=not found, violations=found)


def _has_path(value: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


DEFAULT_POLICY = WritePolicy()


class WriteGate:
    """A tenant's policy check (`check` raises `WriteDenied`) and `memory_written` recorder
    (`committed`: one D1 batch, or `background` when given). A tier's own id (an episode or
    fact id) as the event id, inserted if absent, records a retried write's event once. A
    failed event write is logged at ERROR; the committed write is not undone."""

    def __init__(
        self,
        tenant_id: str,
        *,
        clock: Clock | None = None,
        events: EventLog | None = None,
        policy: WritePolicy | None = None,
        background: BackgroundTasks | None = None,
        admitted: Callable[[], Awaitable[None]] | None = None,
        feed: ChangeFeed | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.policy = policy or DEFAULT_POLICY
        self._clock: Clock = clock or SystemClock()
        self._events = events
        self._background = background
        self._admitted = admitted
        self.feed = feed  # where committed writes and operators' changes are published
        # Writes a tier committed with their event in its own batch (`event_statement`),
        # published by the next `committed` or `announce`, which each tier calls after.
        self._unannounced: dict[str, WriteProposal] = {}

    async def admitted(self) -> None:
        """Return once the caller may write (its memory token confirmed not revoked, a
        lookup the tier overlaps with its reads: issue 24); raises when it may not. The
        working and semantic tiers await it before their first write; a caller that
        passes `admitted` confirms before writing any other tier."""
        if self._admitted is not None:
            await self._admitted()

    def check(self, proposal: WriteProposal) -> None:
        decision = self.policy.evaluate(proposal)
        if not decision.allowed:
            log.info(
                "memory write denied: tenant=%s tier=%s key=%s %s",
                self.tenant_id,
                proposal.tier,
                proposal.key,
                [v.code for v in decision.violations],
            )
            raise WriteDenied(proposal, decision.violations)

    def check_all(self, proposals: Sequence[WriteProposal]) -> None:
        """Check every proposal before any is written (all or nothing)."""
        for proposal in proposals:
            self.check(proposal)

    def event(self, proposal: WriteProposal, event_id: str | None = None) -> MemoryEvent:
        payload = {} if proposal.in_row else written_payload(proposal)
        fields = proposal.personal_fields()
        if fields is not None:
            payload["personal_fields"] = list(fields) or ["*"]
        event = memory_written(
            tenant_id=self.tenant_id,
            tier=proposal.tier,
            now=self._clock.now(),
            content_hash=None if proposal.in_row else proposal.content_hash,
            payload=payload,
            agent_type=proposal.agent_type,
            run_id=proposal.run_id,
        )
        return event if event_id is None else event.model_copy(update={"event_id": event_id})

    def event_in_row(self, proposal: WriteProposal) -> bool:
        """Whether the tier's row is `proposal`'s `memory_written` event (migration 0019):
        its compact event would hold nothing the row does not, so none is written and
        `EventLog` reads the row (marked `event_in_row`) as the event."""
        return self._events is not None and proposal.in_row and proposal.personal_fields() is None

    def event_statement(self, proposal: WriteProposal, event_id: str) -> D1Statement | None:
        """The event INSERT (insert-if-absent, id `event_id`) for a tier that commits the
        event in the same D1 batch as its write; None when this gate records no events or
        the row is the event (`event_in_row`)."""
        self._unannounced[event_id] = proposal
        if self._events is None or self.event_in_row(proposal):
            return None
        return self._events.statement(self.event(proposal, event_id), if_absent=True)

    def defer(self, proposals: Sequence[WriteProposal]) -> None:
        """Record events from synchronous code (Durable Object SQL tiers): through
        `background` (`ctx.waitUntil`); without one, events are not recorded here."""
        self.announce(proposals)
        if self._events is None or not proposals:
            return
        events = [self.event(p) for p in proposals]
        if self._background is None:
            log.warning("memory_written events of %d write(s) dropped: no background", len(events))
            return
        self._background.wait_until(self._record(events))

    async def committed(
        self,
        proposals: Sequence[WriteProposal],
        event_ids: Sequence[str | None] | None = None,
    ) -> list[MemoryEvent]:
        """Record the `memory_written` events of committed proposals (not of those whose
        row is their event: `event_in_row`), and publish them on the change feed."""
        ids = list(event_ids) if event_ids is not None else [None] * len(proposals)
        self.announce(proposals, ids)
        events = [
            self.event(p, i)
            for p, i in zip(proposals, ids, strict=True)
            if not self.event_in_row(p)
        ]
        if self._events is None or not events:
            return []
        if self._background is not None:
            self._background.wait_until(self._record(events))
        else:
            await self._record(events)
        return events

    def announce(
        self, proposals: Sequence[WriteProposal], ids: Sequence[str | None] | None = None
    ) -> None:
        """Publish committed writes (and those `event_statement` saw) on the change feed,
        after the response: `memory.written`, or `memory.superseded` / `memory.merged` for a
        supersession (docs/portability.md "Change feed")."""
        ids = list(ids) if ids is not None else [None] * len(proposals)
        given = {i or p.key: p for p, i in zip(proposals, ids, strict=True)}
        written = {**self._unannounced, **given}
        self._unannounced.clear()
        if self.feed is not None:
            self.feed.publish(self.tenant_id, [feed_change(p, i) for i, p in written.items()])

    async def _record(self, events: Sequence[MemoryEvent]) -> None:
        assert self._events is not None
        try:
            await self._events.record_many(events, if_absent=True)
        except Exception:
            # Event ids only: the events' payloads may quote memory content.
            log.exception(
                "memory_written events NOT recorded for tenant %s: %s",
                self.tenant_id,
                [e.event_id for e in events],
            )
