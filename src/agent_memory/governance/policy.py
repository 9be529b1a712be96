"""Memory writes are proposals (ADR-0051), checked by a policy before they commit.

A `WriteProposal` is (tier, key, value, confidence, source, supersedes?) plus who proposes
it (`agent_type`, None for platform clients: MCP, operators, the reconciler) and what it is
about (`subject`). `WritePolicy.evaluate` is a pure function of the proposal; every tier
calls it (through a `WriteGate`) before writing:

* allowed → the tier commits, then the gate records a `memory_written` event carrying the
  SHA-256 of the canonical JSON of the value, the key and the subject — never the value,
  so the audit trail holds no copy of personal data;
* denied → `WriteDenied` with every `Violation` (`code`, `message`); nothing is written.

The rules (docs/lifecycle.md, "Write policy"):

1. size: the canonical JSON of the value is at most `max_bytes[tier]`;
2. tiers per agent type: an agent of a registered type writing during a run (`run_id`
   set) writes `working` only with `memory.working_memory`, `semantic` only with
   `memory.long_term_enabled`; `episodic` and `procedural` always. Other writers were
   admitted by their route (tool permissions, Cloudflare Access) and are not limited here;
3. confidence: at least `confidence_floor[tier]` (semantic: 0.1 by default);
4. personal data — fields marked with the `_personal` key of a JSON object value (`true`:
   the whole entry; a list: the named fields, which must exist):
   * only in `personal_data_tiers` (episodic and semantic): not in working memory (KV, the
     hot tier copied to the edge) nor procedural memory (shared by every instance of an
     agent type) — the hot/warm/cold ADR's "PII only in the warm tier";
   * only with a `subject`, so a subject erase can find every trace of it;
   * only from agent types in `personal_data_agent_types` when that is set;
5. `source` is 1-64 characters and `supersedes`, when given, is not the key itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.agent_types import BUILT_IN, AgentType
from agent_memory.governance.events import EventLog, EventTier, MemoryEvent, memory_written
from agent_memory.ids import sha256_hex
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock, SystemClock
from bindings.ports.d1 import D1Statement

Tier = EventTier


PERSONAL_MARK = "_personal"


ViolationCode = Literal[
    "too_large",
    "tier_not_allowed",
    "confidence_too_low",
    "personal_data_tier",
    "personal_data_without_subject",
    "personal_data_writer",
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


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: ViolationCode
    message: str


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    violations: list[Violation] = Field(default_factory=list)


class WriteDenied(ValueError):
    """The policy refused a proposal; nothing was written. `violations` says why."""

    code = "memory_write_denied"

    def __init__(self, proposal: WriteProposal, violations: Sequence[Violation]) -> None:
        reasons = "; ".join(f"{v.code}: {v.message}" for v in violations)
        super().__init__(f"memory write to {proposal.tier} {proposal.key!r} denied: {reasons}")
        self.proposal = proposal
        self.violations = list(violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.code,
                "message": str(self),
                "details": {
                    "tier": self.proposal.tier,
                    "key": self.proposal.key,
                    "violations": [v.model_dump() for v in self.violations],
                },
            }
        }


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def personal_marking(value: Any) -> tuple[str, ...] | None:
    """Read the `_personal` mark of a JSON object value (see the module docstring)."""
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
    personal_data_agent_types: frozenset[str] | None = None
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
        found: list[tuple[ViolationCode, str]] = []
        tier = proposal.tier
        try:
            size = len(proposal.content)
        except (TypeError, ValueError) as exc:
            found.append(("invalid_proposal", f"value is not JSON: {exc}"))
            size = 0
        limit = self.max_bytes.get(tier, 0)
        if size > limit:
            found.append(
                ("too_large", f"{size} bytes of JSON; the {tier} tier takes at most {limit}")
            )
        # Only an agent writing during one of its runs is held to its type's tiers; the
        # same type name on a platform write (an operator, a test) is just a label.
        allowed = self.allowed_tiers(proposal.agent_type) if proposal.run_id else None
        if allowed is not None and tier not in allowed:
            found.append(
                (
                    "tier_not_allowed",
                    f"agent type {proposal.agent_type!r} may write "
                    f"{', '.join(sorted(allowed))}, not {tier}",
                )
            )
        floor = self.confidence_floor.get(tier, 0.0)
        if proposal.confidence < floor:
            found.append(
                (
                    "confidence_too_low",
                    f"confidence {proposal.confidence:g} is below the {tier} floor {floor:g}",
                )
            )
        if not 1 <= len(proposal.source) <= 64:
            found.append(("invalid_proposal", "source must be 1-64 chars"))
        if proposal.supersedes is not None and proposal.supersedes == proposal.key:
            found.append(("invalid_proposal", "an entry cannot supersede itself"))
        fields = proposal.personal_fields()
        if fields is not None:
            found += self._personal_data(proposal, fields)
        violations = [Violation(code=code, message=message) for code, message in found]
        return Decision(allowed=not violations, violations=violations)

    def _personal_data(
        self, proposal: WriteProposal, fields: tuple[str, ...]
    ) -> list[tuple[ViolationCode, str]]:
        found: list[tuple[ViolationCode, str]] = []
        what = f"personal data ({', '.join(fields) if fields else 'the whole entry'})"
        if proposal.tier not in self.personal_data_tiers:
            tiers = ", ".join(sorted(self.personal_data_tiers))
            found.append(
                (
                    "personal_data_tier",
                    f"{what} may only be written to {tiers}, not {proposal.tier}",
                )
            )
        if not proposal.subject:
            found.append(
                (
                    "personal_data_without_subject",
                    f"{what} must name the subject it is about, so that erasing the subject "
                    "removes it",
                )
            )
        writers = self.personal_data_agent_types
        if writers is not None and proposal.agent_type not in writers:
            found.append(
                (
                    "personal_data_writer",
                    f"agent type {proposal.agent_type!r} may not write personal data",
                )
            )
        missing = [f for f in fields if not _has_path(proposal.value, f)]
        if missing:
            found.append(
                (
                    "personal_field_missing",
                    f"fields marked personal are not in the value: {', '.join(missing)}",
                )
            )
        return found


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
    ) -> None:
        self.tenant_id = tenant_id
        self.policy = policy or DEFAULT_POLICY
        self._clock: Clock = clock or SystemClock()
        self._events = events
        self._background = background

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
        optional = {
            "subject": proposal.subject,
            "supersedes": proposal.supersedes,
            "decision": proposal.decision,
        }
        payload: dict[str, Any] = {
            "key": proposal.key,
            "source": proposal.source,
            "confidence": proposal.confidence,
            "bytes": len(proposal.content),
            **{name: value for name, value in optional.items() if value},
        }
        fields = proposal.personal_fields()
        if fields is not None:
            payload["personal_fields"] = list(fields) or ["*"]
        event = memory_written(
            tenant_id=self.tenant_id,
            tier=proposal.tier,
            now=self._clock.now(),
            content_hash=proposal.content_hash,
            payload=payload,
            agent_type=proposal.agent_type,
            run_id=proposal.run_id,
        )
        return event if event_id is None else event.model_copy(update={"event_id": event_id})

    def event_statement(self, proposal: WriteProposal, event_id: str) -> D1Statement | None:
        """The event INSERT (insert-if-absent, id `event_id`) for a tier that commits the
        event in the same D1 batch as its write; None when this gate records no events."""
        if self._events is None:
            return None
        return self._events.statement(self.event(proposal, event_id), if_absent=True)

    def defer(self, proposals: Sequence[WriteProposal]) -> None:
        """Record events from synchronous code (Durable Object SQL tiers): through
        `background` (`ctx.waitUntil`); without one, events are not recorded here."""
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
        """Record the `memory_written` events of committed proposals."""
        if self._events is None or not proposals:
            return []
        ids = list(event_ids) if event_ids is not None else [None] * len(proposals)
        events = [self.event(p, i) for p, i in zip(proposals, ids, strict=True)]
        if self._background is not None:
            self._background.wait_until(self._record(events))
        else:
            await self._record(events)
        return events

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
